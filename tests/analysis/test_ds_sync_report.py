"""DS-Sync in sweeps and the report: a choice of its own, never a network class."""

from __future__ import annotations

from pathlib import Path

from analysis.load import load_results
from analysis.metrics import run_metrics
from analysis.recommend import recommendations
from sim.entry import main

SPEC = """
name = "ds"
seeds = 1
[base]
workload = "resnet50"
iterations = 30
convergence = "off"
[grid]
trace = ["const:lat_ms=0.1,bw_gbps=10", "const:lat_ms=5,bw_gbps=1"]
workers = [8]
[[cases]]
policy = "dense"
[[cases]]
policy = "dense"
sync = "ds-sync"
groups = 4
shuffle_every = 2
[[cases]]
policy = "fixed"
policy_params = { density = 0.01 }
sync = "ds-sync"
groups = 2
"""


def test_ds_sync_rows_in_which_scheme_on_which_network(tmp_path: Path) -> None:
    spec = tmp_path / "ds.toml"
    spec.write_text(SPEC)
    out = tmp_path / "out"
    assert main(["sweep", str(spec), "--out", str(out), "--quiet", "--jobs", "1",
                 "--no-report"]) == 0
    results = load_results(out)
    assert "groups" not in results.scenario_columns and "sync" not in results.scenario_columns
    labels = set(results.runs["policy_label"])
    assert any("ds-sync:g=4,k=2" in lab for lab in labels)
    assert any("ds-sync:g=2,k=1" in lab for lab in labels)
    rec = recommendations(results, run_metrics(results))
    assert len(rec) == 2  # one row per network, DS-Sync competing as a choice
    # Groups of 2 ranks on a slow link: the grouped choices beat plain dense allreduce.
    assert all("ds-sync" in r for r in rec["recommended"])
