"""Every registered policy runs inside the simulator, and its decisions are recorded."""

from __future__ import annotations

from typing import Any

import pytest

import sim.engine
from sim.control import Decision, Observation, policy_names
from sim.runner import SimConfig, run_simulation

# A link whose latency rises 8x and bandwidth falls 5x after 0.2 s (a few iterations of the
# tiny workload), so the adaptive policies have something to react to.
TRACE = "steps:dur_s=0.2/60,lat_ms=1/8,bw_gbps=25/5"


class _Spy:
    """Wraps a policy: passes everything through, and keeps what it saw and what it decided."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.seen: list[Observation] = []
        self.decided: list[Decision] = []

    def decide(self, obs: Observation) -> Decision:
        self.seen.append(obs)
        decision = self._inner.decide(obs)
        self.decided.append(decision)
        return decision

    def __getattr__(self, name: str) -> Any:  # reset, bind_oracle, bind_progress, ...
        return getattr(self._inner, name)


@pytest.mark.parametrize("name", policy_names())
def test_policy_runs_in_the_simulator_and_decisions_are_recorded(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    spies: list[_Spy] = []
    make = sim.engine.make_controller  # the engine builds its controller through sim.control.world

    def spying_make_controller(*args: Any, **kwargs: Any) -> Any:
        spies.append(_Spy(make(*args, **kwargs)))
        return spies[-1]

    monkeypatch.setattr(sim.engine, "make_controller", spying_make_controller)
    cfg = SimConfig(workload="tiny", workers=8, trace=TRACE, policy=name, iterations=30,
                    monitor="on")
    records, meta = run_simulation(cfg)
    assert len(records) == 30 and len(spies) == 1
    spy = spies[0]
    # Every row records the decision the policy returned for that iteration, in order.
    assert len(spy.decided) == 30
    assert list(records["density"]) == [d.density for d in spy.decided]
    assert list(records["compressor"]) == [d.compressor for d in spy.decided]
    assert list(records["collective"]) == [d.collective for d in spy.decided]
    assert records["density"].between(0.0, 1.0, inclusive="right").all()
    # The policy is told, one step later, what happened under its own decision.
    assert [o.step for o in spy.seen] == list(range(30))
    assert spy.seen[0].decision is None and spy.seen[0].comm_s is None
    for k, obs in enumerate(spy.seen[1:]):
        assert obs.decision == spy.decided[k]
        assert obs.comm_s == records["comm_s"].iloc[k]
        assert obs.compute_s == records["compute_s"].iloc[k]
        assert obs.gain == records["gain"].iloc[k]
    # Same config, same decisions.
    again, _ = run_simulation(cfg)
    assert list(again["density"]) == list(records["density"])
    assert list(again["collective"]) == list(records["collective"])
