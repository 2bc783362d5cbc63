"""The oracle without foresight (``oracle:foresight=none``): exact, but blind to the future.

A diagnostic for the question the perfect-monitor runs left open: when ``mpc`` falls more than
5% behind the oracle, is it because the oracle knows the future link, or because of ``mpc``'s
own approximations (its pricing from measured times, its forecast, its gain estimates, its
re-plan rules)? This planner has everything the oracle has except the future:

* the present link exactly (the true latency and bandwidth at the moment of the decision);
* the true price of every (density, collective) decision on that link, held for the whole
  iteration (:meth:`sim.engine.OracleContext.iteration_time_on_s`);
* the convergence model that scores the run, run forward from the run's true state.

Wherever the link's state differs from the one its plan was made on, it re-plans with the
oracle's own planner (:class:`.oracle_plan.Planner`) on the link held at its present state for
all time, from the progress state reached so far: the plans ``mpc`` searches, exactly scored
(hold one density to the target, or hold it and then finish at another from the best switch
iteration; :meth:`.oracle_plan.Planner.search_two_phase`). On an unchanged link the plan is
exact, so it is followed without re-planning. The decision applied is the plan's density over
the collective, or the per-bucket choice, that is fastest on the present link.

On a constant link it is never slower than the best fixed density (holding that density is one
of its plans and the model is exact); on a changing link the gap between it and the oracle is
what foresight is worth to a planner that makes no forecast, and the gap between ``mpc`` (with
the true link, ``--monitor truth``) and it is what ``mpc``'s own approximations cost. It runs
only at the analytic fidelity, and assumes one decision per iteration (the simulator's loop).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Callable
from typing import Any

from ..progress import ProgressModel, ProgressState
from ..types import Decision
from .oracle_plan import Planner

__all__ = ["HELD_LINK_ONLY", "HeldLink", "Plan", "apply_plan", "plan_without_foresight",
           "step_without_foresight", "time_without_foresight"]

#: A plan in :class:`.oracle_plan.Planner`'s form: window starts and a density index per window.
Plan = tuple[list[float], list[int]]

#: Why the planner cannot run where the context cannot price a held link.
HELD_LINK_ONLY = (
    "the oracle without foresight (foresight=none) runs only at the analytic fidelity on "
    "lossless links"
)


class HeldLink:
    """An oracle context whose bottleneck link is held at its state at one instant.

    Args:
        ctx: the simulator's oracle context (:class:`sim.engine.OracleContext`).
        t_s: the instant whose link state is held.
    """

    def __init__(self, ctx: Any, t_s: float) -> None:
        self._ctx = ctx
        lat, bw = ctx.link_state_at(t_s)
        self.state: tuple[float, float] = (float(lat), float(bw))
        self.workload_grad_bytes: int = ctx.workload_grad_bytes
        self.world_size: int = ctx.world_size
        self.bucket_bytes: tuple[int, ...] = tuple(getattr(ctx, "bucket_bytes", ()))
        self._prices: dict[Decision, float] = {}

    def segment_s(self, t_s: float) -> tuple[float, float]:
        """One state for all time (so the planner prices each decision once)."""
        return -math.inf, math.inf

    def change_points_s(self, t0_s: float, t1_s: float) -> list[float]:
        """No change points: the held link never changes."""
        return []

    def link_state_at(self, t_s: float) -> tuple[float, float]:
        """The held ``(latency_s, bandwidth_Bps)`` at any time."""
        return self.state

    def iteration_time_s(self, decision: Decision, start_s: float) -> float:
        """Duration of one iteration under ``decision`` on the held link (any start)."""
        price = self._prices.get(decision)
        if price is None:
            price = self._prices[decision] = float(
                self._ctx.iteration_time_on_s(decision, *self.state)
            )
        return price


def plan_without_foresight(
    ctx: Any,
    model: ProgressModel,
    options: list[list[Decision]],
    target: float,
    state: ProgressState,
    now_s: float,
    per_bucket: Callable[[Decision, float, Any], Decision | None],
) -> tuple[tuple[list[float], list[int]], HeldLink]:
    """The plan from the iteration starting at ``now_s`` on (module docstring): window starts
    (absolute seconds) and a density index per window; and the held link it was priced on
    (whose prices :func:`apply_plan` reuses for this iteration).

    Args:
        ctx: the simulator's oracle context.
        model: the convergence model that scores the run.
        options: per density of the grid, its decisions (one per usable collective).
        target: progress to reach (dense-iteration equivalents).
        state: the run's convergence state after the iterations done so far.
        now_s: the clock at the start of the iteration to decide.
        per_bucket: ``(decision, t, context) -> decision or None``: the per-bucket choice of
            ``decision``'s density on ``context``'s link at ``t``.
    """
    held = HeldLink(ctx, now_s)
    planner = Planner(
        held, model, options, target, now_s,
        per_bucket=lambda d, t: per_bucket(d, t, held),
        initial=(state.step, now_s, state.q, state.lag, state.progress),
    )
    return planner.search_two_phase(), held


def apply_plan(
    held: HeldLink, plan: tuple[list[float], list[int]], options: list[list[Decision]],
    now_s: float, per_bucket: Callable[[Decision, float, Any], Decision | None],
) -> Decision:
    """The decision of ``plan`` (window starts and density index per window, :class:`Planner`'s
    form) for the iteration starting at ``now_s``: its density over the collective, or the
    per-bucket choice, that is fastest on ``held``, the link held at its state at ``now_s``."""
    bounds, choice = plan
    i = choice[max(0, bisect_right(bounds, now_s) - 1)]
    extra = per_bucket(options[i][0], now_s, held)
    best: Decision | None = None
    best_s = math.inf
    for decision in options[i] if extra is None else [*options[i], extra]:
        t = held.iteration_time_s(decision, now_s)
        if best is None or t < best_s:
            best, best_s = decision, t
    assert best is not None  # every density has at least one collective
    return best


def step_without_foresight(
    ctx: Any,
    model: ProgressModel,
    options: list[list[Decision]],
    target: float,
    state: ProgressState,
    now_s: float,
    per_bucket: Callable[[Decision, float, Any], Decision | None],
    plan: Plan | None,
    planned_on: tuple[float, float] | None,
) -> tuple[Decision, Plan, tuple[float, float]]:
    """This planner's decision for the iteration starting at ``now_s``, with the plan it
    follows and the link state that plan was made on. It re-plans (from ``state``) where there
    is no plan yet or the link differs from ``planned_on``; on an unchanged link the plan stays
    exact and is priced afresh (the compute factor may have changed since it was made)."""
    link = ctx.link_state_at(now_s)
    if plan is None or link != planned_on:
        plan, held = plan_without_foresight(ctx, model, options, target, state, now_s,
                                            per_bucket)
        planned_on = link
    else:
        held = HeldLink(ctx, now_s)
    assert planned_on is not None
    return apply_plan(held, plan, options, now_s, per_bucket), plan, planned_on


def time_without_foresight(
    ctx: Any,
    model: ProgressModel,
    options: list[list[Decision]],
    target: float,
    start_s: float,
    per_bucket: Callable[[Decision, float, Any], Decision | None],
    max_iterations: int,
    limit_s: float = math.inf,
    record: list[tuple[float, Decision]] | None = None,
) -> float:
    """End time of the iteration at which this planner, run from a fresh state at ``start_s``,
    reaches ``target``, predicted on ``ctx``'s true iteration times (``inf`` past
    ``max_iterations``, or once an iteration starts at ``limit_s`` or later): the replay the
    full oracle makes to choose between its own schedule and this one
    (:class:`.oracle.OraclePolicy`, ``schedule="best"``). Each decision is
    :func:`step_without_foresight`'s, as in :meth:`.oracle.OraclePolicy.decide` with
    ``foresight="none"``, so the two agree wherever each iteration lasts what ``ctx`` says. ``record``, when given, receives each iteration's start
    time and decision (so a run that follows this replay need not plan again)."""
    state = ProgressState()
    t = float(start_s)
    plan: Plan | None = None
    planned_on: tuple[float, float] | None = None
    while state.progress < target:
        if state.step >= max_iterations or t >= limit_s:
            return math.inf
        d, plan, planned_on = step_without_foresight(
            ctx, model, options, target, state, t, per_bucket, plan, planned_on)
        if record is not None:
            record.append((t, d))
        state = model.advance(state, model.gain(d.compressor, d.density, state.step + 1))
        t += float(ctx.iteration_time_s(d, t))
    return t
