"""Every registered policy runs in the simulator, deterministically, its decisions costed."""

from __future__ import annotations

import numpy as np
import pytest

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
    assert meta["policy"]["name"] == policy
    # The recorded decision is the one whose cost the row holds: what one worker sends depends
    # on the decision alone (not on the link), so equal decisions send equal bytes, and for one
    # compressor and collective a higher density never sends fewer.
    per_decision = a.groupby(["compressor", "collective", "density"])["bytes_sent"]
    assert (per_decision.nunique() == 1).all(), per_decision.unique()
    for _, group in per_decision.first().groupby(level=[0, 1]):
        assert group.is_monotonic_increasing, group
