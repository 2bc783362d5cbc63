"""Behaviour on synthetic step traces: the delay-aware family backs off and recovers."""

from __future__ import annotations

import numpy as np
import pytest
from _control_helpers import (
    BAD_BANDWIDTH,
    BAD_LATENCY,
    GOOD,
    GRAD_BYTES,
    WORLD,
    densities,
    run_closed_loop,
    step_link,
)

from sim.control import Observation, make_policy
from sim.control.decision_builder import DecisionBuilder
from sim.control.policies.budget import largest_density_within, predicted_comm_s

DELAY_AWARE = ["dc2-aimd", "dc2-vegas", "dc2-pi", "dc2-budget"]
START, END, TOTAL = 60, 160, 260
K = 10  # iterations allowed for a reaction


@pytest.mark.parametrize("bad", [BAD_LATENCY, BAD_BANDWIDTH], ids=["latency-up", "bandwidth-down"])
@pytest.mark.parametrize("name", DELAY_AWARE)
def test_backs_off_after_a_step_and_recovers(name: str, bad: tuple[float, float]) -> None:
    d = np.array(densities(run_closed_loop(make_policy(name, seed=1),
                                           step_link(GOOD, bad, START, END), TOTAL)))
    before = d[START - 1]
    first_drop = next(k for k in range(START, END) if d[k] < before)
    assert first_drop - START <= K
    assert d[START + 2 * K:END].mean() < 0.75 * d[START - 30:START].mean()
    low = d[END - 1]
    first_rise = next(k for k in range(END, TOTAL) if d[k] > low)
    assert first_rise - END <= K
    assert d[END + 2 * K:].mean() > d[START + 2 * K:END].mean()


@pytest.mark.parametrize("name", DELAY_AWARE)
def test_density_stays_in_bounds(name: str) -> None:
    policy = make_policy(name, seed=0, min_density=0.01, max_density=0.2)
    d = densities(run_closed_loop(policy, step_link(GOOD, BAD_BANDWIDTH, 20, 80), 120))
    assert min(d) >= 0.01 and max(d) <= 0.2


@pytest.mark.parametrize("name", ["dc2-aimd", "dc2-pi", "dc2-vegas"])
def test_hysteresis_ignores_a_single_outlier(name: str) -> None:
    # One slow step on an otherwise constant link must not change the density.
    spike = {40: (BAD_LATENCY[0] * 10, GOOD[1])}
    policy = make_policy(name, seed=0, initial_density=0.1, max_density=0.1,
                         **({"deadband": 0.1} if name != "dc2-vegas" else {}))
    d = densities(run_closed_loop(policy, lambda k: spike.get(k, GOOD), 80))
    if name == "dc2-pi":
        # PI is proportional: a single error moves it, but less than one decade.
        assert min(d[40:]) > 0.01
    else:
        assert d[41] == d[40]


def test_aimd_halves_and_adds() -> None:
    p = make_policy("dc2-aimd", target_s=0.1, patience=1, increase_step=0.05, symmetric=False)
    obs0 = Observation(step=0, world_size=8, grad_bytes=1000)
    d0 = p.decide(obs0)
    slow = Observation(step=1, world_size=8, grad_bytes=1000, comm_s=0.5, decision=d0)
    d1 = p.decide(slow)
    assert d1.density == 0.5
    fast = Observation(step=2, world_size=8, grad_bytes=1000, comm_s=0.01, decision=d1)
    assert p.decide(fast).density == pytest.approx(0.55)


def test_stale_observations_are_ignored() -> None:
    p = make_policy("dc2-aimd", target_s=0.1, patience=1)
    d0 = p.decide(Observation(step=0, world_size=8, grad_bytes=1000))
    d1 = p.decide(Observation(step=1, world_size=8, grad_bytes=1000, comm_s=0.5, decision=d0))
    # An observation measured under the old (dense) decision must not halve again.
    d2 = p.decide(Observation(step=2, world_size=8, grad_bytes=1000, comm_s=0.5, decision=d0))
    assert d2.density == d1.density


def test_budget_solution_fits_and_is_the_largest() -> None:
    b = DecisionBuilder()
    obs = Observation(step=1, world_size=WORLD, grad_bytes=GRAD_BYTES, latency_s=1e-3,
                      bandwidth_Bps=1e9 / 8)
    budget = 0.1
    d = largest_density_within(b, obs, budget, 1e-3, 1e9 / 8, 0.001, 1.0)
    assert predicted_comm_s(b, d, obs, 1e-3, 1e9 / 8) <= budget
    assert predicted_comm_s(b, min(d * 1.001, 1.0), obs, 1e-3, 1e9 / 8) > budget
