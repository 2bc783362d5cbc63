"""The time-to-target table's bookkeeping: best fixed, best adaptive, done-when counts."""

from __future__ import annotations

import bisect
import math
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from bench_scripts import load_script

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "tta_table.py"


def _module() -> Any:
    return load_script("tta_table", with_dir=True)


def test_tta_is_the_end_of_the_first_iteration_reaching_the_target() -> None:
    tt = _module()
    rec = pd.DataFrame({"progress": [1.0, 2.0, 3.0], "start_s": [0.0, 1.0, 3.0],
                        "iter_s": [1.0, 2.0, 2.0]})
    assert tt.tta_s(rec, 2.0) == 3.0
    assert math.isinf(tt.tta_s(rec, 9.0))


def test_summary_counts_the_done_when_bars() -> None:
    tt = _module()
    a = tt.Scenario("t1", "w", 8, "stepped", 10.0, {1.0: 12.0, 0.1: 10.0},
                    {"oracle": 9.0, "mpc": 9.3, "dense": 12.0})
    b = tt.Scenario("t2", "w", 8, "congestion", 10.0, {1.0: 20.0, 0.1: 11.0},
                    {"oracle": 10.0, "mpc": 11.5, "dense": 20.0})
    assert a.best_fixed == (0.1, 10.0)
    assert a.best_adaptive() == ("mpc", 9.3)
    s = tt.summarise([a, b])
    assert s["oracle_fastest"] == 2
    assert s["best_adaptive_within_5pct_of_oracle"] == 1
    assert s["best_adaptive_at_least_best_fixed"] == 1
    assert s["oracle_within_1pct_of_fastest"] == 2
    assert s["best_adaptive_more_than_5pct_behind_best_fixed"] == 0  # 11.5 / 11.0 = 1.045
    assert s["best_adaptive_worst_vs_best_fixed"] == 11.5 / 11.0
    assert s["winner_per_class"] == {"congestion": "mpc", "stepped": "mpc"}


def test_held_out_real_traces_are_in_the_repository() -> None:
    tt = _module()
    root = _PATH.parents[1]
    for held in (tt.HELD_OUT, tt.HELD_OUT_2, tt.HELD_OUT_3, tt.HELD_OUT_4, tt.HELD_OUT_5):
        files = [t for t in held if t.endswith(".csv")]
        assert files, "each held-out set names at least one imported real trace"
    for f in [t for t in (*tt.HELD_OUT, *tt.HELD_OUT_2, *tt.HELD_OUT_3, *tt.HELD_OUT_4,
                          *tt.HELD_OUT_5)
              if t.endswith(".csv")]:
        text = (root / f).read_text()
        assert "# source:" in text and "time_s,latency_s,bandwidth_Bps" in text


def test_second_held_out_set_shares_nothing_with_the_first_or_the_bundled_set() -> None:
    tt = _module()
    assert not set(tt.HELD_OUT_2) & (set(tt.HELD_OUT) | set(tt.BUNDLED))
    seeds = {p for t in tt.HELD_OUT_2 for p in t.split(",") if p.split(":")[-1].startswith("seed=")}
    old = {p for t in tt.HELD_OUT for p in t.split(",") if p.split(":")[-1].startswith("seed=")}
    assert seeds and not seeds & old


def test_third_held_out_set_shares_no_trace_seed_or_file_with_the_others() -> None:
    tt = _module()
    earlier = set(tt.HELD_OUT) | set(tt.HELD_OUT_2) | set(tt.BUNDLED)
    assert not set(tt.HELD_OUT_3) & earlier

    def seeds(held: dict[str, str]) -> set[str]:
        return {p.split(":")[-1] for t in held for p in t.split(",")
                if p.split(":")[-1].startswith("seed=")}

    assert seeds(tt.HELD_OUT_3) and not seeds(tt.HELD_OUT_3) & (
        seeds(tt.HELD_OUT) | seeds(tt.HELD_OUT_2))
    # Its real traces come from sources no other set imports.
    stems = {Path(t).stem.split("-", 1)[1] for t in tt.HELD_OUT_3 if t.endswith(".csv")}
    older = {Path(t).stem.split("-", 1)[1] for t in (*tt.HELD_OUT, *tt.HELD_OUT_2)
             if t.endswith(".csv")}
    assert stems and not stems & older and not stems & set(tt.BUNDLED)


def test_fourth_held_out_set_shares_no_trace_seed_or_file_with_the_others() -> None:
    tt = _module()
    earlier = set(tt.HELD_OUT) | set(tt.HELD_OUT_2) | set(tt.HELD_OUT_3) | set(tt.BUNDLED)
    assert not set(tt.HELD_OUT_4) & earlier

    def seeds(held: dict[str, str]) -> set[str]:
        return {p.split(":")[-1] for t in held for p in t.split(",")
                if p.split(":")[-1].startswith("seed=")}

    assert seeds(tt.HELD_OUT_4) and not seeds(tt.HELD_OUT_4) & (
        seeds(tt.HELD_OUT) | seeds(tt.HELD_OUT_2) | seeds(tt.HELD_OUT_3))
    stems = {Path(t).stem.split("-", 1)[1] for t in tt.HELD_OUT_4 if t.endswith(".csv")}
    older = {Path(t).stem.split("-", 1)[1] for t in (*tt.HELD_OUT, *tt.HELD_OUT_2, *tt.HELD_OUT_3)
             if t.endswith(".csv")}
    assert stems and not stems & older and not stems & set(tt.BUNDLED)


def test_fourth_held_out_geo_pairs_file_is_what_its_script_writes(tmp_path: Path) -> None:
    mod = load_script("make_heldout4_geo_pairs")
    out = tmp_path / "pairs.csv"
    assert mod.main([str(out)]) == 0
    assert out.read_text() == (_PATH.parents[1] / "benchmarks/data/heldout4-geo-pairs.csv"
                               ).read_text()


def _assert_a_new_set(n: int) -> list[str]:
    """The ``n``-th held-out set shares no trace, generator seed, generator setting (all but the
    seed) or file with the bundled set and the sets before it; its two files are named for it.
    Returns those files."""
    tt = _module()
    held = getattr(tt, f"HELD_OUT_{n}")
    older = [tt.HELD_OUT] + [getattr(tt, f"HELD_OUT_{k}") for k in range(2, n)]
    earlier = set(tt.BUNDLED).union(*older)
    assert not set(held) & earlier

    def seeds(h: dict[str, str]) -> set[str]:
        return {p.split(":")[-1] for t in h for p in t.split(",")
                if p.split(":")[-1].startswith("seed=")}

    assert seeds(held) and not seeds(held) & set().union(*(seeds(h) for h in older))

    def unseeded(t: str) -> str:
        return ",".join(p for p in t.split(",") if not p.split(":")[-1].startswith("seed="))

    assert not {unseeded(t) for t in held} & {unseeded(t) for t in earlier}
    files = [t for t in held if t.endswith(".csv")]
    assert len(files) == 2 and all(Path(f).name.startswith(f"heldout{n}-") for f in files)
    return files


@pytest.mark.parametrize("n", [5, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17])
def test_each_held_out_set_shares_no_trace_seed_generator_setting_or_file(n: int) -> None:
    """The fifth set on (the sixth checks its files too, below)."""
    _assert_a_new_set(n)


def test_fifth_held_out_files_are_what_their_script_writes(tmp_path: Path) -> None:
    mod = load_script("make_heldout5_traces")
    assert mod.main([str(tmp_path)]) == 0
    for name in ("heldout5-tram-queue.csv", "heldout5-geo-rings.csv"):
        assert (tmp_path / name).read_text() == (
            _PATH.parents[1] / "benchmarks/data" / name).read_text()
    # The queue's latency moves against the bandwidth: 1 ms + 256 KiB / bandwidth.
    rows = [r.split(",") for r in (tmp_path / "heldout5-tram-queue.csv").read_text(
        ).splitlines() if r[:1].isdigit()]
    for _, lat, bw in rows:
        assert float(lat) == pytest.approx(1e-3 + 262_144 / float(bw))


def test_real_time_to_target_uses_the_trailing_mean_loss() -> None:
    mod = load_script("bench_real_tta")
    n = 30
    loss = [2.0] * 15 + [1.0] * 15  # trailing mean of 10 reaches 1.5 at index 19
    rec = pd.DataFrame({"loss": loss, "start_s": [float(i) for i in range(n)],
                        "iter_s": [1.0] * n})
    assert mod.time_to_target_s(rec, 1.5) == 20.0
    assert math.isinf(mod.time_to_target_s(rec, 0.5))


def test_reuse_runs_only_the_named_policies_and_keeps_the_rest() -> None:
    """With a saved cell, the fixed densities and the other policies are taken over as saved and
    only the named policy is simulated (its time is the same as a full run's); a cell the saved
    run lacks is refused."""
    from sim.errors import InputError

    tt = _module()
    trace = tt.BUNDLED[0]
    saved = tt.Scenario(trace, "lstm-ptb", 8, "c", 1.0, {1.0: 123.0, 0.1: 45.0},
                        {"oracle": 40.0, "mpc": 41.0, "dense": 999.0})
    fresh = tt.Scenario(trace, "lstm-ptb", 8, "c")
    out = tt.run_all([fresh], policies=["dense"], known=[saved])[0]
    assert out.fixed == saved.fixed
    assert out.policies["oracle"] == 40.0 and out.policies["mpc"] == 41.0
    full = tt.run_scenario(tt.Scenario(trace, "lstm-ptb", 8, "c"), ["dense"])
    assert out.policies["dense"] == full.policies["dense"] != 999.0
    with pytest.raises(InputError, match="no cell"):
        tt.run_all([tt.Scenario(trace, "lstm-ptb", 64, "c")], policies=["dense"], known=[saved])


@pytest.mark.parametrize("extra", [[], ["--policies", "mpc"]])
def test_bench_controllers_reuse_errors_are_one_line_and_exit_2(tmp_path: Path,
                                                                 extra: list[str]) -> None:
    """--reuse without --policies, or of a file that is not there: one line, status 2."""
    import subprocess

    script = _PATH.parent / "bench_controllers.py"
    res = subprocess.run([sys.executable, str(script), "--tta", "--reuse",
                          str(tmp_path / "missing.json"), *extra],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and res.stderr.startswith("bench_controllers: ")
    assert res.stdout == ""


def test_checkpoint_keeps_finished_cells_and_resumes_without_rerunning(tmp_path: Path) -> None:
    """Each finished cell is a JSON line; a second run takes it from there (a marked cell is
    not simulated again), a cut-off last line is run again, and a line of another run or a
    broken line before the end is refused."""
    import json

    from sim.errors import InputError

    tt = _module()
    trace = tt.BUNDLED[0]
    ck = tmp_path / "run.jsonl"
    first = tt.run_all([tt.Scenario(trace, "lstm-ptb", 8, "c")], policies=["dense"],
                       checkpoint=ck)[0]
    row = json.loads(ck.read_text())
    assert row["fidelity"] == "analytic" and row["policies_run"] == ["dense"]
    assert tt.from_row(row).policies == first.policies
    row["policies"]["dense"] = 12345.0  # a marker: taken from the file, not re-simulated
    ck.write_text(json.dumps(row) + "\n" + '{"trace": "cut sh')
    again = tt.run_all([tt.Scenario(trace, "lstm-ptb", 8, "c")], policies=["dense"],
                       checkpoint=ck)[0]
    assert again.policies["dense"] == 12345.0 and again.fixed == first.fixed
    assert ck.read_text() == json.dumps(row) + "\n"  # the cut line is gone, appends stay valid
    with pytest.raises(InputError, match="another run"):
        tt.run_all([tt.Scenario(trace, "lstm-ptb", 8, "c")], policies=["mpc"], checkpoint=ck)
    ck.write_text('{"broken\n' + json.dumps(row) + "\n")
    with pytest.raises(InputError, match="line 1 is not JSON"):
        tt.run_all([tt.Scenario(trace, "lstm-ptb", 8, "c")], policies=["dense"], checkpoint=ck)


def test_sixth_held_out_set_shares_no_trace_seed_generator_setting_or_file() -> None:
    files = _assert_a_new_set(6)
    for f in files:
        text = (_PATH.parents[1] / f).read_text()
        assert "# source:" in text and "time_s,latency_s,bandwidth_Bps" in text


def test_sixth_held_out_files_are_what_their_script_writes(tmp_path: Path) -> None:
    mod = load_script("make_heldout6_traces", with_dir=True)
    assert mod.main([str(tmp_path)]) == 0
    for name in ("heldout6-series-fcc-metro.csv", "heldout6-geo-standard-mesh.csv"):
        assert (tmp_path / name).read_text() == (
            _PATH.parents[1] / "benchmarks/data" / name).read_text()
    # In series: the lesser bandwidth of the two sources and the sum of their latencies.
    fcc = mod._read(mod.SERIES[0])
    metro = mod._read(mod.SERIES[1])
    rows = [r.split(",") for r in (tmp_path / "heldout6-series-fcc-metro.csv").read_text(
        ).splitlines() if r[:1].isdigit()]
    assert len(rows) > 100
    for t, lat, bw in rows:
        a, b = mod._at(*fcc, float(t)), mod._at(*metro, float(t))
        assert float(bw) == min(a[1], b[1])
        assert float(lat) == pytest.approx(a[0] + b[0])


def test_an_oracle_only_first_pass_writes_its_scenarios_without_a_summary(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``--policies oracle`` (the fixed grid and the oracle, completed later with ``--reuse``)
    has no adaptive policy to summarise: the JSON holds the scenarios and no summary, and the
    table names no best adaptive policy (it stopped on an empty min() before)."""
    import json

    tt = _module()
    done = [tt.Scenario(tt.BUNDLED[0], "lstm-ptb", 8, "c", 1.0, {1.0: 12.0, 0.1: 10.0},
                        {"oracle": 9.0})]
    monkeypatch.setattr(tt, "run_all", lambda *a, **k: done)
    bench = load_script("bench_controllers")
    assert bench.main(["--tta", "--quick", "--json", "--policies", "oracle"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["summary"] is None
    assert tt.from_json(data)[0].fixed == done[0].fixed
    assert bench.main(["--tta", "--quick", "--policies", "oracle"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith("  -")


def test_seventh_held_out_files_are_what_their_script_writes(tmp_path: Path) -> None:
    mod = load_script("make_heldout7_traces", with_dir=True)
    assert mod.main([str(tmp_path)]) == 0
    for name in ("heldout7-parallel-ferry-car-fast.csv", "heldout7-geo-jitter.csv"):
        assert (tmp_path / name).read_text() == (
            _PATH.parents[1] / "benchmarks/data" / name).read_text()
    # Parallel paths replayed 4x faster: the sum of the two bandwidths, the larger latency.
    srcs = [mod._read(name) for name in mod.PARALLEL]
    fast = [(p / mod.SPEEDUP, [(t / mod.SPEEDUP, lat, bw) for t, lat, bw in rows])
            for p, rows in srcs]
    rows = [r.split(",") for r in (tmp_path / "heldout7-parallel-ferry-car-fast.csv"
                                   ).read_text().splitlines() if r[:1].isdigit()]
    assert len(rows) > 1000
    for t, lat, bw in rows[:400]:
        a, b = mod._at(*fast[0], float(t)), mod._at(*fast[1], float(t))
        assert float(bw) == pytest.approx(a[1] + b[1])
        assert float(lat) == max(a[0], b[0])
    # The jitter stays inside each pair's measured [min_rtt, max_rtt] / 2.
    lats = [float(r.split(",")[1]) for r in (tmp_path / "heldout7-geo-jitter.csv").read_text(
        ).splitlines() if r[:1].isdigit()]
    assert len(lats) == mod.PAIRS * int(mod.HOLD_S / mod.JITTER_DT_S)
    assert len(set(lats)) > 200  # pairs whose mdev_rtt the matrix leaves empty hold still


def test_refixed_reuse_simulates_the_fixed_grid_again_and_keeps_the_oracle() -> None:
    tt = _module()
    trace = tt.BUNDLED[0]
    saved = tt.Scenario(trace, "lstm-ptb", 8, "c", 1.0, {1.0: 123.0, 0.1: 45.0},
                        {"oracle": 40.0, "mpc": 41.0})
    out = tt.run_all([tt.Scenario(trace, "lstm-ptb", 8, "c")], policies=["dense"],
                     known=[saved], refixed=True)[0]
    assert out.policies["oracle"] == 40.0
    assert set(out.fixed) == set(tt.GRID) and out.fixed[1.0] != 123.0
    full = tt.run_scenario(tt.Scenario(trace, "lstm-ptb", 8, "c"), ["dense"])
    assert out.fixed == full.fixed


def test_eighth_held_out_files_are_what_their_script_writes(tmp_path: Path) -> None:
    mod = load_script("make_heldout8_traces", with_dir=True)
    assert mod.main([str(tmp_path)]) == 0
    for name in ("heldout8-car2-reversed-slow.csv", "heldout8-geo-relay.csv"):
        assert (tmp_path / name).read_text() == (
            _PATH.parents[1] / "benchmarks/data" / name).read_text()
    # Reversed and slowed: the trace at time t is the source at (period - t / SLOWDOWN).
    period, src = mod._read(mod.SOURCE)
    lines = (tmp_path / "heldout8-car2-reversed-slow.csv").read_text().splitlines()
    out = [tuple(float(x) for x in r.split(",")) for r in lines if r[:1].isdigit()]
    assert len(out) == len(src) and out[0][0] == 0.0
    for t, lat, bw in out[1:-1]:
        mid = period - (t + 1e-6) / mod.SLOWDOWN
        i = bisect.bisect_right([r[0] for r in src], mid) - 1
        assert bw == pytest.approx(src[i][2] * mod.SCALE)
        assert lat == mod.LATENCY_MS * 1e-3
    # Relay paths: each step is two hops' latency sum and lesser bandwidth.
    from traces.importers.skyplane import skyplane_pairs

    pairs = skyplane_pairs(_PATH.parents[1] / "traces/data/skyplane", rtt="min")
    text = (tmp_path / "heldout8-geo-relay.csv").read_text()
    paths = [p.split(">") for p in text.split("make_heldout8_traces.py: ")[1].splitlines()[0]
             .split("; ")]
    steps = [r.split(",") for r in text.splitlines() if r[:1].isdigit()]
    assert len(paths) == len(steps) == mod.PATHS
    for (a, b, c), (_, lat, bw) in zip(paths, steps, strict=True):
        assert len({a, b, c}) == 3
        assert float(lat) == pytest.approx(pairs[(a, b)][0] + pairs[(b, c)][0])
        assert float(bw) == min(pairs[(a, b)][1], pairs[(b, c)][1])


@pytest.mark.parametrize("n", [9, 10, 11, 12, 13, 14, 15, 16, 17])
def test_held_out_traces_all_load(n: int) -> None:
    """Every trace of the ``n``-th set parses (a typo in a generator setting fails here, not
    in the one run the set gets)."""
    from sim.engine import resolve_trace

    tt = _module()
    for spec in getattr(tt, f"HELD_OUT_{n}"):
        path = _PATH.parents[1] / spec
        assert resolve_trace(str(path) if spec.endswith(".csv") else spec).labels


def test_ninth_held_out_files_are_what_their_script_writes(tmp_path: Path) -> None:
    mod = load_script("make_heldout9_traces", with_dir=True)
    assert mod.main([str(tmp_path)]) == 0
    for name in ("heldout9-handover-train-fcc.csv", "heldout9-geo-bidir.csv"):
        assert (tmp_path / name).read_text() == (
            _PATH.parents[1] / "benchmarks/data" / name).read_text()
    # Handover: in each HOLD_S window the link is one source at the same clock time, with
    # that source's latency, bandwidth x SCALE; the windows alternate, starting cellular.
    srcs = [mod._read(name) for name in mod.HANDOVER]
    rows = [tuple(float(x) for x in r.split(",")) for r in (
        tmp_path / "heldout9-handover-train-fcc.csv").read_text().splitlines() if r[:1].isdigit()]
    assert rows[0][0] == 0.0 and len(rows) > 200
    times = [r[0] for r in rows]
    for k in range(int(mod.DURATION_S / mod.DT_S)):
        t = k * mod.DT_S
        _, lat, bw = rows[bisect.bisect_right(times, t) - 1]
        which = int(t // mod.HOLD_S) % 2
        assert lat == (mod.CELL_LATENCY_MS, mod.WIRED_LATENCY_MS)[which] * 1e-3
        assert bw == pytest.approx(mod._at(*srcs[which], t)[1] * mod.SCALE)
    # Both directions: each step is the lesser throughput of a->b and b->a.
    from traces.importers.skyplane import skyplane_pairs

    pairs = skyplane_pairs(_PATH.parents[1] / "traces/data/skyplane")
    text = (tmp_path / "heldout9-geo-bidir.csv").read_text()
    chosen = [p.split("<>") for p in text.split("make_heldout9_traces.py: ")[1].splitlines()[0]
              .split("; ")]
    steps = [r.split(",") for r in text.splitlines() if r[:1].isdigit()]
    assert len(chosen) == len(steps) == mod.PAIRS == len({tuple(c) for c in chosen})
    for (a, b), (_, lat, bw) in zip(chosen, steps, strict=True):
        assert float(bw) == min(pairs[(a, b)][1], pairs[(b, a)][1])
        assert float(lat) == pairs[(a, b)][0]


#: Per held-out set whose two files were imported by ``compctl trace import``: the real trace
#: its throughput file scales (a bundled or earlier imported copy of the same source), that
#: file, its latency (s), its scale against the copy, its Skyplane file and that file's regions.
_IMPORTED = {
    13: ("traces/data/norway-ferry-1.csv", "heldout13-ferry-metro-wan.csv", 0.015, 1500.0,
         "heldout13-geo-min5.csv", 5),
    14: ("benchmarks/data/heldout-norway-car-1-x1000.csv", "heldout14-car-regional.csv", 0.006,
         2.5, "heldout14-geo-premium6.csv", 6),
    15: ("benchmarks/data/heldout3-norway-tram-1-x1000.csv", "heldout15-tram-wan.csv", 0.02, 0.6,
         "heldout15-geo-standard5.csv", 5),
    16: ("traces/data/fcc-10322.csv", "heldout16-fcc-regional.csv", 0.004, 3000.0,
         "heldout16-geo-premium-min6.csv", 6),
    17: ("traces/data/norway-train-1.csv", "heldout17-train-wan.csv", 0.012, 2000.0,
         "heldout17-geo-any-avg7.csv", 7),
}


@pytest.mark.parametrize("n", sorted(_IMPORTED))
def test_held_out_files_are_their_sources_as_imported(tmp_path: Path, n: int) -> None:
    """The throughput file is its source with the bandwidth scaled and the latency set, step for
    step and with the same period; the geo file is what ``compctl trace import skyplane`` writes
    for the command in its header."""
    from sim.entry import main

    source, name, latency_s, scale, geo_name, regions = _IMPORTED[n]
    data = _PATH.parents[1] / "benchmarks/data"
    src, trace = _PATH.parents[1] / source, data / name
    got, want = _rows(trace), _rows(src)
    assert len(got) == len(want) > 100
    for (t, lat, bw), (t0, _, bw0) in zip(got, want, strict=True):
        assert float(t) == pytest.approx(float(t0)) and float(lat) == latency_s
        assert float(bw) == pytest.approx(float(bw0) * scale, rel=1e-9)
    period = [r for r in src.read_text().splitlines() if r.startswith("# period_s")]
    assert period and period[0] in trace.read_text()
    geo = data / geo_name
    cmd = geo.read_text().split("imported with compctl ")[1].splitlines()[0].split()
    assert main([*cmd, "--out", str(tmp_path / "geo.csv")]) == 0
    assert _rows(tmp_path / "geo.csv") == _rows(geo) and len(_rows(geo)) == regions


def _rows(path: Path) -> list[list[str]]:
    return [r.split(",") for r in path.read_text().splitlines() if r[:1].isdigit()]


def test_tenth_held_out_files_are_what_their_script_writes(tmp_path: Path) -> None:
    mod = load_script("make_heldout10_traces", with_dir=True)
    assert mod.main([str(tmp_path)]) == 0
    for name in ("heldout10-tram-fast.csv", "heldout10-geo-star.csv"):
        assert (tmp_path / name).read_text() == (
            _PATH.parents[1] / "benchmarks/data" / name).read_text()
    # Faster: sample k of the source holds from t_k / SPEEDUP, with the same order and the
    # source's bandwidth x SCALE; the period shrinks by the same factor.
    period, src = mod._read(mod.SOURCE)
    text = (tmp_path / "heldout10-tram-fast.csv").read_text()
    rows = [tuple(float(x) for x in r.split(",")) for r in text.splitlines() if r[:1].isdigit()]
    assert len(rows) == len(src)
    for (t, lat, bw), (ts, _, bws) in zip(rows, src, strict=True):
        assert t == pytest.approx(ts / mod.SPEEDUP)
        assert lat == mod.LATENCY_MS * 1e-3
        assert bw == pytest.approx(bws * mod.SCALE)
    assert f"# period_s: {period / mod.SPEEDUP!r}" in text
    # Stars: each step is the slowest of its spokes into the hub, on both terms.
    from traces.importers.skyplane import skyplane_pairs

    pairs = skyplane_pairs(_PATH.parents[1] / "traces/data/skyplane")
    text = (tmp_path / "heldout10-geo-star.csv").read_text()
    stars = [p.split("<") for p in text.split("make_heldout10_traces.py: ")[1].splitlines()[0]
             .split("; ")]
    steps = [r.split(",") for r in text.splitlines() if r[:1].isdigit()]
    assert len(stars) == len(steps) == mod.STEPS
    for (hub, spokes), (_, lat, bw) in zip(stars, steps, strict=True):
        legs = spokes.split("+")
        assert len(set(legs)) == mod.SPOKES and hub not in legs
        assert float(lat) == max(pairs[(s, hub)][0] for s in legs)
        assert float(bw) == min(pairs[(s, hub)][1] for s in legs)


def test_an_opt_in_variant_runs_under_its_whole_spec() -> None:
    """``mpc:key=value`` runs mpc with that option (and the target), keyed by the spec; a
    malformed option is refused."""
    from sim.errors import InputError

    tt = _module()
    assert tt.policy_spec("mpc:monitor_bandwidth_drift=0.1:regime_steps=4:compressor=topk") == (
        "mpc", (("monitor_bandwidth_drift", 0.1), ("regime_steps", 4), ("compressor", "topk")))
    with pytest.raises(InputError, match="key=value"):
        tt.policy_spec("mpc:oops")
    sc = tt.run_scenario(tt.Scenario(tt.BUNDLED[0], "lstm-ptb", 8, "c"),
                         ["mpc:monitor_bandwidth_drift=0.1"])
    rec = tt._run(tt.BUNDLED[0], "lstm-ptb", 8, "mpc", int(6 * sc.target),
                  (("target_progress", sc.target), ("monitor_bandwidth_drift", 0.1)))
    assert sc.policies == {"mpc:monitor_bandwidth_drift=0.1": tt.tta_s(rec, sc.target)}


def test_a_run_that_saw_the_true_link_is_no_adaptive_policy(monkeypatch: Any) -> None:
    tt = _module()
    truth = f"mpc:{tt.SIM_MONITOR}=truth"
    a = tt.Scenario("t1", "w", 8, "stepped", 10.0, {1.0: 12.0, 0.1: 10.0},
                    {"oracle": 9.0, "mpc": 9.6, truth: 9.1})
    assert a.best_adaptive() == ("mpc", 9.6)
    s = tt.summarise([a])
    assert s["best_adaptive_within_5pct_of_oracle"] == 0
    assert s["winner_per_class"] == {"stepped": "mpc"}
    assert not tt.Scenario("t", "w", 8, "c", 1.0, {}, {"oracle": 1.0, truth: 1.0}).has_adaptive()
    # run_scenario gives the run the monitor mode and the policy the rest of the spec.
    calls: list[tuple[str, tuple[Any, ...], str]] = []

    def fake_run(trace: str, workload: str, workers: int, policy: str, iters: int,
                 params: tuple[Any, ...], fidelity: str = "analytic",
                 monitor: str = "on") -> Any:
        calls.append((policy, params, monitor))
        return pd.DataFrame({"progress": [1e9], "start_s": [0.0], "iter_s": [1.0]})

    monkeypatch.setattr(tt, "_run", fake_run)
    monkeypatch.setattr(tt, "target_progress", lambda w: 1.0)
    known = tt.Scenario("t", "w", 8, "c", 1.0, {1.0: 1.0}, {"oracle": 1.0})
    sc = tt.run_scenario(tt.Scenario("t", "w", 8, "c"), [f"{truth}:history=20"], known=known)
    assert calls == [("mpc", (("target_progress", 1.0), ("history", 20)), "truth")]
    assert sc.policies[f"{truth}:history=20"] == 1.0


def test_a_pinging_variant_is_an_adaptive_policy_whose_run_pays_the_pings(
        monkeypatch: Any) -> None:
    """``sim_latency_pings`` / ``sim_ping_every`` go to the run (a real run's ``--latency-pings
    --ping-every``), not to the policy; the variant is adaptive (a real hook can ping)."""
    tt = _module()
    spec = "mpc:sim_latency_pings=1:sim_ping_every=5:history=20"
    a = tt.Scenario("t1", "w", 8, "stepped", 10.0, {1.0: 12.0}, {"oracle": 9.0, spec: 9.2})
    assert a.best_adaptive() == (spec, 9.2)
    calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def fake_run(trace: str, workload: str, workers: int, policy: str, iters: int,
                 params: tuple[Any, ...], fidelity: str = "analytic",
                 monitor: str = "on", **run: Any) -> Any:
        calls.append((policy, params, run))
        return pd.DataFrame({"progress": [1e9], "start_s": [0.0], "iter_s": [1.0]})

    monkeypatch.setattr(tt, "_run", fake_run)
    monkeypatch.setattr(tt, "target_progress", lambda w: 1.0)
    known = tt.Scenario("t", "w", 8, "c", 1.0, {1.0: 1.0}, {"oracle": 1.0})
    tt.run_scenario(tt.Scenario("t", "w", 8, "c"), [spec], known=known)
    assert calls == [("mpc", (("target_progress", 1.0), ("history", 20)),
                      {"latency_pings": 1, "ping_every": 5})]
    # The real thing: the pings' time is in the run's records.
    monkeypatch.undo()
    plain = tt._run(tt.BUNDLED[0], "lstm-ptb", 8, "fixed", 12,
                    (("density", 0.1), ("compressor", "topk"), ("collective", "allgather")))
    pinged = tt._run(tt.BUNDLED[0], "lstm-ptb", 8, "fixed", 12,
                     (("density", 0.1), ("compressor", "topk"), ("collective", "allgather")),
                     latency_pings=1, ping_every=5)
    assert pinged["iter_s"].sum() > plain["iter_s"].sum()
