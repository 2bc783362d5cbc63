"""netns_allreduce_pairings: counts over own and cross-run pairings, per-point errors, input
errors."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from bench_scripts import load_script


def _rows(errors: dict[float, float]) -> list[dict[str, object]]:
    return [{"mbit": 10.0, "bytes": b, "rel_error": e, "ci_rel": (-0.02, 0.03)}
            for b, e in errors.items()]


def test_report_counts_within_10_percent_per_size_class_and_pairing_kind() -> None:
    mod = load_script("netns_allreduce_pairings", with_dir=True)
    own = {2048.0: 0.05, 8192.0: -0.2, 131072.0: 0.01}
    cross = {2048.0: 0.15, 8192.0: 0.0, 131072.0: -0.11}
    res = [{"cal": "a", "held": "a", "result": [{"ranks": 2, "held": _rows(own)}]},
           {"cal": "b", "held": "a", "result": [{"ranks": 2, "held": _rows(cross)}]}]
    lines = mod.report(res)
    assert lines[0].startswith("2 ranks, own pairings (1): within 10%: all sizes 2/3 (2-2 of 3);"
                               " 1-8 KiB 1/2 (1-1 of 2); >= 128 KiB 1/1 (1-1 of 1)")
    assert lines[1].startswith("2 ranks, all pairings (2): within 10%: all sizes 3/6 (1-2 of 3);"
                               " 1-8 KiB 2/4 (1-1 of 2); >= 128 KiB 1/2 (0-1 of 1)")
    assert "2048 B: 1/2 within 10%: +5.0% [-2.0%..+3.0%], +15.0%" in lines[2]
    assert "131072 B: 1/2 within 10%: +1.0% [-2.0%..+3.0%], -11.0%" in lines[4]


def test_a_missing_run_file_is_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mod = load_script("netns_allreduce_pairings", with_dir=True)
    monkeypatch.setattr(sys, "argv", ["p", str(tmp_path / "nothing")])
    assert mod.main() == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1


def _write_run(prefix: Path, scale: float, probe: bool) -> None:
    """A small saved run: 2 ranks, calibration at 25/100/400 Mbit/s, held out at 200 Mbit/s,
    every time the simulator's for a host ``scale`` times slower in its per-hop floor (75 us);
    with ``probe`` a probe point of ``scale`` x 0.2 ms."""
    from dataclasses import replace

    from realrun.allreduce_interleave import point_stats, write_stats
    from realrun.netns import with_tbf_burst
    from sim.transport_fit import predict_s, write_csv
    from sim.transports import TRANSPORTS

    tp = with_tbf_burst(replace(TRANSPORTS["gloo"], host_copy_Bps=0.0, hop_floor_s=75e-6 * scale,
                                bandwidth_efficiency=0.9, message_bytes=300.0))
    pts = []
    for part, mbit, size in [("cal", r, b) for r in (25.0, 100.0, 400.0)
                             for b in (1024, 16384, 262144)] + [("held", 200.0, 2048),
                                                               ("held", 200.0, 32768)]:
        t = predict_s(tp, 2, size, latency_s=0.0, bandwidth_Bps=mbit * 1e6 / 8, gap_s=1e-4)
        pts.append(point_stats(part, 2, mbit, size, [([t, t, t], 1e-4)]))
    if probe:
        pts.append(point_stats("probe", 2, 10000.0, 1024, [([scale * 2e-4] * 3, 1e-4)]))
    write_csv(f"{prefix}-calibration.csv", [s.measurement for s in pts if s.part == "cal"])
    write_csv(f"{prefix}-held-out.csv", [s.measurement for s in pts if s.part == "held"])
    write_stats(f"{prefix}-stats.json", pts)


def test_host_probe_scales_cross_run_pairings_by_the_probe_ratio(tmp_path: Path) -> None:
    mod = load_script("netns_allreduce_pairings", with_dir=True)
    _write_run(tmp_path / "a", 1.0, True)
    _write_run(tmp_path / "b", 1.3, True)
    runs = [str(tmp_path / "a"), str(tmp_path / "b")]
    plain = {(p["cal"], p["held"]): p for p in mod.pairings(runs)}
    probed = {(p["cal"], p["held"]): p for p in mod.pairings(runs, host_probe=True)}
    assert probed[("a", "a")]["host_scale"] == {2: 1.0}
    assert probed[("a", "b")]["host_scale"] == {2: pytest.approx(1.3)}
    assert probed[("b", "a")]["host_scale"] == {2: pytest.approx(1 / 1.3)}
    # own pairings are the same either way; a cross-run one moves toward the other run's speed
    assert probed[("a", "a")]["result"] == plain[("a", "a")]["result"]

    def small_err(p: dict) -> float:
        return abs(p["result"][0]["held"][0]["rel_error"])

    for pair in (("a", "b"), ("b", "a")):
        assert small_err(plain[pair]) > 0.1  # the 2 KiB call: mostly the floor
        assert small_err(probed[pair]) < 0.02


def test_host_probe_without_a_probe_is_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mod = load_script("netns_allreduce_pairings", with_dir=True)
    _write_run(tmp_path / "a", 1.0, False)
    monkeypatch.setattr(sys, "argv", ["p", str(tmp_path / "a"), "--host-probe"])
    assert mod.main() == 2
    err = capsys.readouterr().err
    assert err.startswith("error: run a: no host-speed probe") and err.count("\n") == 1
