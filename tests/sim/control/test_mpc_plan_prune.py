"""``mpc``'s pruned plan search (:meth:`MpcPlanning._plan_scores_reference` with ``exact``,
two-phase plans cut by their first phase and single-density plans by their floors;
the fast search that runs in its place computes the same, ``test_mpc_search.py``) picks what
the full search picks: the same least-scoring density, the same least score and the same score
for the held density, at every plan of simulated runs; and it does less work."""

from __future__ import annotations

from typing import Any

import pytest

from sim.control.policies import mpc_plan
from sim.control.policies.mpc import MpcPolicy
from sim.runner import SimConfig, run_simulation

CASES = [
    ("digits-mlp", 2, "steps:dur_s=0.25/0.25,lat_ms=1/1,bw_gbps=0.01/0.0005,loop=true",
     {"target_progress": 124.1}),
    ("digits-mlp", 2, "steps:dur_s=0.1/0.3,lat_ms=1/4,bw_gbps=0.02/0.001,loop=true",
     {"target_progress": 80.0, "switch_chunks": 2}),
    ("resnet50", 8, "steps:dur_s=5/5,lat_ms=1/5,bw_gbps=10/1,loop=true", {"target_progress": 60.0}),
]


@pytest.mark.parametrize(("workload", "workers", "trace", "params"), CASES)
def test_pruned_plans_choose_as_the_full_search(
    workload: str, workers: int, trace: str, params: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    full_fn = MpcPolicy._plan_scores_reference
    finishes = {"full": 0, "pruned": 0}
    which = ["full"]
    real_finish = mpc_plan.MpcPlanning._finish

    def counted(self: Any, *args: Any) -> float:
        finishes[which[0]] += 1
        return real_finish(self, *args)

    checked = []

    def both(self: Any, obs: Any, delta: float, two: bool, bw_scale: float = 1.0,
             exact: float | None = None) -> dict[float, float]:
        which[0] = "full"
        full = full_fn(self, obs, delta, two, bw_scale)
        if exact is None:
            return full
        which[0] = "pruned"
        pruned = full_fn(self, obs, delta, two, bw_scale, exact)
        key_f = min(self.grid, key=lambda d: (full[d], -d))
        key_p = min(self.grid, key=lambda d: (pruned[d], -d))
        assert key_p == key_f
        assert pruned[key_p] == full[key_f]
        assert pruned[exact] == full[exact]
        assert all(pruned[d] >= full[key_f] for d in self.grid)
        checked.append(two)
        return pruned

    monkeypatch.setattr(MpcPolicy, "_plan_scores", both)
    monkeypatch.setattr(mpc_plan.MpcPlanning, "_finish", counted)
    run_simulation(SimConfig(workload=workload, workers=workers, trace=trace, policy="mpc",
                             policy_params=params, iterations=200, seed=3, convergence="off"))
    assert len(checked) >= 5 and any(checked)  # two-phase plans among them
    assert finishes["pruned"] < finishes["full"]


SINGLE = [
    # The real-run settings (single-density plans towards a target) and a rolling horizon.
    ("digits-mlp", 2, "steps:dur_s=0.25/0.25,lat_ms=1/1,bw_gbps=0.01/0.0005,loop=true",
     {"target_progress": 190.4, "replan_persist": 3, "window_steps": 30, "switch_chunks": 3,
      "replan_band": True, "two_phase": False}),
    ("lstm-ptb", 16, "walk:seed=3,latency_s=0.002,bandwidth_Bps=1.25e8,bandwidth_sigma=0.3,"
     "duration_s=300", {}),
]


@pytest.mark.parametrize(("workload", "workers", "trace", "params"), SINGLE)
def test_single_density_plans_pruned_by_their_floors_choose_as_the_full_search(
    workload: str, workers: int, trace: str, params: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A density whose floor (a lower bound of its score) exceeds the least score found is not
    # finished: the same least density and score, the held density's score exact, every
    # floor at most the score it stands for, and fewer finishes.
    full_fn = MpcPolicy._plan_scores_reference
    finishes = {"full": 0, "pruned": 0}
    which = ["full"]
    real_finish = mpc_plan.MpcPlanning._finish

    def counted(self: Any, *args: Any) -> float:
        finishes[which[0]] += 1
        return real_finish(self, *args)

    checked = []

    def both(self: Any, obs: Any, delta: float, two: bool, bw_scale: float = 1.0,
             exact: float | None = None) -> dict[float, float]:
        which[0] = "full"
        full = full_fn(self, obs, delta, two, bw_scale)
        if exact is None:
            return full
        which[0] = "pruned"
        pruned = full_fn(self, obs, delta, two, bw_scale, exact)
        assert not two
        key_f = min(self.grid, key=lambda d: (full[d], -d))
        assert min(self.grid, key=lambda d: (pruned[d], -d)) == key_f
        assert pruned[key_f] == full[key_f] and pruned[exact] == full[exact]
        assert all(full[key_f] <= pruned[d] <= full[d] for d in self.grid)
        checked.append(sum(pruned[d] != full[d] for d in self.grid))
        return pruned

    monkeypatch.setattr(MpcPolicy, "_plan_scores", both)
    monkeypatch.setattr(mpc_plan.MpcPlanning, "_finish", counted)
    run_simulation(SimConfig(workload=workload, workers=workers, trace=trace, policy="mpc",
                             policy_params=params, iterations=200, seed=3, convergence="off"))
    assert len(checked) >= 5 and sum(checked) > 0  # floors stood for some densities
    assert finishes["pruned"] < finishes["full"]
