"""``mpc``'s plan-time shortcuts give what the plain definitions give, to the bit: the seconds
per iteration priced once per density for all forecast scenarios
(:meth:`MpcPricing._iteration_s_on`) against :meth:`MpcPricing._iteration_s` per scenario, at
every plan of simulated runs (buckets, learned corrections and windows included)."""

from __future__ import annotations

from typing import Any

import pytest

from sim.control.policies.mpc import MpcPolicy
from sim.runner import SimConfig, run_simulation

CASES = [
    ("digits-mlp", 2, "steps:dur_s=0.25/0.25,lat_ms=1/1,bw_gbps=0.01/0.0005,loop=true",
     {"target_progress": 124.1}),
    ("resnet50", 64, "steps:dur_s=5/5,lat_ms=1/5,bw_gbps=10/1,loop=true", {}),
]


@pytest.mark.parametrize(("workload", "workers", "trace", "params"), CASES)
def test_scenario_pricing_is_the_per_link_pricing(
    workload: str, workers: int, trace: str, params: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plain = MpcPolicy._plan_scores
    checked: list[int] = []

    def both(self: Any, obs: Any, *args: Any, **kw: Any) -> dict[float, float]:
        links = self._scenario_links()
        for d in self.grid:
            fast = self._iteration_s_on(obs, d, links)
            each = [self._iteration_s(obs, d, lat, bw) for lat, bw in links]
            assert fast == each  # floats compared exactly
        checked.append(len(obs.bucket_bytes or ()))
        return plain(self, obs, *args, **kw)

    monkeypatch.setattr(MpcPolicy, "_plan_scores", both)
    run_simulation(SimConfig(workload=workload, workers=workers, trace=trace, policy="mpc",
                             policy_params=params, iterations=150, seed=2, convergence="off"))
    assert len(checked) >= 5
