"""Loading sweeps, metrics with closed-form answers, and the self-contained HTML report."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sweep_fakes import GRAD_BYTES, LINKS, fake_run, normalize

from analysis.browser_check import check_in_browser, find_browser
from analysis.load import load_results, load_sweep, policy_label
from analysis.metrics import run_metrics, time_to_accuracy_s
from analysis.report import render_report, write_report
from sim.entry import main
from sim.errors import InputError
from sim.rundir import write_run
from sim.sweep import expand_spec, parse_spec, run_sweep

SPEC = {
    "name": "fake",
    "seeds": 2,
    "base": {"iterations": 6},  # even: the wan delay's alternation averages out exactly
    "grid": {"trace": ["lan", "wan"]},
    "cases": [
        {"policy": "dense"},
        {"policy": "fixed", "policy_params": {"density": 0.1}},
        {"policy": "fixed", "policy_params": {"density": 0.01}},
        {"policy": "dc2", "policy_params": {"density": 0.05}},
    ],
}


def _sweep(tmp_path: Path, **extra: object) -> Path:
    raw = json.loads(json.dumps(SPEC))
    raw["base"].update(extra)
    spec = parse_spec(raw)
    out = tmp_path / "sweep"
    run_sweep(expand_spec(spec, normalize), out, run_fn=fake_run, jobs=1, spec=spec, progress=False)
    return out


def _iter_s(trace: str, density: float) -> float:
    lat, bw = LINKS[trace]
    return 0.1 + lat + GRAD_BYTES * density / bw


def test_load_sweep_is_one_tidy_frame(tmp_path: Path) -> None:
    tidy = load_sweep(_sweep(tmp_path))
    assert len(tidy) == 2 * 4 * 2 * 6
    for col in ("run_id", "policy_label", "trace", "seed", "iter_s", "density"):
        assert col in tidy.columns
    assert tidy.groupby("run_id").size().eq(6).all()
    assert set(tidy["policy_label"]) == {
        "dense", "fixed density=0.1", "fixed density=0.01", "dc2 density=0.05"
    }


def test_speedups_match_closed_form(tmp_path: Path) -> None:
    res = load_results(_sweep(tmp_path))
    assert res.scenario_columns == ["seed", "trace"]
    m = run_metrics(res).set_index(["trace", "policy_label", "seed"]).sort_index()
    for trace in LINKS:
        for label, d in [("dense", 1.0), ("fixed density=0.1", 0.1), ("dc2 density=0.05", 0.05)]:
            row = m.loc[(trace, label, 0)]
            assert row["mean_iter_s"] == pytest.approx(_iter_s(trace, d))
            assert row["speedup_vs_dense"] == pytest.approx(_iter_s(trace, 1.0) / _iter_s(trace, d))
            # best fixed on iteration time is the lowest density, 0.01
            assert row["speedup_vs_best_fixed"] == pytest.approx(
                _iter_s(trace, 0.01) / _iter_s(trace, d)
            )
            assert row["total_bytes"] == pytest.approx(6 * GRAD_BYTES * d)
    assert (m["speedup_basis"] == "iteration time").all()


def test_time_to_accuracy_basis_when_runs_have_accuracy(tmp_path: Path) -> None:
    res = load_results(_sweep(tmp_path, with_accuracy=True))
    m = run_metrics(res)
    assert m["speedup_basis"].eq("time to target pred_accuracy").all()
    # target per scenario = the lowest final accuracy (the 0.01-density run); it reaches it last
    for _, grp in m.groupby(["trace", "seed"]):
        low = grp[grp["policy_label"] == "fixed density=0.01"]
        assert float(low["tta_s"].iloc[0]) == pytest.approx(float(low["total_time_s"].iloc[0]))
        assert grp["tta_s"].notna().all()


def test_iteration_speedups_stay_on_iteration_time_when_tta_is_the_basis(tmp_path: Path) -> None:
    m = run_metrics(load_results(_sweep(tmp_path, with_accuracy=True)))
    assert not any(c.endswith(("_x", "_y")) for c in m.columns)  # no merge clashes
    assert m["tta_target"].notna().all()
    m = m.set_index(["trace", "policy_label", "seed"]).sort_index()
    for trace in LINKS:
        row = m.loc[(trace, "fixed density=0.1", 0)]
        assert row["iter_speedup_vs_dense"] == pytest.approx(
            _iter_s(trace, 1.0) / _iter_s(trace, 0.1)
        )
        assert row["iter_speedup_vs_best_fixed"] == pytest.approx(
            _iter_s(trace, 0.01) / _iter_s(trace, 0.1)
        )


def test_time_to_accuracy_closed_form() -> None:
    run = pd.DataFrame(
        {"start_s": [0.0, 1.0, 3.0], "iter_s": [1.0, 2.0, 2.0], "pred_accuracy": [0.1, 0.5, 0.9]}
    )
    assert time_to_accuracy_s(run, "pred_accuracy", 0.5) == 3.0
    assert time_to_accuracy_s(run, "pred_accuracy", 0.05) == 1.0
    assert np.isnan(time_to_accuracy_s(run, "pred_accuracy", 0.95))


def test_policy_label_shows_shortcuts() -> None:
    assert policy_label({"policy": "fixed", "density": 0.01, "collective": "ring"}) == (
        "fixed collective=ring density=0.01"
    )
    assert policy_label({"policy": "dense", "policy_params": {}}) == "dense"


def _images(text: str) -> list[bytes]:
    return [base64.b64decode(m) for m in re.findall(r'src="data:image/png;base64,([^"]+)"', text)]


def test_report_is_self_contained_with_every_plot(tmp_path: Path) -> None:
    out = _sweep(tmp_path)
    page = write_report(out, tmp_path / "r.html")
    text = page.read_text()
    imgs = _images(text)
    assert len(imgs) == 3  # density/delay, breakdown, speed-up (no heatmap grid, no real runs)
    assert all(png.startswith(b"\x89PNG\r\n\x1a\n") for png in imgs)
    assert text.count("<img") == len(imgs)
    assert not re.search(r'(src|href)="(?!data:)', text)  # nothing fetched from elsewhere
    assert "fixed density=0.01" in text and "<table" in text


def test_report_shows_failures_and_missing_runs(tmp_path: Path) -> None:
    raw = json.loads(json.dumps(SPEC))
    raw["cases"].append({"policy": "boom"})
    spec = parse_spec(raw)
    out = tmp_path / "sweep"
    run_sweep(expand_spec(spec, normalize), out, run_fn=fake_run, jobs=1, spec=spec, progress=False)
    text = render_report(load_results(out))
    assert "Failed runs" in text and "RuntimeError: policy exploded" in text


def test_heatmap_appears_for_a_latency_bandwidth_grid(tmp_path: Path) -> None:
    for i, (lat, bw) in enumerate([(1e-4, 1e9), (1e-4, 1e10), (1e-2, 1e9), (1e-2, 1e10)]):
        for policy, d in [("dense", 1.0), ("fixed", 0.01)]:
            rec, meta = fake_run({"policy": policy, "policy_params": {"density": d}})
            rec["latency_s"], rec["bandwidth_Bps"] = lat, bw
            rec["iter_s"] = 0.1 + lat * (1 if policy == "dense" else 50) + 1e8 * d / bw
            meta["config"]["trace"] = f"const{i}"
            write_run(tmp_path / "runs" / f"{i}-{policy}", rec, meta)
    text = render_report(load_results(tmp_path / "runs"))
    assert "Fastest policy map" in text
    assert len(_images(text)) == 3  # breakdown, speed-up, map (links constant: no time plot)


def test_single_run_and_sim_vs_real_collection(tmp_path: Path) -> None:
    sim_rec, sim_meta = fake_run({"policy": "fixed", "policy_params": {"density": 0.1}})
    real_rec, real_meta = fake_run(
        {"policy": "fixed", "policy_params": {"density": 0.1}, "source": "real"}
    )
    real_rec["iter_s"] *= 1.1
    write_run(tmp_path / "v" / "sim", sim_rec, sim_meta)
    write_run(tmp_path / "v" / "real", real_rec, real_meta)
    single = render_report(load_results(tmp_path / "v" / "sim"))
    assert len(_images(single)) == 1  # constant single run: the breakdown only
    both = load_results(tmp_path / "v")
    assert both.kind == "collection" and sorted(both.runs["source"]) == ["real", "sim"]
    assert "Simulated vs real" in render_report(both)


def test_load_rejects_non_results(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        load_results(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="holds no runs"):
        load_results(tmp_path / "empty")


def test_report_cli_writes_page_and_json(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = _sweep(tmp_path)
    assert main(["report", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["runs"]) == 16 and "speedup_vs_dense" in doc["runs"][0]
    assert (out / "report.html").is_file()
    assert main(["report", str(tmp_path / "nothing")]) == 2
    assert "no such file" in capsys.readouterr().err


@pytest.mark.skipif(find_browser() is None, reason="no headless Chromium (apt-get install chromium)")
def test_report_opens_in_headless_browser(tmp_path: Path) -> None:
    page = write_report(_sweep(tmp_path), tmp_path / "r.html")
    shot = tmp_path / "shot.png"
    res = check_in_browser(page, screenshot=shot)
    assert res.images == 3 and res.decoded == 3 and res.errors == 0
    assert shot.read_bytes().startswith(b"\x89PNG")


def test_report_cli_exports_figures(tmp_path: Path) -> None:
    out = _sweep(tmp_path)
    figs = tmp_path / "figs"
    assert main(["report", str(out), "--no-html", "--figures", str(figs)]) == 0
    names = sorted(p.name for p in figs.iterdir())
    assert names == [
        "fake-density-and-link-delay-over-time.png",
        "fake-iteration-time-breakdown.png",
        "fake-speed-up-per-policy.png",
    ]
    assert not (out / "report.html").exists()


def test_report_says_when_planned_runs_are_missing(tmp_path: Path) -> None:
    import shutil

    out = _sweep(tmp_path)
    victim = sorted((out / "runs").iterdir())[0]
    shutil.rmtree(victim)  # as if the sweep had been interrupted before this run
    res = load_results(out)
    assert res.missing == 1 and len(res.runs) == 15
    assert "1 planned run(s) are not finished" in render_report(res)
