"""``mpc``'s planning budget: lean planning once the decisions cost the run too much.

A world that knows what the controller's decisions took on the iteration's critical path says so
in each observation (``extra["decide_s"]``: the real hook always, what a decision computed ahead
did not hide; the simulator only where it charges decisions). Once, over at least
:data:`BUDGET_STEPS` such observations, the decisions have taken more than ``plan_budget`` of the
run's time, the controller plans lean for the rest of the run (:data:`LEAN_PLANNING`, and
``risk`` at least :data:`LEAN_RISK`: the settings M7 ran with in the real rounds): where
planning is free (a simulation that does not charge it) nothing changes, where it costs (a real
run of a small model) the plans become the cheap ones. docs/controllers.md, "mpc's options in
detail"; the measurements that motivated it: docs/benchmarks/controllers.md, rounds P and Q.
"""

from __future__ import annotations

from ..types import Observation

__all__ = ["BUDGET_STEPS", "LEAN_PLANNING", "LEAN_RISK", "PlanBudget"]

#: Observations of the decisions' cost before the budget is judged. The default plans every
#: step (``window_steps`` 1), so three observations judge three plans; with 10 (before
#: 2026-11-27, when a plan came every 10 steps) a real run paid eight full plans of 3-9 ms each
#: before turning lean (round R).
BUDGET_STEPS = 3
#: Lean planning: ``switch_chunks``, ``window_steps`` and ``replan_persist`` at least these,
#: ``replan_drop`` at most this (also where it was off: a plan every 30 steps must still react
#: at once to a fall of the link); single-phase plans only, and re-plans only on a move outside
#: the last plan's band.
LEAN_PLANNING: tuple[int, int, int, float] = (3, 30, 3, 3.0)
#: Lean planning's least ``risk``: the value M7's settings ran with in every real round (the
#: default was 0.5 then); lean planning is M7's planning.
LEAN_RISK = 0.5

#: ``(two_phase, switch_chunks, window_steps, replan_persist, replan_band, replan_drop)``.
Settings = tuple[bool, int, int, int, bool, float]


class PlanBudget:
    """Mixin of :class:`.mpc.MpcPolicy`: the planning settings in force, and the budget that
    replaces them with lean ones for the rest of a run."""

    plan_budget: float
    two_phase: bool
    switch_chunks: int
    window_steps: int
    replan_persist: int
    replan_band: bool
    replan_drop: float
    risk: float
    #: The planning settings and ``risk`` as configured (restored by every reset).
    _configured: Settings
    _configured_risk: float
    #: Planning lean, and the decisions' seconds, the iterations' seconds and the observations
    #: counted so far.
    _lean: bool
    _decide_spent: tuple[float, float, int]

    def _init_budget(self, plan_budget: float) -> None:
        """Check and keep ``plan_budget`` (the share of the run's time the decisions may take
        before planning turns lean; 0: off) and the planning settings as configured (call
        after they are set)."""
        if isinstance(plan_budget, bool) or not 0.0 <= plan_budget < 1.0:
            raise ValueError(f"plan_budget must be 0 (off) or in (0, 1), got {plan_budget!r}")
        self.plan_budget = float(plan_budget)
        self._configured = self._planning_settings()
        self._configured_risk = self.risk

    def _planning_settings(self) -> Settings:
        """The planning settings in force."""
        return (self.two_phase, self.switch_chunks, self.window_steps, self.replan_persist,
                self.replan_band, self.replan_drop)

    def _set_planning(self, settings: Settings) -> None:
        (self.two_phase, self.switch_chunks, self.window_steps, self.replan_persist,
         self.replan_band, self.replan_drop) = settings

    def _reset_budget(self) -> None:
        """The configured settings again, nothing counted (a new run)."""
        self._set_planning(self._configured)
        self.risk = self._configured_risk
        self._lean = False
        self._decide_spent = (0.0, 0.0, 0)

    def _note_decision_cost(self, obs: Observation, it_s: float | None) -> None:
        """Count what the decisions cost the run (``obs.extra["decide_s"]`` over ``it_s``, the
        observed iteration's seconds); once they exceed the budget, plan lean."""
        cost = obs.extra.get("decide_s")
        if cost is None or it_s is None or self._lean or not self.plan_budget > 0.0:
            return
        spent, total, n = self._decide_spent
        spent, total, n = spent + float(cost), total + it_s, n + 1
        self._decide_spent = (spent, total, n)
        if n >= BUDGET_STEPS and spent > self.plan_budget * total:
            self._lean = True
            _, chunks, window, persist, _, drop = self._configured
            lean_chunks, lean_window, lean_persist, lean_drop = LEAN_PLANNING
            self._set_planning((False, max(chunks, lean_chunks), max(window, lean_window),
                                max(persist, lean_persist), True,
                                min(drop, lean_drop) if drop > 0.0 else lean_drop))
            self.risk = max(self._configured_risk, LEAN_RISK)
