"""Every registered policy runs inside the simulator, and its decisions are recorded."""

from __future__ import annotations

import pytest

from sim.control import policy_names
from sim.runner import SimConfig, run_simulation

# A link whose latency rises 8x and bandwidth falls 5x after 0.2 s (a few iterations of the
# tiny workload), so the adaptive policies have something to react to.
TRACE = "steps:dur_s=0.2/60,lat_ms=1/8,bw_gbps=25/5"


@pytest.mark.parametrize("name", policy_names())
def test_policy_runs_in_the_simulator_and_decisions_are_recorded(name: str) -> None:
    cfg = SimConfig(workload="tiny", workers=8, trace=TRACE, policy=name, iterations=30,
                    monitor="on")
    records, meta = run_simulation(cfg)
    assert len(records) == 30
    assert records["density"].between(0.0, 1.0, inclusive="right").all()
    assert set(records["collective"]) <= {"ring", "tree", "rhd", "ps", "allgather",
                                           "artopk-ring", "artopk-tree", "hierarchical"}
    # Same config, same decisions.
    again, _ = run_simulation(cfg)
    assert list(again["density"]) == list(records["density"])
    assert list(again["collective"]) == list(records["collective"])


