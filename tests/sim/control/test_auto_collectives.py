"""The ``auto_collectives`` option: which collectives ``collective="auto"`` may pick, in the
simulator (config, CLI, sweeps' ``from_dict``) and in the real-run configuration."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.control.selector import (
    DEFAULT_ALLOWED,
    canonical_auto_collectives,
    collective_time_s,
    resolve_auto_collectives,
    select_collective,
)
from sim.control.types import COLLECTIVES, Observation
from sim.control.world import make_controller
from sim.entry import main
from sim.errors import InputError
from sim.rundir import read_run
from sim.runner import SimConfig, run_simulation
from sim.workloads import load_profile

# A latency-bound link: the default set's best is the recursive-doubling allgather (top-k) and
# the binomial tree (dense); the wider set has a one-latency allgather and a half-bytes tree.
_LAT_S, _BW_BPS = 20e-3, 100e9 / 8
_TRACE = "const:lat_ms=20,bw_gbps=100"


def test_resolution_of_keywords_and_lists() -> None:
    assert resolve_auto_collectives(None) == DEFAULT_ALLOWED
    assert resolve_auto_collectives("default") == DEFAULT_ALLOWED
    assert resolve_auto_collectives("all") == COLLECTIVES
    assert resolve_auto_collectives(["tree", "double-tree"]) == ("tree", "double-tree")
    assert resolve_auto_collectives(" tree, double-tree ") == ("tree", "double-tree")
    assert canonical_auto_collectives(["tree", "double-tree"]) == "tree,double-tree"
    assert canonical_auto_collectives(None) is None


@pytest.mark.parametrize(
    "bad", ["butterfly", ["ring", "nope"], [], "ring,,tree", ["ring", "ring"], 3, ["all", "ring"]]
)
def test_bad_values_are_input_errors(bad: object) -> None:
    with pytest.raises(InputError):
        resolve_auto_collectives(bad)
    with pytest.raises(InputError):
        SimConfig(workload="tiny", workers=4, trace=_TRACE, auto_collectives=bad)  # type: ignore[arg-type]


_WIDE = ["tree", "double-tree", "allgather", "allgather-direct"]


@pytest.mark.parametrize(
    ("policy", "params", "default_pick", "all_pick", "list_pick"),
    [
        ("fixed", {"collective": "auto", "density": 0.01, "compressor": "topk"},
         "allgather", "allgather-direct", "allgather-direct"),
        # Under "all" the dense pick is rhd (the model's dominant allreduce); the list without
        # it picks the double tree.
        ("dense", {"collective": "auto"}, "tree", "rhd", "double-tree"),
    ],
)
def test_wider_set_changes_the_pick_where_it_is_cheaper(
    policy: str, params: dict[str, object], default_pick: str, all_pick: str, list_pick: str
) -> None:
    grad_bytes = int(load_profile("resnet50").grad_bytes(4))
    obs = Observation(step=1, world_size=64, grad_bytes=grad_bytes, latency_s=_LAT_S,
                      bandwidth_Bps=_BW_BPS)
    picks = {}
    for key, option in (("none", None), ("default", "default"), ("all", "all"), ("list", _WIDE)):
        ctl = make_controller(policy, params, seed=0, auto_collectives=option)
        picks[key] = ctl.decide(obs).collective
    assert picks == {"none": default_pick, "default": default_pick, "all": all_pick,
                     "list": list_pick}
    comp = "none" if policy == "dense" else "topk"
    dens = 1.0 if policy == "dense" else 0.01
    times = {c: collective_time_s(c, _LAT_S, _BW_BPS, 64, grad_bytes, dens, comp)
             for c in (default_pick, all_pick, list_pick)}
    assert times[all_pick] < times[default_pick] and times[list_pick] < times[default_pick]
    assert select_collective(_LAT_S, _BW_BPS, 64, grad_bytes, dens, comp) == default_pick


def test_density_policies_and_mpc_take_the_set() -> None:
    for policy in ("mpc", "dc2-aimd"):
        ctl = make_controller(policy, {}, seed=0, auto_collectives="all")
        builder = ctl._builder  # type: ignore[attr-defined]
        assert builder.allowed == COLLECTIVES
    mpc = make_controller("mpc", {}, seed=0, auto_collectives="ring,artopk-tree")
    assert mpc._candidates == {  # type: ignore[attr-defined]
        "none": ("ring",), "topk": ("artopk-tree",)
    }


def test_a_set_the_compressor_cannot_use_is_an_input_error() -> None:
    with pytest.raises(InputError, match="can use none of"):
        make_controller("fixed", {"collective": "auto", "density": 0.01, "compressor": "topk"},
                        seed=0, auto_collectives=["ring", "tree"])
    with pytest.raises(InputError, match="can use none of"):
        make_controller("dense", {"collective": "auto"}, seed=0, auto_collectives="artopk-ring")


def _sim_argv(out: Path, *extra: str) -> list[str]:
    return ["sim", "--workload", "resnet50", "--workers", "64", "--trace", _TRACE,
            "--policy", "fixed", "--collective", "auto", "--density", "0.01",
            "--iterations", "4", "--out", str(out), "--quiet", *extra]


def test_cli_default_is_byte_identical_and_all_changes_the_records(tmp_path: Path) -> None:
    assert main(_sim_argv(tmp_path / "a")) == 0
    assert main(_sim_argv(tmp_path / "b", "--auto-collectives", "default")) == 0
    assert main(_sim_argv(tmp_path / "c", "--auto-collectives", "all")) == 0
    a, meta_a = read_run(tmp_path / "a")
    b, _ = read_run(tmp_path / "b")
    c, meta_c = read_run(tmp_path / "c")
    assert "auto_collectives" not in meta_a["config"]
    assert meta_c["config"]["auto_collectives"] == "all"
    assert list(a["collective"]) == list(b["collective"])
    assert list(a["collective"][1:]) == ["allgather"] * 3
    assert list(c["collective"][1:]) == ["allgather-direct"] * 3
    assert c["comm_s"].iloc[1:].sum() < a["comm_s"].iloc[1:].sum()


def test_config_round_trip_keeps_the_set() -> None:
    cfg = SimConfig.from_dict({"workload": "tiny", "workers": 4, "trace": _TRACE,
                               "auto_collectives": ["tree", "double-tree"]})
    assert cfg.auto_collectives == "tree,double-tree"
    assert SimConfig.from_dict(cfg.to_dict()) == cfg
    plain = SimConfig(workload="tiny", workers=4, trace=_TRACE)
    assert "auto_collectives" not in plain.to_dict()


@pytest.mark.parametrize(
    "change", [["--auto-collectives", "butterfly"], ["--auto-collectives", "ring,tree"]]
)
def test_cli_bad_sets_exit_2_with_one_line(
    change: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert main(_sim_argv(out, *change)) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and not out.exists()


def test_real_config_accepts_and_hands_on_the_set() -> None:
    from realrun.config import RealConfig

    cfg = RealConfig.from_dict({"workload": "digits-mlp", "nproc": 2, "policy": "fixed",
                                "collective": "auto", "density": 0.01, "emulation": "none",
                                "auto_collectives": ["allgather", "allgather-direct"]})
    assert cfg.auto_collectives == "allgather,allgather-direct"
    cfg.check()
    assert RealConfig.from_dict(cfg.to_dict()) == cfg
    ctl = cfg.controller()
    obs = Observation(step=1, world_size=64, grad_bytes=100_000_000, latency_s=_LAT_S,
                      bandwidth_Bps=_BW_BPS)
    assert ctl.decide(obs).collective == "allgather-direct"
    plain = RealConfig(workload="digits-mlp", nproc=2, emulation="none")
    assert "auto_collectives" not in plain.to_dict()
    with pytest.raises(InputError):
        RealConfig(workload="digits-mlp", nproc=2, emulation="none", auto_collectives="nope")
    bad = RealConfig(workload="digits-mlp", nproc=2, policy="fixed", collective="auto",
                     density=0.01, emulation="none", auto_collectives="ring")
    with pytest.raises(InputError):
        bad.check()


def test_sweep_style_config_runs_with_a_list() -> None:
    cfg = SimConfig.from_dict({"workload": "resnet50", "workers": 64, "trace": _TRACE,
                               "policy": "dense", "collective": "auto", "iterations": 3,
                               "auto_collectives": ["tree", "double-tree"]})
    rec, _ = run_simulation(cfg)
    assert list(rec["collective"][1:]) == ["double-tree"] * 2
