"""The oracle (simulator only): plans the whole density schedule with the future trace in hand.

Before a run the simulator calls :meth:`OraclePolicy.bind_oracle` with a context that prices any
decision (``iteration_time_s(decision, start_s)``: the true duration of one iteration started at
``start_s``, the future trace included) and carries the workload's convergence model (the one that
scores the run, :mod:`sim.control.progress`). At its first decision the oracle plans
(:mod:`.oracle_plan`): a piecewise-constant density schedule over windows of wall time cut at the
trace's change points, searched exhaustively one window at a time (and one suffix at a time) from
the best fixed density, minimising the predicted time until progress reaches
``target_progress``. Within a window every iteration uses the collective with the least true
iteration time (the gain does not depend on the collective), so the collective schedule is
optimal for the density schedule.

It is the yardstick for every other policy: no real policy can know the future. Outside the
simulator (never bound) it refuses to run.

``schedule="best"`` (the default) also replays, on the same true iteration times, the planner
that re-plans on the present link wherever it changes (:mod:`.oracle_myopic`), and follows
whichever of the two reaches the target first. Where the link changes every second under
iterations of seconds, re-planning at every change beats any schedule of 16 windows (by up to
5.8% on the held-out sets), and an oracle that a causal planner beats is no bound; with both,
the oracle is never slower than that planner (where the iteration times it plans on are those
of the run, as at the analytic fidelity without stragglers). The replay needs held-link prices
(analytic fidelity, lossless links); elsewhere the oracle follows its own schedule.
``schedule="piecewise"`` keeps the windowed schedule alone.

``foresight="none"`` turns it into a diagnostic that knows only the present: wherever the link
changed it re-plans on the link held at its present state (:mod:`.oracle_myopic`). The gap
between the two is what knowledge of the future is worth to the same planner and model.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any, Protocol

from sim.compress.spec import get_spec
from sim.errors import InputError

from ..decision_builder import parse_densities
from ..progress import ProgressModel, ProgressState, UsesProgressModel
from ..registry import register_policy
from ..selector import DEFAULT_ALLOWED, select_decision
from ..types import Decision, Observation
from .oracle_myopic import HELD_LINK_ONLY, step_without_foresight, time_without_foresight
from .oracle_plan import Planner

__all__ = ["OracleContext", "OraclePolicy"]

_DEFAULT_GRID = (1.0, 0.5, 0.3, 0.2, 0.1, 0.05, 0.03, 0.02, 0.01, 0.005, 0.003, 0.002, 0.001)

#: What the oracle may know of the link: the whole future trace, or only the present state.
FORESIGHT = ("full", "none")
#: The schedules the full oracle chooses among: both (the faster), or its windowed one alone.
SCHEDULES = ("best", "piecewise")


class OracleContext(Protocol):
    """What the simulator offers the oracle (only ``iteration_time_s`` is required)."""

    workload_grad_bytes: int
    world_size: int

    def iteration_time_s(self, decision: Decision, start_s: float) -> float:
        """True duration of one iteration under ``decision`` started at ``start_s``."""
        ...


@register_policy(
    "oracle",
    "Simulator only: plans the density schedule with the whole future trace (least time to target).",
    sim_only=True,
)
class OraclePolicy(UsesProgressModel):
    """Plans a piecewise-constant density schedule with perfect knowledge of the future.

    Args:
        densities: the density grid searched.
        compressor: the sparsifier used below density 1.
        allowed: collectives the oracle may use.
        target_progress: dense-iteration equivalents to reach; 0 means the run's own length
            (the progress a dense run makes in the configured iterations).
        windows: at most this many planning windows (the trace's change points when fewer).
        passes: search passes over the windows.
        foresight: ``"full"`` (the oracle: the whole future trace) or ``"none"`` (a diagnostic:
            re-plan wherever the link changed, on the link held at its present state,
            :mod:`.oracle_myopic`; analytic fidelity only).
        schedule: ``"best"`` (the faster of the windowed schedule and re-planning on the
            present link at every change, predicted on the true future) or ``"piecewise"``
            (the windowed schedule alone); the full oracle's only.
    """

    def __init__(
        self,
        *,
        densities: tuple[float, ...] | str = _DEFAULT_GRID,
        compressor: str = "topk",
        allowed: tuple[str, ...] = DEFAULT_ALLOWED,
        target_progress: float = 0.0,
        windows: int = 16,
        passes: int = 2,
        foresight: str = "full",
        schedule: str = "best",
    ) -> None:
        dens = parse_densities(densities)
        if foresight not in FORESIGHT:
            raise ValueError(f"foresight must be one of {', '.join(FORESIGHT)}, got {foresight!r}")
        if schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}, got {schedule!r}")
        self.foresight = foresight
        self.schedule = schedule
        get_spec(compressor)
        if not target_progress >= 0.0:
            raise ValueError(f"target_progress must be >= 0, got {target_progress!r}")
        if windows < 1 or passes < 0:
            raise ValueError(f"need windows >= 1 and passes >= 0, got {windows!r}, {passes!r}")
        self.compressor = compressor
        self.target_progress = float(target_progress)
        self.windows = int(windows)
        self.passes = int(passes)
        self._options: list[list[Decision]] = []
        for d in dens:
            comp = "none" if d >= 1.0 else compressor
            spec = get_spec(comp)
            colls = [c for c in allowed if spec.supports(c)]
            if not colls:
                raise ValueError(f"compressor {comp!r} can use none of {', '.join(allowed)}")
            self._options.append([Decision(comp, d, c) for c in colls])
        self._allowed = tuple(allowed)
        self._ctx: Any = None
        self._plan: tuple[list[float], list[int]] | None = None
        self.reset(seed=0)

    def set_auto_collectives(self, allowed: tuple[str, ...]) -> None:
        """Replace the collectives the oracle may use (names already checked);
        :class:`InputError` when a density's compressor can use none of them."""
        options: list[list[Decision]] = []
        for opts in self._options:
            comp, dens = opts[0].compressor, opts[0].density
            colls = [c for c in allowed if get_spec(comp).supports(c)]
            if not colls:
                raise InputError(f"compressor {comp!r} can use none of {', '.join(allowed)}")
            options.append([Decision(comp, dens, c) for c in colls])
        self._options = options
        self._allowed = tuple(allowed)
        self._plan = None

    def bind_oracle(self, ctx: OracleContext) -> None:
        """Give the oracle the simulator's view of the future (called before the run)."""
        if self.foresight == "none" and not getattr(ctx, "prices_held_links", False):
            raise InputError(HELD_LINK_ONLY)
        self._ctx = ctx
        model = getattr(ctx, "progress", None)
        if isinstance(model, ProgressModel):
            self.bind_progress(model)
        self.reset(seed=0)

    def _per_bucket(self, decision: Decision, t_s: float, ctx: Any = None) -> Decision | None:
        """Each bucket over its cheapest collective on ``ctx``'s link (default: the true link)
        at ``t_s``, when the context knows the buckets and the link and the buckets would not
        all agree."""
        ctx = self._ctx if ctx is None else ctx
        state = getattr(ctx, "link_state_at", None)
        sizes = getattr(ctx, "bucket_bytes", ())
        if state is None or len(set(sizes)) < 2:
            return None
        lat, bw = state(t_s)
        d = select_decision(lat, bw, ctx.world_size, float(ctx.workload_grad_bytes),
                            sizes, decision.density, decision.compressor, allowed=self._allowed)
        return d if d.bucket_collectives else None

    def reset(self, *, seed: int) -> None:
        """Forget the clock and the plan (the binding is kept: it belongs to the run)."""
        self._clock_s = 0.0
        self._plan = None
        self._state = ProgressState()
        self._planned_on: tuple[float, float] | None = None
        #: The schedule followed: None before the first decision, then ``"piecewise"`` or
        #: ``"replan"`` (re-planning on the present link at every change).
        self.followed: str | None = "replan" if self.foresight == "none" else None
        #: Predicted seconds to target of each schedule compared (``schedule="best"``).
        self.predicted_s: dict[str, float] = {}
        # The replayed re-planning run's (start time, decision) per iteration, followed while
        # the run keeps to its start times (then no plan needs making again).
        self._replayed: list[tuple[float, Decision]] | None = None

    @property
    def plan(self) -> tuple[list[float], list[int]] | None:
        """The planned schedule: window start times (s) and the density index of each window."""
        return self._plan

    def _target(self) -> float:
        if self.target_progress > 0.0:
            return self.target_progress
        return float(getattr(self._ctx, "iterations", 100))

    def _choose(self, start_s: float) -> str:
        """Plan the windowed schedule and, with ``schedule="best"`` where held-link prices
        exist, replay re-planning on the present link; the faster is followed."""
        planner = Planner(
            self._ctx, self.progress_model, self._options, self._target(), start_s,
            per_bucket=self._per_bucket,
        )
        self._plan = planner.search(self.windows, self.passes)
        if self.schedule != "best" or not getattr(self._ctx, "prices_held_links", False):
            return "piecewise"
        planner.bounds = list(self._plan[0])
        t_plan = planner.run(self._plan[1])[0]
        replayed: list[tuple[float, Decision]] = []
        t_replan = time_without_foresight(
            self._ctx, self.progress_model, self._options, self._target(), start_s,
            self._per_bucket, planner.max_iterations, limit_s=t_plan, record=replayed,
        )
        self.predicted_s = {"piecewise": t_plan - start_s, "replan": t_replan - start_s}
        if t_replan < t_plan * (1.0 - 1e-12):
            self._plan = None  # the re-planning branch makes its own once the replay ends
            self._replayed = replayed
            return "replan"
        return "piecewise"

    def decide(self, obs: Observation) -> Decision:
        """The planned density for the window of the current time, over its fastest collective."""
        if self._ctx is None:
            raise InputError(
                "policy 'oracle' runs only inside the simulator (it needs the future trace); "
                "use it with `compctl sim`"
            )
        start_s = obs.extra.get("now_s")
        if start_s is None:
            now = getattr(self._ctx, "now_s", None)
            start_s = float(now()) if callable(now) else self._clock_s
        if self.followed is None:
            self.followed = self._choose(start_s)
        if self.followed == "replan":
            model = self.progress_model
            step = self._state.step + 1
            if self._replayed is not None:
                i = self._state.step
                if i < len(self._replayed) and self._replayed[i][0] == start_s:
                    now = self._replayed[i][1]
                    self._state = model.advance(
                        self._state, model.gain(now.compressor, now.density, step))
                    return now
                # Past the replay's end (the target), or the run left its start times: plan
                # from here on as the planner without foresight does.
                self._replayed = None
                self._plan = None
            now, self._plan, self._planned_on = step_without_foresight(
                self._ctx, model, self._options, self._target(), self._state, start_s,
                self._per_bucket, self._plan, self._planned_on,
            )
            self._state = model.advance(self._state, model.gain(now.compressor, now.density, step))
            return now
        assert self._plan is not None  # made by _choose
        bounds, choice = self._plan
        w = max(0, bisect_right(bounds, start_s) - 1)
        best: Decision | None = None
        best_time = 0.0
        options = self._options[choice[w]]
        extra = self._per_bucket(options[0], start_s)
        for decision in options if extra is None else [*options, extra]:
            t = float(self._ctx.iteration_time_s(decision, start_s))
            if best is None or t < best_time:
                best, best_time = decision, t
        assert best is not None  # every density has at least one collective
        self._clock_s = start_s + best_time
        return best
