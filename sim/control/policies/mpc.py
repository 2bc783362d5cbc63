"""``mpc``: a model-predictive density controller on time-to-target.

Every ``window_steps`` steps the controller

1. forecasts the link from the monitor's estimates (:class:`LinkForecast`: level, trend and
   spread of log-latency and log-bandwidth over the last ``history`` observations);
2. for every density of its grid and every forecast scenario (the spread's pessimistic,
   central and optimistic cases, the trend extrapolated to the middle of the plan, and the
   window's median), predicts the seconds needed to make the next ``delta`` of progress at that
   density: iteration time from measured compute and compression plus the communication the
   backward pass does not hide, priced bucket by bucket (each bucket size over its cheapest
   collective, as ``collective="auto"`` does; the backward window solved from a measured
   iteration, :mod:`sim.control.overlap`, so a denser plan hides more), whole iterations from the workload's convergence model
   (:mod:`sim.control.progress`) run forward from the controller's own model state with the
   gain of each future step, so a switch pays (or recovers) the lag it causes;
3. scores each plan by the mean over scenarios plus ``risk`` times their half-range (a robust
   choice under the forecast's spread). Plans are "hold density ``d`` to the goal" and, towards
   a real target, "hold ``d`` for a while, then finish at a higher density" (the switch up
   releases the lag the error-feedback residual holds back, the end game the oracle plays);
   a two-phase plan must win by ``two_phase_margin``, because its payoff rests on the model
   over the whole horizon. Switch points are tried every ``switch_chunks`` chunks of 8
   iterations (1, the default: every 8 iterations; more: a cheaper plan, for real runs where
   the plan runs on the critical path). A density scores as its best plan; the best density is applied
   unless it beats the density in force by less than ``switch_margin``.

The first step (no estimate yet) runs the grid's smallest density with, per bucket, the
collective whose worst slowdown over a wide range of links is least.

Predicted communication times are corrected per collective by the measured-over-predicted
ratio of the decisions run over it (an EWMA of its log whose steps are bounded, so single
timing spikes barely move it); each bucket goes over the least corrected time's collective.

Re-planning rules (``replan_change``, ``replan_persist``, ``replan_band``, ``replan_drop``,
``regime_steps``), the collective hedge (``collective_regret``, ``spread``, ``byte_hedge_sd``,
``latency_jump_ratio``), probing (``probe_every``, ``identify_every``, ``identify_sd``), the gain
calibration, ``calibration``, the forecast's readings (``robust_spread``, ``byte_reading``,
``byte_reading_sd``),
the planning budget (``plan_budget``) and the monitor options (``monitor_smoothing``,
``monitor_residual_rows``, ``monitor_bandwidth_drift``): docs/controllers.md (MPC, "mpc's
options in detail"). It reads nothing but its observations: it runs unchanged in real runs.

Layout (mixins sharing this controller's state): the link forecast :mod:`.mpc_forecast`,
communication pricing :mod:`.mpc_pricing` (a grid at once: :mod:`.mpc_price_grid`), what every
step learns and its collective hedge :mod:`.mpc_learn`, plan scoring, probing and the re-plan
band :mod:`.mpc_plan`, lean planning when decisions cost the run :mod:`.mpc_budget`; the plan
search runs in :mod:`.mpc_search` (the reference search's arithmetic, to the bit, without the
per-call overhead: a plan, and every step, runs on a real run's critical path).
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

from sim.compress.spec import get_spec

from ..decision_builder import AUTO, parse_densities
from ..monitor import SMOOTHING_MODES
from ..progress import ProgressState, UsesRecalibratedModel
from ..registry import register_policy
from ..selector import DEFAULT_ALLOWED
from ..types import Decision, Observation
from .density_base import DensityPolicy
from .mpc_budget import LEAN_PLANNING, PlanBudget
from .mpc_forecast import LatencyDiffusion, LinkForecast, steps_to_progress
from .mpc_learn import HEDGE_RECENT, MpcLearning
from .mpc_probe import MpcProbing

__all__ = ["LEAN_PLANNING", "LinkForecast", "MpcPolicy", "steps_to_progress"]

#: Floors of the forecast signals: a monitor estimate of zero latency (a link whose latency
#: touches zero, or a fit that attributes all of it to bytes) is 1 us in the forecast.
_LATENCY_FLOOR_S = 1e-6
_BANDWIDTH_FLOOR_BPS = 1.0

_DEFAULT_GRID = (1.0, 0.5, 0.3, 0.2, 0.1, 0.05, 0.03, 0.02, 0.01, 0.005, 0.003, 0.002, 0.001)


@register_policy(
    "mpc", "Model-predictive: forecast the link, predict time-to-target per density, apply, re-plan."
)
class MpcPolicy(MpcProbing, MpcLearning, PlanBudget, UsesRecalibratedModel, DensityPolicy):
    """Receding-horizon density choice on the convergence model and a link forecast."""

    def __init__(
        self,
        *,
        densities: tuple[float, ...] | str = _DEFAULT_GRID,
        window_steps: int = 1,
        history: int = 40,
        target_progress: float = 0.0,
        horizon_progress: float = 200.0,
        risk: float = 0.0,
        spread: float = 1.0,
        switch_margin: float = 0.02,
        two_phase: bool = True,
        two_phase_margin: float = 0.03,
        replan_change: float = 0.25,
        replan_persist: int = 1,
        replan_band: bool = False,
        replan_drop: float = 9.0,
        switch_chunks: int = 1,
        initial_density: float = 0.001,
        probe_every: int = 0,
        probe_factor: float = 10.0,
        identify_every: int = 20,
        identify_sd: float = 0.0,
        regime_steps: int = 6,
        collective_regret: float = 1.5,
        compressor: str = "topk",
        collective: str = "auto",
        calibration: str = "",
        monitor_smoothing: str = "",
        monitor_residual_rows: int = 0,
        monitor_bandwidth_drift: float = 0.0,
        robust_spread: bool = False,
        latency_jump_ratio: float = 20.0,
        byte_reading: bool = True,
        byte_reading_sd: float = 0.0,
        byte_hedge_sd: float = 0.0,
        plan_budget: float = 0.02,
    ) -> None:
        grid = list(parse_densities(densities))
        if monitor_smoothing and monitor_smoothing not in SMOOTHING_MODES:
            raise ValueError(f"unknown monitor_smoothing {monitor_smoothing!r}; known: "
                             f"{', '.join(SMOOTHING_MODES)}")
        #: The link monitor's smoothing this controller asks the run for (empty: the
        #: monitor's default; :func:`sim.control.monitor.monitor_for`).
        self.monitor_smoothing = monitor_smoothing
        if isinstance(monitor_residual_rows, bool) or not 0 <= monitor_residual_rows <= 8:
            raise ValueError("monitor_residual_rows must be 0 (the monitor's default) to 8, got "
                             f"{monitor_residual_rows!r}")
        #: Rows whose least residual the monitor's pinned split reads (0: its default).
        self.monitor_residual_rows = int(monitor_residual_rows)
        if not 0.0 <= monitor_bandwidth_drift <= 1.0:
            raise ValueError("monitor_bandwidth_drift must be 0 (the monitor's default) to 1, "
                             f"got {monitor_bandwidth_drift!r}")
        #: The monitor's Kalman bandwidth drift per measurement (0: its default; opt-in).
        self.monitor_bandwidth_drift = float(monitor_bandwidth_drift)
        for key, flag in (("robust_spread", robust_spread), ("byte_reading", byte_reading)):
            if not isinstance(flag, bool):
                raise ValueError(f"{key} must be true or false, got {flag!r}")
        #: Forecast spreads robust to isolated spikes (opt-in; docs/controllers.md).
        self.robust_spread = robust_spread
        if not (latency_jump_ratio == 0.0 or latency_jump_ratio > 1.0):
            raise ValueError(f"latency_jump_ratio must be 0 (off) or > 1, got "
                             f"{latency_jump_ratio!r}")
        #: The collective hedge leaves one step between two latency levels out (0: off).
        self.latency_jump_ratio = float(latency_jump_ratio)
        self._init_byte_reading(byte_reading, byte_reading_sd, byte_hedge_sd)
        self._set_calibration(calibration)
        if window_steps < 1 or history < 1:
            raise ValueError(f"need window_steps >= 1 and history >= 1, got {window_steps!r}, {history!r}")
        if target_progress < 0.0 or not horizon_progress > 0.0:
            raise ValueError("need target_progress >= 0 and horizon_progress > 0")
        if risk < 0.0 or spread < 0.0 or not (0.0 <= switch_margin < 1.0):
            raise ValueError("need risk >= 0, spread >= 0 and 0 <= switch_margin < 1")
        if not two_phase_margin >= 0.0:
            raise ValueError(f"two_phase_margin must be >= 0, got {two_phase_margin!r}")
        self.grid = tuple(grid)
        self.window_steps = int(window_steps)
        self.history = int(history)
        self.target_progress = float(target_progress)
        self.horizon_progress = float(horizon_progress)
        self.risk = float(risk)
        self.spread = float(spread)
        self.switch_margin = float(switch_margin)
        self.two_phase = bool(two_phase)
        self.two_phase_margin = float(two_phase_margin)
        if not replan_change > 0.0:
            raise ValueError(f"replan_change must be > 0, got {replan_change!r}")
        self.replan_change = float(replan_change)
        if type(replan_persist) is not int or replan_persist < 1:  # an int, not a bool
            raise ValueError(f"replan_persist must be an integer >= 1, got {replan_persist!r}")
        self.replan_persist = int(replan_persist)
        if not isinstance(replan_band, bool):
            raise ValueError(f"replan_band must be true or false, got {replan_band!r}")
        self.replan_band = replan_band
        if isinstance(replan_drop, bool) or not replan_drop >= 0.0:
            raise ValueError(f"replan_drop must be 0 (off) or > 0, got {replan_drop!r}")
        #: A fall of the bandwidth estimate below the last plan's by ``log1p`` of this re-plans
        #: at once on a forecast started at it (0: off; docs/controllers.md).
        self.replan_drop = float(replan_drop)
        if type(switch_chunks) is not int or switch_chunks < 1:  # an int, not a bool
            raise ValueError(f"switch_chunks must be an integer >= 1, got {switch_chunks!r}")
        self.switch_chunks = int(switch_chunks)
        self._init_probing(probe_every, probe_factor, identify_every, identify_sd)
        if regime_steps < 0:
            raise ValueError(f"regime_steps must be >= 0, got {regime_steps!r}")
        self.regime_steps = int(regime_steps)
        if collective_regret < 0.0 or 0.0 < collective_regret < 1.0:
            raise ValueError(f"collective_regret must be 0 (off) or >= 1, got {collective_regret!r}")
        self.collective_regret = float(collective_regret)
        self.compressor = compressor
        self._auto_collective = collective == AUTO
        self._terms: dict[tuple[str, int, float, float, str], Any] = {}
        self._priced_terms = {}
        self._grid_terms = {}
        self._candidates = {
            comp: tuple(c for c in DEFAULT_ALLOWED if get_spec(comp).supports(c))
            if collective == AUTO else (collective,)
            for comp in ("none", compressor)
        }
        self._init_budget(plan_budget)
        super().__init__(
            min_density=grid[-1],
            max_density=grid[0],
            initial_density=min(grid[0], max(grid[-1], float(initial_density))),
            compressor=compressor,
            collective=collective,
        )

    def set_auto_collectives(self, allowed: tuple[str, ...]) -> None:
        """Candidates of ``collective="auto"`` for the planner and the decisions (names already
        checked; :class:`sim.errors.InputError` when a compressor can use none of them)."""
        super().set_auto_collectives(allowed)
        if self._auto_collective:
            self._candidates = {
                comp: tuple(c for c in allowed if get_spec(comp).supports(c))
                for comp in ("none", self.compressor)
            }
            self._terms.clear()
            self._ran_now = None
            self._priced_terms.clear()
            self._grid_terms.clear()
            self._priced_now.clear()

    def _reset_state(self) -> None:
        self._reset_budget()
        self._state = ProgressState()
        # Latency keeps its whole window: the monitor's latency touches the 1 us floor on
        # links whose latency nears zero, and a log-space level test on a signal clipped at a
        # floor finds shifts that are the fit's, not the link's (regimes of a few observations
        # with no spread, planned on with false confidence).
        self._lat = LinkForecast(self.history, _LATENCY_FLOOR_S, walk=True,
                                robust=self.robust_spread)
        self._lat_moves = LatencyDiffusion(self.history, self.latency_jump_ratio)
        self._last_it_s = 0.0  # the last iteration's seconds: the next decision's exposure
        self._bytes_link: tuple[float, float] | None = None  # ``_read_as_bytes``
        self._bytes_hedge: tuple[float, float] | None = None
        self._bw = LinkForecast(self.history, _BANDWIDTH_FLOOR_BPS, self.regime_steps,
                               self.replan_change, robust=self.robust_spread)
        self._links = deque(maxlen=HEDGE_RECENT + 1)
        self._since_plan = 0
        self._planned = False
        self._planned_on: tuple[float, float] = (0.0, 0.0)
        #: The last plan's forecast band in log units: (latency low, high, bandwidth low, high)
        #: over its scenarios (``replan_band``).
        self._band: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)
        self._planned_links = None
        self._regime_on = 0
        #: Consecutive observations whose link moved past ``replan_change`` from the plan's.
        self._moved_run = 0
        self._compress_s = 0.0
        self._corr: dict[str, float] = {}
        self._priced_now = {}
        #: Backward window (seconds) communication overlaps with, per kind of decision (dense
        #: or compressed: compression on the compute stream widens it), from the last
        #: measurement (:mod:`sim.control.overlap`).
        self._window_s: dict[bool, float | None] = {True: None, False: None}
        self._window_known: dict[bool, bool] = {True: False, False: False}
        self._ready: tuple[tuple[float, ...], tuple[float, ...]] = ((), ())
        self._gain_ratio = 1.0
        self._coeff_cache: dict[tuple[float, float], Any] = {}
        self._coeff_ratio = math.nan  # the gain ratio the cached coefficients hold for
        #: The model's gain per (density, mid-step), whatever the ratio, and its model.
        self._raw_gain: dict[tuple[float, float], float] = {}
        self._raw_model: Any = None
        self._rows: dict[float, list[Any]] = {}
        self._row_t0 = 0.0
        self._by_gain: dict[float, tuple[float, float, float]] = {}
        #: The planned density (a probe step runs another one without changing the plan).
        self._held = self.density
        self._reset_probing()

    def _plan(self, obs: Observation) -> float:
        # Two-phase plans only towards a real target: a rolling horizon would always plan the
        # finishing switch for later.
        delta, to_target = self._delta()
        current = min(self.grid, key=lambda d: abs(math.log(d / self._held)))
        # Only the least score and the held density's are read: the others are pruned.
        scores = self._plan_scores(obs, delta, to_target and self.two_phase, exact=current)
        best = min(self.grid, key=lambda d: (scores[d], -d))
        chosen = best if scores[best] < scores[current] * (1.0 - self.switch_margin) else (
            self._held
        )
        return chosen

    def _forecast_band(self, link: tuple[float, float], lat_floor: float, bw_floor: float,
                       obs: Observation | None = None) -> tuple[float, float, float, float]:
        """The plan's scenarios' range of log latency and log bandwidth (each raised to its
        floor), with ``link`` (the log estimate planned on) in it. The scenarios the plan of
        ``obs`` priced are not forecast again (nothing has moved since)."""
        lats = [link[0]]
        bws = [link[1]]
        planned = self._planned_links
        links = planned[1] if obs is not None and planned is not None and planned[0] is obs else (
            self._scenario_links())
        for lat, bw in links:
            lats.append(math.log(max(lat, lat_floor)))
            bws.append(math.log(max(bw, bw_floor)))
        return min(lats), max(lats), min(bws), max(bws)

    def decide(self, obs: Observation) -> Decision:
        """The planned density; under ``collective="auto"`` each bucket over the collective
        with the least corrected predicted time on the current estimates."""
        if not self._auto_collective:
            return super().decide(obs)
        # What the base class's decision builder would give, less its own "auto" collective
        # choice (replaced below, so not computed: this runs on a real run's critical path).
        # Whether ``obs`` ran under the decision in force does not matter to this controller.
        density = float(self._next_density(obs, True))
        # DensityPolicy._clip, its two-value min and max written as their comparisons.
        density = density if density > self.min_density else self.min_density
        density = self.density = density if density < self.max_density else self.max_density
        dense = density >= 1.0
        compressor = "none" if dense else self.compressor
        value = 1.0 if dense else float(density)
        bw = obs.bandwidth_Bps
        if bw is None or not bw > 0:
            choice = self._minimax_choice(obs, density)
        elif self.collective_regret > 0.0 and len(self._bw) > 0:
            # The latest estimate and the ones before it: a collective the latest alone
            # makes cheapest must not be many times the best on the link just measured; and
            # the latency the history says the next iteration may meet (module doc).
            choice = self._hedged_choice(obs, density, bw)
        else:
            choice = self._comm_s(obs, density, obs.latency_s or 0.0, bw)[0]
        layout = self._layout(obs)
        picked = set(choice.values())
        if len(picked) == 1:
            collective = picked.pop()
            per_bucket: tuple[str, ...] = ()
        else:
            per_bucket = tuple([choice[m] for m in layout.sizes])
            collective = per_bucket[layout.largest]
        last = self._last
        # The same decision as the last one is not built again (a step that did not plan).
        if last is None or (
            last.compressor, last.density, last.collective, last.bucket_collectives, last.sync,
            last.groups, last.shuffle_every,
        ) != (compressor, value, collective, per_bucket, "allreduce", 1, 1):
            last = self._last = Decision(compressor, value, collective, per_bucket)
        return last
    def _next_density(self, obs: Observation, current: bool) -> float:
        it_s = self._track(obs)
        self._note_decision_cost(obs, it_s)
        if obs.decision is not None:
            self._recent.append(obs.decision.density)
        self._note_split(obs)
        if self._probing:
            self._probing = False
            return self._held
        if len(self._bw) == 0 or it_s is None:
            return self._held
        self._since_plan += 1
        # (Two-value ``max`` written as the comparison it makes: cheaper than the call.)
        lat = obs.latency_s or 0.0
        bw = obs.bandwidth_Bps or 0.0
        link = (math.log(_LATENCY_FLOOR_S if _LATENCY_FLOOR_S > lat else lat),
                math.log(_BANDWIDTH_FLOOR_BPS if _BANDWIDTH_FLOOR_BPS > bw else bw))
        planned_lat, planned_bw = self._planned_on
        moved = abs(link[0] - planned_lat)
        moved_bw = abs(link[1] - planned_bw)
        if moved_bw > moved:
            moved = moved_bw
        if moved >= math.log1p(self.replan_change) and self.replan_band:
            # Inside the band the last plan priced (its scenarios), the move was hedged for.
            lo_l, hi_l, lo_b, hi_b = self._band
            if lo_l <= link[0] <= hi_l and lo_b <= link[1] <= hi_b:
                moved = 0.0
        self._moved_run = self._moved_run + 1 if moved >= math.log1p(self.replan_change) else 0
        # Persistence only at the least density: its payload's byte term is the hardest to see
        # under timing noise, and holding it is the cheapest mistake; above it, a slower link
        # costs every step it is not reacted to.
        persist = self.replan_persist if self._held <= self.grid[-1] else 1
        dropped = (self.replan_drop > 0.0 and self._planned and self._held > self.grid[-1]
                   and self._planned_on[1] - link[1] > math.log1p(self.replan_drop))
        if dropped:
            self._bw.start_regime()
        regime = self._bw.regime_start()
        if (
            not dropped
            and self._planned
            and self._since_plan < self.window_steps
            and self._moved_run < persist
            and regime == self._regime_on
        ):
            return self._held
        self._since_plan = 0
        self._moved_run = 0
        self._planned = True
        self._planned_on = link
        self._regime_on = regime
        self._held = self._plan(obs)
        if self.replan_band:
            self._band = self._forecast_band(link, _LATENCY_FLOOR_S, _BANDWIDTH_FLOOR_BPS, obs)
        return self._probe_or_plan(obs)
