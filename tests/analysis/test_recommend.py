"""The report's first section: a recommendation per network class and every assumption."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from sweep_fakes import GRAD_BYTES, LINKS, fake_run, normalize

from analysis.load import load_results
from analysis.metrics import run_metrics
from analysis.recommend import assumptions, recommendations
from analysis.report import render_report
from sim.entry import main
from sim.sweep import expand_spec, parse_spec, run_sweep

SPEC = {
    "name": "fake",
    "seeds": 2,
    "base": {"iterations": 4},
    "grid": {"trace": ["lan", "wan"]},
    "cases": [
        {"policy": "dense"},
        {"policy": "fixed", "policy_params": {"density": 0.01}},
        {"policy": "dc2", "policy_params": {"density": 0.05}},
    ],
}


def _iter_s(trace: str, density: float) -> float:
    lat, bw = LINKS[trace]
    return 0.1 + lat + GRAD_BYTES * density / bw


def test_one_recommendation_per_network_with_margin_and_spread(tmp_path: Path) -> None:
    spec = parse_spec(json.loads(json.dumps(SPEC)))
    out = tmp_path / "s"
    run_sweep(expand_spec(spec, normalize), out, run_fn=fake_run, jobs=1, spec=spec, progress=False)
    results = load_results(out)
    rec = recommendations(results, run_metrics(results)).set_index("network")
    assert sorted(rec.index) == ["lan", "wan"]
    for trace in ("lan", "wan"):
        row = rec.loc[trace]
        assert row["recommended"] == "fixed density=0.01"
        assert row["runner-up"] == "dc2 density=0.05"
        best, second = _iter_s(trace, 0.01), _iter_s(trace, 0.05)
        assert row["mean iteration time (s, mean)"] == pytest.approx(best)
        assert row["margin"] == f"{(second / best - 1) * 100:.1f}% faster"
        assert row["seed spread (s)"] == pytest.approx(0.0)
        assert row["how sure"].startswith("clear")
    html = render_report(results)
    headings = re.findall(r"<h2[^>]*>([^<]+)</h2>", html)
    assert headings[:2] == ["Which policy on which network", "Assumptions behind these numbers"]


def test_the_assumptions_box_lists_borrowed_traces_and_assumed_scales(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text(
        "[base]\nworkload = 'resnet50'\nworkers = 2\niterations = 5\ntrace = 'seed003-steps'\n"
        "compress_scale = 0.05\n[grid]\npolicy = ['dense', 'dc2-aimd']\n"
    )
    out = tmp_path / "out"
    assert main(["sweep", str(spec), "--out", str(out), "--quiet", "--jobs", "1"]) == 0
    notes = assumptions(load_results(out))
    text = " ".join(notes)
    assert "borrowed from the captured" in text and "resnet50" in text
    assert "compress_scale = 0.05" in text
    # resnet50 models a GPU: its compression costs are the GPU reference, and the box says so.
    assert "Compression costs: h100-reference" in text
    assert "cpu-measured" not in text
    assert "simulated" in text and "modelled, not measured" in text
    page = (out / "report.html").read_text()
    assert page.index("Assumptions behind these numbers") < page.index("<img")


def test_the_network_figure_has_delay_and_bandwidth_panels() -> None:
    import numpy as np
    import pandas as pd

    from analysis.plots import plot_density_delay

    n = 8
    frames = []
    for rid, dens in (("a", np.linspace(1, 0.1, n)), ("b", np.full(n, 1.0))):
        frames.append(
            pd.DataFrame(
                {
                    "run_id": rid,
                    "policy_label": rid,
                    "start_s": np.arange(n, dtype=float),
                    "density": dens,
                    "latency_s": np.r_[np.full(n // 2, 1e-3), np.full(n // 2, 5e-3)],
                    "bandwidth_Bps": np.r_[np.full(n // 2, 1.25e9), np.full(n // 2, 0.25e9)],
                    "seed": 0,
                }
            )
        )
    fig = plot_density_delay(pd.concat(frames, ignore_index=True), [])
    assert fig is not None
    labels = [ax.get_ylabel() for ax in fig.axes]
    assert labels[:3] == ["link delay (ms)", "bandwidth (Gbit/s)", "density (kept fraction)"]
    bw_line = fig.axes[1].get_lines()[0].get_ydata()
    assert max(bw_line) == pytest.approx(10.0) and min(bw_line) == pytest.approx(2.0)
