"""Bounded-loss runs in a sweep and the report: their own labels, scheme rows and baselines."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.load import load_results, policy_label
from analysis.metrics import run_metrics
from analysis.recommend import assumptions, recommendations
from sim.entry import main

SPEC = """
name = "bl"
seeds = 1
[base]
workload = "resnet50"
workers = 8
iterations = 40
trace = "const:lat_ms=0.05,bw_gbps=10"
collective = "ring"
convergence = "off"
[grid]
packet_loss = [0.0, 0.002]
[[cases]]
policy = "dense"
[[cases]]
policy = "dense"
loss_bound = 0.01
deadline_s = 0.02
[[cases]]
policy = "fixed"
density = 0.1
"""


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("bl")
    (d / "spec.toml").write_text(SPEC)
    assert main(["sweep", str(d / "spec.toml"), "--out", str(d / "out"), "--quiet"]) == 0
    return d / "out"


def test_labels_name_the_transport() -> None:
    assert policy_label({"policy": "dense"}) == "dense"
    assert policy_label({"policy": "dense", "loss_bound": 0.01, "deadline_s": 0.02}) == (
        "dense loss-bound=0.01 deadline=20ms"
    )


def test_each_network_gets_a_row_per_transport(sweep: Path) -> None:
    res = load_results(sweep)
    m = run_metrics(res)
    # The dense baseline is the plain-transport dense run, not the bounded-loss one.
    bl = m[m["loss_bound"].notna()]
    assert (bl["speedup_vs_dense"] >= 1.0).all()
    lossy = m[(m["packet_loss"] == 0.002) & m["loss_bound"].notna()]
    assert float(lossy["speedup_vs_dense"].iloc[0]) > 1.0
    rec = recommendations(res, m)
    assert sorted(set(rec["scheme"])) == ["bounded-loss transport", "plain transport"]
    assert len(rec) == 4
    assert (rec.groupby("network")["best on this network"].apply(lambda s: (s == "yes").sum())
            >= 1).all()
    assert any("Packet loss is modelled" in a for a in assumptions(res))
