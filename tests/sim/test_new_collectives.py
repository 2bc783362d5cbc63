"""double-tree, allgather-ring and allgather-direct as first-class collectives: ``compctl cost``
(both fidelities, every transport), ``compctl list collectives``, the selector's per-bucket
pricing, the simulator at both fidelities, and ``auto``'s unchanged default candidates."""

from __future__ import annotations

import json
import math

import pytest

from sim.collectives import closed_form as cf
from sim.compress.spec import get_spec
from sim.control.selector import (
    DEFAULT_ALLOWED,
    select_bucket_collectives,
    select_decision,
)
from sim.control.types import COLLECTIVES, Decision
from sim.entry import main
from sim.runner import SimConfig, run_simulation

NEW = ("double-tree", "allgather-ring", "allgather-direct")
BASE = ["--workers", "13", "--bytes", "100MB", "--latency-ms", "1", "--bandwidth-gbps", "10"]


@pytest.mark.parametrize("coll", NEW)
@pytest.mark.parametrize(
    "fidelity,transport",
    [("analytic", None), ("stepwise", "ideal"), ("stepwise", "nccl"), ("stepwise", "gloo")],
)
def test_cost_prices_every_new_collective(
    coll: str, fidelity: str, transport: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["cost", "--collective", coll, *BASE, "--density", "0.01", "--json"]
    argv += ["--fidelity", fidelity] + (["--transport", transport] if transport else [])
    assert main(argv) == 0
    obj = json.loads(capsys.readouterr().out)
    payload = obj["payload_bytes"]
    form = {"double-tree": cf.double_tree_allreduce, "allgather-ring": cf.allgather_ring,
            "allgather-direct": cf.allgather_direct}[coll](13, payload)
    assert obj["collective"] == coll
    assert obj["compressor"] == ("randomk" if coll == "double-tree" else "topk")
    assert math.isclose(obj["time_s"], form.time_s(1e-3, 10e9 / 8), rel_tol=1e-12)
    if fidelity == "stepwise":
        assert obj["transport"] == transport and obj["stepwise_time_s"] > 0
        if transport == "ideal":
            assert math.isclose(obj["stepwise_time_s"], obj["time_s"], rel_tol=1e-6)


def test_cost_text_prints_both_levels(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["cost", "--collective", "double-tree", *BASE, "--fidelity", "stepwise"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and "double-tree" in lines[0] and "stepwise (ideal" in lines[1]


def test_cost_rejects_a_sparse_compressor_on_double_tree(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["cost", "--collective", "double-tree", *BASE, "--compressor", "topk"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len([x for x in err.splitlines() if x.startswith("compctl: error:")]) == 1


def test_list_collectives(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "collectives", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["name"] for r in rows] == list(COLLECTIVES)
    by = {r["name"]: r for r in rows}
    assert {n for n, r in by.items() if r["auto"]} == set(DEFAULT_ALLOWED)
    assert by["double-tree"]["kind"] == "allreduce" and by["allgather-direct"]["kind"] == "allgather"
    assert main(["list", "collectives"]) == 0
    assert "2L a + (L + t) m b" in capsys.readouterr().out


def test_compressors_list_the_new_collectives() -> None:
    for name in ("none", "randomk", "fp16", "powersgd"):
        assert get_spec(name).supports("double-tree")
    for name in ("topk", "qsgd", "signsgd", "none", "dgc"):
        assert get_spec(name).supports("allgather-ring")
        assert get_spec(name).supports("allgather-direct")
    assert not get_spec("topk").supports("double-tree")
    assert not get_spec("powersgd").supports("allgather-direct")


def test_auto_default_candidates_are_unchanged() -> None:
    # auto keeps its picks on existing runs: the new collectives are opt-in (allowed=...).
    assert DEFAULT_ALLOWED == ("ring", "tree", "ps", "allgather", "artopk-ring", "artopk-tree")
    assert not set(NEW) & set(DEFAULT_ALLOWED)


def test_per_bucket_pricing_with_every_collective_picks_the_new_ones_where_cheaper() -> None:
    # 16 workers, 1 ms, 10 Gbit/s; a small latency-bound bucket and a large bandwidth-bound one.
    buckets = (4e3, 4e8)
    got = select_bucket_collectives(1e-3, 10e9 / 8, 16, buckets, 1.0, "none", allowed=COLLECTIVES)
    # Every candidate is priced from its own closed form: each pick is the brute-force minimum.
    for m, coll in zip(buckets, got, strict=True):
        costs = {}
        for c in COLLECTIVES:
            if c == "hierarchical" or not get_spec("none").supports(c):
                continue
            costs[c] = cf.collective_terms(c, 16, m).time_s(1e-3, 10e9 / 8)
        assert costs[coll] == min(costs.values())
    assert got[0] == "allgather-direct"  # one latency: the model's cheapest for a tiny bucket
    sparse = select_decision(1e-3, 10e9 / 8, 16, 4e8, (4e3, 4e8), 0.01, "topk",
                             allowed=COLLECTIVES)
    assert sparse.collectives_used()[0] in ("allgather-direct", "artopk-ring", "artopk-tree")
    assert select_decision(1e-3, 10e9 / 8, 16, 4e8, (4e3, 4e8), 1.0, "none",
                           allowed=("tree", "double-tree")) == Decision("none", 1.0, "double-tree")


@pytest.mark.parametrize("coll", NEW)
@pytest.mark.parametrize("fidelity", ["analytic", "stepwise", "events"])
def test_simulator_runs_each_new_collective(coll: str, fidelity: str) -> None:
    cfg = SimConfig(
        workload="resnet50", workers=12, trace="const:lat_ms=1,bw_gbps=10", iterations=5,
        collective=coll, density=0.01, seed=1, fidelity=fidelity,
    )
    records, meta = run_simulation(cfg)
    assert set(records["collective"]) == {coll}
    assert (records["comm_s"] > 0).all()
    assert meta["fidelity"] == fidelity


def test_configs_accept_the_new_collectives_and_reject_bad_pairs() -> None:
    from realrun.config import RealConfig
    from sim.config_check import check_config
    from sim.errors import InputError

    for coll, comp in (("double-tree", "randomk"), ("allgather-ring", "topk"),
                       ("allgather-direct", "qsgd")):
        check_config(SimConfig(workload="resnet50", workers=8, trace="const:lat_ms=1,bw_gbps=10",
                               iterations=2, collective=coll, density=0.01, compressor=comp))
        RealConfig(workload="digits-mlp", nproc=2, policy="fixed", collective=coll, density=0.01,
                   compressor=comp, emulation="none").check()
    with pytest.raises((InputError, ValueError)):
        check_config(SimConfig(workload="resnet50", workers=8, trace="const:lat_ms=1,bw_gbps=10",
                               iterations=2, collective="double-tree", density=0.01,
                               compressor="topk"))
