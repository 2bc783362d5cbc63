"""Every registered policy runs in the simulator, deterministically, with valid decisions."""

from __future__ import annotations

import numpy as np
import pytest

from sim.compress.spec import get_spec
from sim.control.registry import policy_names
from sim.runner import SimConfig, run_simulation

POLICIES = [p for p in policy_names() if not p.startswith("test-")]


@pytest.mark.parametrize("policy", POLICIES)
def test_policy_runs_deterministically(policy: str) -> None:
    cfg = SimConfig(
        workload="resnet50",
        workers=16,
        trace="seed003-steps",
        policy=policy,
        iterations=40,
        seed=11,
    )
    a, meta = run_simulation(cfg)
    b, _ = run_simulation(cfg)
    assert a.equals(b)
    assert len(a) == 40 and (a["iter_s"] > 0).all() and np.isfinite(a["iter_s"]).all()
    for comp, coll in set(zip(a["compressor"], a["collective"], strict=True)):
        assert get_spec(comp).supports(coll)
    assert ((a["density"] > 0) & (a["density"] <= 1)).all()
    assert meta["policy"]["name"] == policy
