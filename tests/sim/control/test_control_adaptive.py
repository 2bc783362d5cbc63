"""MOO, Accordion, GraVAC, bandits and the oracle: phases and choices on synthetic inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _control_helpers import (
    BAD_BANDWIDTH,
    GOOD,
    GRAD_BYTES,
    WORLD,
    densities,
    run_closed_loop,
)

from sim.control import Decision, Observation, make_policy
from sim.control.policies.moo import pareto_choice
from sim.control.progress import default_progress_model
from sim.control.selector import collective_cost_terms


def _const(link: tuple[float, float]):  # noqa: ANN202 - tiny local helper
    return lambda k: link


def test_moo_warms_up_explores_every_candidate_then_exploits() -> None:
    p = make_policy("moo", warmup_steps=20, explore_steps=5, min_explore_interval=10_000)
    d = densities(run_closed_loop(p, _const(GOOD), 120))
    warm = d[:20]
    assert warm[0] < 1.0 and all(a >= b for a, b in zip(warm, warm[1:], strict=False))
    assert d[19] == pytest.approx(0.1)
    explored = d[19:45]
    for cand in (0.1, 0.033, 0.011, 0.004, 0.001):
        assert explored.count(cand) >= 5
    tail = d[60:]
    assert len(set(tail)) == 1  # one choice, held
    assert 0.001 <= tail[0] <= 0.1


def test_moo_reexplores_when_the_network_moves_10_percent() -> None:
    p = make_policy("moo", warmup_steps=0, explore_steps=3, min_explore_interval=0,
                    max_explore_fraction=1.0)
    pm = default_progress_model()
    d = densities(run_closed_loop(p, lambda k: GOOD if k < 60 else BAD_BANDWIDTH, 100,
                                  gain_at=lambda dec, k: pm.gain(dec.compressor, dec.density, 1)))
    assert d[30:60].count(0.1) == 0 or len(set(d[30:60])) == 1
    # After the change the candidates are run again (0.1 reappears, then 0.001).
    after = d[60:]
    assert 0.1 in after and 0.001 in after


def test_moo_weights_move_the_choice() -> None:
    grid = np.array([0.1, 0.03, 0.01, 0.003, 0.001])
    t = 0.01 + grid * 2.0
    inv_g = 1.0 / np.array([default_progress_model().gain("topk", x, 100) for x in grid])
    assert pareto_choice(grid, t, inv_g, 1.0, 0.0) == 0.001
    assert pareto_choice(grid, t, inv_g, 0.0, 1.0) == 0.1
    mid = pareto_choice(grid, t, inv_g, 0.6, 0.4)
    assert 0.001 < mid < 0.1


def test_pareto_choice_skips_dominated_points() -> None:
    grid = np.array([0.1, 0.01, 0.001])
    t = np.array([1.0, 0.5, 0.6])  # 0.001 is slower than 0.01 and has less gain: dominated
    inv_g = np.array([1.0, 2.0, 3.0])
    assert pareto_choice(grid, t, inv_g, 1.0, 0.0) == 0.01


def test_accordion_switches_on_gradient_norm_change() -> None:
    p = make_policy("accordion", interval_steps=10)
    # Norm halves every 10 steps for 30 steps (critical), then stays flat.
    norms = lambda k: 8.0 * 0.4 ** (k // 10) if k < 30 else 8.0 * 0.4 ** 3  # noqa: E731
    d = densities(run_closed_loop(p, _const(GOOD), 80, grad_norm_at=norms))
    assert d[5] == 0.1  # first interval: critical
    assert d[25] == 0.1  # norm still changing by 60%
    assert d[75] == 0.01  # flat: compress hard


def test_accordion_without_norms_stays_critical() -> None:
    d = densities(run_closed_loop(make_policy("accordion", interval_steps=5), _const(GOOD), 40))
    assert set(d) == {0.1}


def test_gravac_compresses_more_on_a_slow_link_than_on_a_fast_one() -> None:
    fast = densities(run_closed_loop(make_policy("gravac", window_steps=3), _const(GOOD), 100))
    slow_link = (1e-4, 1e8 / 8)  # 100 Mbit/s: communication dominates
    slow = densities(run_closed_loop(make_policy("gravac", window_steps=3), _const(slow_link), 100))
    assert np.mean(slow[-30:]) < np.mean(fast[-30:])


def test_gravac_gain_floor_stops_the_descent() -> None:
    slow_link = (1e-4, 1e8 / 8)
    p = make_policy("gravac", window_steps=3, gain_floor=0.5)
    d = densities(run_closed_loop(p, _const(slow_link), 100))
    assert min(d) >= 0.1 / (1000 ** (1 / 6)) * 0.999  # never past the second rung


def _best_arm(link: tuple[float, float], arms: tuple[float, ...]) -> float:
    def reward(dens: float) -> float:
        comp = "none" if dens >= 1.0 else "topk"
        best = min(
            collective_cost_terms(c, WORLD, GRAD_BYTES, dens, comp).time_s(*link)
            for c in (("ring", "tree", "ps") if comp == "none" else
                      ("allgather", "artopk-ring", "artopk-tree"))
        )
        pm = default_progress_model()
        return pm.efficiency(pm.gain(comp, dens, 225)) / (0.2 + best)

    return max(arms, key=reward)


@pytest.mark.parametrize("name", ["bandit-ucb", "bandit-ts"])
def test_bandits_settle_on_the_best_arm(name: str) -> None:
    arms = (1.0, 0.1, 0.01, 0.001)
    p = make_policy(name, seed=3, arms=",".join(map(str, arms)), discount=1.0, hold_steps=1)
    d = densities(run_closed_loop(p, _const(BAD_BANDWIDTH), 300))
    best = _best_arm(BAD_BANDWIDTH, arms)
    assert d[150:].count(best) > 0.7 * 150


class _Ctx:
    workload_grad_bytes = GRAD_BYTES
    world_size = WORLD

    def __init__(
        self,
        switch_s: float,
        good: tuple[float, float] = GOOD,
        bad: tuple[float, float] = BAD_BANDWIDTH,
    ) -> None:
        self.switch_s = switch_s
        self.good, self.bad = good, bad

    def iteration_time_s(self, decision: Decision, start_s: float) -> float:
        link = self.good if start_s < self.switch_s else self.bad
        t = collective_cost_terms(decision.collective, WORLD, GRAD_BYTES, decision.density,
                                  decision.compressor)
        return 0.2 + t.time_s(*link)

    def segment_s(self, t_s: float) -> tuple[float, float]:
        """The constant link state holding at ``t_s`` (the oracle reuses a price within it)."""
        return (0.0, self.switch_s) if t_s < self.switch_s else (self.switch_s, math.inf)


def test_oracle_plans_least_time_to_target_and_sees_the_future() -> None:
    from sim.control.policies.oracle_plan import Planner

    p = make_policy("oracle", target_progress=300.0, windows=8)
    ctx = _Ctx(switch_s=20.0, good=(1e-6, 1e13), bad=(1e-3, 1e7))
    p.bind_oracle(ctx)  # type: ignore[attr-defined]
    obs = Observation(step=0, world_size=WORLD, grad_bytes=GRAD_BYTES)
    first = p.decide(obs)
    late = p.decide(Observation(step=1, world_size=WORLD, grad_bytes=GRAD_BYTES,
                                extra={"now_s": 30.0}))
    assert late.density < first.density  # it knows the link is slow later
    # The plan is at least as fast as every fixed density of its grid.
    bounds, choice = p.plan  # type: ignore[attr-defined]
    planner = Planner(ctx, default_progress_model(), p._options, 300.0, 0.0)  # type: ignore[attr-defined]
    planner.bounds = bounds
    best = planner.run(choice)[0]
    for i in range(len(p._options)):  # type: ignore[attr-defined]
        planner.bounds = [0.0]
        assert best <= planner.run([i])[0] * (1 + 1e-12)


def test_oracle_keeps_its_own_clock_without_now_s() -> None:
    p = make_policy("oracle", target_progress=40.0)
    p.bind_oracle(_Ctx(switch_s=0.2))  # type: ignore[attr-defined]
    obs = Observation(step=0, world_size=WORLD, grad_bytes=GRAD_BYTES)
    p.decide(obs)
    d1 = p.decide(obs)  # the clock has advanced past the switch by the first iteration
    assert math.isfinite(d1.density)
    assert p._clock_s > 0.2  # type: ignore[attr-defined]
