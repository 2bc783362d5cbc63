"""``SimConfig.warmup_steps``: the real hook's warm-up iterations in the simulator (dense
default decision, not asked of the policy, not observed by the link monitor)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from analysis.validate import sim_config_for
from sim.errors import InputError
from sim.runner import SimConfig, run_simulation

BASE: dict[str, Any] = {"workload": "digits-cnn", "workers": 2, "trace": "const:lat_ms=1,bw_mbps=20",
        "iterations": 12, "convergence": "off"}


def _run(policy: str, params: dict[str, Any], warmup_steps: int = 0) -> Any:
    return run_simulation(SimConfig.from_dict({**BASE, "policy": policy, "policy_params": params,
                                               "warmup_steps": warmup_steps}))


def test_default_leaves_the_configuration_as_before() -> None:
    assert "warmup_steps" not in SimConfig.from_dict(BASE).to_dict()
    cfg = SimConfig.from_dict({**BASE, "warmup_steps": 2.0})
    assert cfg.warmup_steps == 2 and cfg.to_dict()["warmup_steps"] == 2
    assert SimConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(InputError, match="warmup_steps"):
        SimConfig.from_dict({**BASE, "warmup_steps": -1})


def test_warm_up_iterations_run_dense_and_feed_nothing() -> None:
    params = {"density": 0.1, "collective": "allgather"}
    cold, _ = _run("fixed", params)
    warm, _ = _run("fixed", params, 2)
    assert warm["density"].tolist()[:2] == [1.0, 1.0]
    assert warm["compressor"].tolist()[:2] == ["none", "none"]
    assert warm["collective"].tolist()[:2] == ["ring", "ring"]
    assert warm["density"].tolist()[2:] == cold["density"].tolist()[2:] == [0.1] * 10
    assert warm["iter_s"].iloc[0] > cold["iter_s"].iloc[0]  # dense costs more


def test_an_adaptive_policy_first_decides_after_the_warm_up() -> None:
    """dc2-aimd jumps to an informed start once the monitor has an estimate: after the first
    iteration without warm-up, after the second with one warm-up iteration (as the real hook,
    whose monitor skips the warm-up iteration)."""
    params = {"target_s": 0.01, "collective": "allgather"}
    cold, _ = _run("dc2-aimd", params)
    warm, _ = _run("dc2-aimd", params, 1)
    assert cold["density"].iloc[0] == 1.0 and cold["density"].iloc[1] < 1.0
    assert warm["density"].iloc[:2].tolist() == [1.0, 1.0] and warm["density"].iloc[2] < 1.0
    assert math.isnan(warm["est_bandwidth_Bps"].iloc[0])
    assert not math.isnan(cold["est_bandwidth_Bps"].iloc[0])


def test_validate_simulates_the_real_runs_warm_up() -> None:
    meta: dict[str, Any] = {"source": "real",
            "config": {"workload": "digits-cnn", "nproc": 2, "trace": BASE["trace"],
                       "policy": "dense", "policy_params": {}, "steps": 10, "seed": 0}}
    assert sim_config_for(meta).warmup_steps == 1  # RealConfig's default
    meta["config"]["warmup_steps"] = 3
    assert sim_config_for(meta).warmup_steps == 3
    meta["config"]["use_hook"] = False
    assert sim_config_for(meta).warmup_steps == 0  # plain DDP: no hook, no warm-up
