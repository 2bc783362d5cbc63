"""``mpc``'s ``plan_budget``: planning turns lean once the decisions' cost, as the world reports
it (``Observation.extra["decide_s"]``), exceeds a share of the run's time; and the worlds that
report it (the simulator where it charges decisions, the real hook always)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.config import SimConfig
from sim.control import Decision, Observation, make_policy
from sim.control.policies.mpc_budget import BUDGET_STEPS, LEAN_PLANNING, LEAN_RISK
from sim.control.world import IterationMeasurement, observation_after
from sim.engine import simulate

_CONFIGURED = (True, 1, 1, 1, False, 9.0)


def _obs(step: int, decide_s: float | None, iteration_s: float = 0.01) -> Observation:
    extra = {"iteration_s": iteration_s}
    if decide_s is not None:
        extra["decide_s"] = decide_s
    d = Decision(density=0.01, compressor="topk", collective="allgather")
    return Observation(step=step, world_size=2, grad_bytes=400_000, comm_s=2e-3,
                       compress_s=1e-4, compute_s=5e-3, latency_s=1e-3, bandwidth_Bps=1.25e6,
                       decision=d, gain=0.05, extra=extra)


def _feed(p: object, costs: list[float | None]) -> None:
    decide = p.decide  # type: ignore[attr-defined]
    decide(Observation(step=0, world_size=2, grad_bytes=400_000))
    for k, c in enumerate(costs, start=1):
        decide(_obs(k, c))


def _settings(p: object) -> tuple[object, ...]:
    return p._planning_settings()  # type: ignore[attr-defined]


def test_decisions_over_budget_make_planning_lean_and_reset_restores_it() -> None:
    p = make_policy("mpc")
    assert _settings(p) == _CONFIGURED and p.risk == 0.0  # type: ignore[attr-defined]
    # 0.5 ms of a 10 ms iteration is 5%, over the default 2%: lean from the third observation.
    _feed(p, [5e-4] * (BUDGET_STEPS - 1))
    assert _settings(p) == _CONFIGURED
    p.decide(_obs(BUDGET_STEPS, 5e-4))
    chunks, window, persist, drop = LEAN_PLANNING
    assert _settings(p) == (False, chunks, window, persist, True, drop)
    assert p.risk == LEAN_RISK  # type: ignore[attr-defined]  # M7's planning, its risk too
    p.reset(seed=1)
    assert _settings(p) == _CONFIGURED and p.risk == 0.0  # type: ignore[attr-defined]


def test_lean_planning_keeps_a_higher_risk() -> None:
    p = make_policy("mpc", risk=2.0)
    _feed(p, [5e-4] * BUDGET_STEPS)
    assert p.risk == 2.0  # type: ignore[attr-defined]


@pytest.mark.parametrize("costs", [
    [1e-4] * 40,  # 1% of the run: within the budget
    [None] * 40,  # a world that does not report the cost (the simulator by default)
])
def test_within_budget_or_unreported_planning_stays_as_configured(
        costs: list[float | None]) -> None:
    p = make_policy("mpc")
    _feed(p, costs)
    assert _settings(p) == _CONFIGURED


def test_a_zero_budget_never_turns_lean() -> None:
    p = make_policy("mpc", plan_budget=0.0)
    _feed(p, [5e-3] * 40)
    assert _settings(p) == _CONFIGURED


@pytest.mark.parametrize("drop", [0.0, 9.0])
def test_lean_planning_reacts_to_a_fourfold_fall_whatever_was_configured(drop: float) -> None:
    """Off or a larger factor (the default, 9): lean planning's own factor, 3."""
    p = make_policy("mpc", replan_drop=drop)
    _feed(p, [5e-4] * BUDGET_STEPS)
    assert _settings(p)[-1] == LEAN_PLANNING[-1] == 3.0


def test_lean_planning_keeps_settings_leaner_than_its_own() -> None:
    p = make_policy("mpc", window_steps=50, switch_chunks=4, replan_persist=5, replan_drop=1.0)
    _feed(p, [5e-4] * 10)
    assert _settings(p) == (False, 4, 50, 5, True, 1.0)


@pytest.mark.parametrize("bad", [-0.1, 1.0, 2.0, True])
def test_plan_budget_is_checked(bad: object) -> None:
    with pytest.raises(ValueError, match="plan_budget"):
        make_policy("mpc", plan_budget=bad)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.0, 2e-3), min_size=3, max_size=30), st.floats(0.001, 0.2))
def test_lean_exactly_when_the_cost_share_first_exceeds_the_budget(
        costs: list[float], budget: float) -> None:
    # A ten-step window (the default plans every step) keeps 60 examples cheap; the lean
    # settings differ from it as from the default.
    p = make_policy("mpc", plan_budget=budget, window_steps=10)
    _feed(p, list(costs))
    spent = total = 0.0
    expect = False
    for n, c in enumerate(costs, start=1):
        spent += c
        total += 0.01
        if n >= BUDGET_STEPS and spent > budget * total:
            expect = True
            break
    assert (_settings(p) != (True, 1, 10, 1, False, 9.0)) == expect


def test_observation_carries_the_decisions_cost_when_measured() -> None:
    d = Decision()
    m = IterationMeasurement(decision=d, comm_s=1e-3, compress_s=0.0, compute_s=1e-3,
                             gain=None, grad_norm=None, iteration_s=3e-3, decide_s=2e-4)
    assert observation_after(m, step=1, world_size=2, grad_bytes=8).extra["decide_s"] == 2e-4
    for unknown in (None, math.nan):
        m2 = IterationMeasurement(decision=d, comm_s=1e-3, compress_s=0.0, compute_s=1e-3,
                                  gain=None, grad_norm=None, decide_s=unknown)
        assert "decide_s" not in observation_after(m2, step=1, world_size=2, grad_bytes=8).extra


def _seen_costs(cfg: SimConfig) -> list[object]:
    import sim.control.policies.mpc as mpc_mod

    seen: list[object] = []
    orig = mpc_mod.MpcPolicy._note_decision_cost

    def spy(self: mpc_mod.MpcPolicy, obs: Observation, it_s: float | None) -> None:
        seen.append(obs.extra.get("decide_s"))
        orig(self, obs, it_s)

    mpc_mod.MpcPolicy._note_decision_cost = spy  # type: ignore[method-assign]
    try:
        simulate(cfg)
    finally:
        mpc_mod.MpcPolicy._note_decision_cost = orig  # type: ignore[method-assign]
    return seen


def test_the_simulator_reports_charged_decisions_only() -> None:
    base = dict(workload="digits-mlp", workers=2, trace="seed003-steps", policy="mpc",
                iterations=12, seed=1)
    assert set(_seen_costs(SimConfig(**base))) == {None}  # type: ignore[arg-type]
    charged = _seen_costs(SimConfig(**base, decision_s=5e-4))  # type: ignore[arg-type]
    # The first decision sees nothing measured yet; every later one the charge.
    assert charged[0] is None and set(charged[1:]) == {5e-4}
    # With decisions computed ahead, the part an iteration's communication hid is not paid
    # (the first controlled iteration's decision is computed at its step, serially).
    lagged = _seen_costs(SimConfig(**base, decision_s=5e-4, decision_lag=1))  # type: ignore[arg-type]
    assert lagged[1] == 5e-4
    assert all(0.0 <= c < 5e-4 for c in lagged[2:])  # type: ignore[operator]


@pytest.mark.parametrize("decide,hidden,expect", [
    (5e-4, 1e-4, 4e-4),  # the part the network wait did not hide
    (1e-4, 2e-4, 0.0),  # maxima over ranks taken apart: never below 0
    (math.nan, math.nan, None),  # not agreed: unknown, not 0
])
def test_the_real_hook_reports_the_exposed_decision_time(
        decide: float, hidden: float, expect: float | None) -> None:
    from types import SimpleNamespace

    pytest.importorskip("torch")
    from realrun.hook.state import _exposed_decide_s

    got = _exposed_decide_s(SimpleNamespace(decide_s=decide,  # type: ignore[arg-type]
                                            decide_hidden_s=hidden))
    assert got == (pytest.approx(expect) if expect is not None else None)
