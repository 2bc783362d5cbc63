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

Predicted communication times are corrected per collective by the measured-over-predicted ratio of
the decisions run over it (an EWMA of its log whose steps are bounded, so single timing spikes
barely move it), and each bucket goes over the collective with the
least corrected time (a real collective may run slower than its model).

It re-plans early when the latency or bandwidth estimate moves by ``replan_change`` (relative)
since the last plan, in each of the last ``replan_persist`` observations while it holds the
grid's least density (1, the default: a move in the latest one; more: only a persistent move, so
that noisy estimates of a tiny payload's byte term in a real run, where a plan costs
milliseconds on the critical path, do not re-plan every step; above the least density any move
re-plans at once, since a slower link costs every step it is not reacted to), or when the
bandwidth forecast accepts a new level shift: once a new bandwidth level has held for
``regime_steps`` observations, the forecast describes it alone (level, trend, spread and median
since the shift), so after a step of the link the plan no longer hedges towards the link before
it (:class:`LinkForecast`; ``regime_steps=0`` turns this off).

A collective never run yet gets half the mean log correction of those that were (a correction
absorbs both what every collective shares -- per-call overhead, timing noise, the monitor's
latency/bandwidth split -- and what is specific to the one measured), so noisy measurements of
the collective in use do not make an untried one look cheap by the whole factor.

Probing (``probe_every`` > 0): the monitor cannot split latency from bandwidth while every
collective has the same shape (one density held, one bucket), and small payloads carry a byte
term too small to see; predictions for other densities are then guesses. When the last
``probe_every`` observations ran densities within a factor 3 of each other and a plan under a
``probe_factor`` times faster link would pick a denser density (else, under a ``probe_factor``
times slower one, a sparser density), the step after the plan runs that density once (bounded
exploration); the plan itself is unchanged.

``delta`` is what is left to ``target_progress`` when one is set, else ``horizon_progress`` (a
rolling target). The gain of a density other than the one in force is the model's gain scaled by
the ratio of the measured gain (``Observation.gain``) to the model's gain at the density in force,
so a real run's measured gains calibrate the model online. Between re-plans the density holds.
The controller reads nothing but its observations: it runs unchanged in real runs.

Size (over 400 lines): one controller: its model fitting, prediction and optimisation
share private state across the window.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

from sim.compress.spec import get_spec

from ..decision_builder import AUTO, parse_densities
from ..overlap import exposed_s, ready_fractions, window_from_exposed
from ..progress import ProgressState
from ..registry import register_policy
from ..selector import DEFAULT_ALLOWED, collective_cost_terms
from ..types import Decision, Observation
from .density_base import DensityPolicy, iteration_time_s

__all__ = ["LinkForecast", "MpcPolicy", "steps_to_progress"]

#: Corrections start after the monitor's first estimates settle, and stay within a factor 16.
_SETTLE_STEPS = 3
_MAX_LOG_CORR = math.log(16.0)
#: One measurement moves a correction by at most 0.3 times this (log units).
_MAX_LOG_STEP = math.log(2.0)

#: Links the first decision (before any estimate) is hedged over: 10 us to 100 ms latency,
#: 0.1 to 100 Gbit/s.
_PRIOR_LINKS = tuple((lat, bw) for lat in (1e-5, 1e-3, 1e-1) for bw in (1.25e7, 1.25e9, 1.25e10))
#: Floors of the forecast signals: a monitor estimate of zero latency (a link whose latency
#: touches zero, or a fit that attributes all of it to bytes) is 1 us in the forecast.
_LATENCY_FLOOR_S = 1e-6
_BANDWIDTH_FLOOR_BPS = 1.0
#: A measured iteration determines the backward window when its exposed communication exceeds
#: this many times the last bucket's collective (which no window can hide); otherwise the
#: window is assumed to be this share of compute and compression (backward = 2 x forward).
_TAIL_MARGIN = 1.1
_BACKWARD_SHARE = 2.0 / 3.0
#: Iterations per chunk of the progress prediction.
_CHUNK = 8

_DEFAULT_GRID = (1.0, 0.5, 0.3, 0.2, 0.1, 0.05, 0.03, 0.02, 0.01, 0.005, 0.003, 0.002, 0.001)


class LinkForecast:
    """Level, trend and spread of a positive signal in log space over a sliding window.

    With ``regime_steps`` > 0 the window is cut at a level shift (a step of the link): when
    splitting it in two constant levels explains at least :data:`_SHIFT_SHARE` of its variance
    and the levels differ by more than ``log(1 + shift)``, and the newer level has held for at
    least ``regime_steps`` observations, only the observations since the shift count (the
    level, trend, spread and median describe the link in force, not the one before it). A
    shift younger than that may be a spike passing, and the whole window still counts.
    """

    def __init__(self, history: int, floor: float = 0.0, regime_steps: int = 0,
                 shift: float = 0.25) -> None:
        self._xs: deque[float] = deque(maxlen=history)
        self._floor = float(floor)
        self._regime_steps = int(regime_steps)
        self._min_shift = math.log1p(shift)
        self._cut: int | None = 0
        self._seen = 0
        #: :meth:`fit` of the current window (a plan asks for it once per density and case).
        self._fit: tuple[float, float, float] | None = None

    def update(self, value: float) -> None:
        """Add one observation (positive; raised to the floor first, so that a signal touching
        zero does not send the log-space fit to minus infinity)."""
        self._xs.append(math.log(max(value, self._floor)))
        self._seen += 1
        self._cut = None
        self._fit = None

    def regime_start(self) -> int:
        """Number of observations before the regime in force (the accepted level shift; the
        window's first observation without one): it moves when a new shift is accepted."""
        self._regime()
        first = self._seen - len(self._xs)
        return first + (self._cut or 0) if self._cut else 0

    def __len__(self) -> int:
        return len(self._xs)

    def _regime(self) -> list[float]:
        """The window's observations since the last accepted level shift (all without one)."""
        xs = list(self._xs)
        if self._regime_steps <= 0:
            return xs
        if self._cut is None:
            self._cut = _level_shift(xs, self._regime_steps, self._min_shift)
        return xs[self._cut:]

    def fit(self) -> tuple[float, float, float]:
        """``(level, trend per observation, residual std)`` in log units; level is the fitted
        value at the latest observation."""
        if self._fit is None:
            self._fit = self._fit_window()
        return self._fit

    def _fit_window(self) -> tuple[float, float, float]:
        xs = self._regime()
        n = len(xs)
        if n == 0:
            raise ValueError("no observations")
        if n < 3:
            return xs[-1], 0.0, 0.0
        mx = (n - 1) / 2.0
        my = sum(xs) / n
        sxx = sum((i - mx) ** 2 for i in range(n))
        slope = sum((i - mx) * (x - my) for i, x in enumerate(xs)) / sxx
        level = my + slope * (n - 1 - mx)
        res = [x - (my + slope * (i - mx)) for i, x in enumerate(xs)]
        std = math.sqrt(sum(r * r for r in res) / (n - 2))
        return level, slope, std

    def median(self, default: float = 0.0) -> float:
        """Median of the window (``default`` before any observation)."""
        if not self._xs:
            return default
        xs = sorted(self._regime())
        m = len(xs) // 2
        return math.exp(xs[m] if len(xs) % 2 else 0.5 * (xs[m - 1] + xs[m]))

    def at(self, steps_ahead: float, z: float, default: float = 0.0) -> float:
        """Forecast ``steps_ahead`` observations ahead, ``z`` spreads away from the trend
        (``default`` before any observation)."""
        if not self._xs:
            return default
        level, slope, std = self.fit()
        # The trend is trusted only as far as the window it was fitted on, and never beyond
        # the range the window saw.
        xs = self._regime()
        ahead = min(steps_ahead, float(len(xs)))
        centre = min(max(xs), max(min(xs), level + slope * ahead))
        return math.exp(centre + z * std)


#: Share of a window's variance two constant levels must explain to count as a level shift.
_SHIFT_SHARE = 0.8


def _level_shift(xs: list[float], min_after: int, min_shift: float) -> int:
    """Index of the first observation after the window's level shift (0 when there is none):
    the split into two constant levels with the least squared error, accepted when it explains
    :data:`_SHIFT_SHARE` of the variance, the levels differ by ``min_shift`` and the later one
    has at least ``min_after`` observations."""
    n = len(xs)
    if n < min_after + 2:
        return 0
    total = sum(xs)
    mean = total / n
    sst = sum((x - mean) ** 2 for x in xs)
    if sst <= 0.0:
        return 0
    best_k, best_gain, head = 0, 0.0, 0.0
    for k in range(1, n):
        head += xs[k - 1]
        m1, m2 = head / k, (total - head) / (n - k)
        # Between-levels sum of squares: what the split explains.
        gain = k * (m1 - mean) ** 2 + (n - k) * (m2 - mean) ** 2
        if gain > best_gain:
            best_k, best_gain = k, gain
    head = sum(xs[:best_k])
    jump = abs((total - head) / (n - best_k) - head / best_k) if best_k else 0.0
    accept = best_gain >= _SHIFT_SHARE * sst and jump > min_shift and n - best_k >= min_after
    return best_k if accept else 0


def steps_to_progress(
    delta: float, eff: float, lag0: float, lag_star: float, rate: float, max_steps: float
) -> float:
    """Iterations at a constant gain until progress grows by ``delta``.

    Progress after ``n`` iterations grows by ``n * eff - (lag_n - lag0)`` with the lag relaxing
    geometrically from ``lag0`` to ``lag_star`` at ``rate`` per iteration (the convergence
    model's recursion at a constant gain, the phase damping frozen). ``max_steps`` if never.
    """

    def gained(n: float) -> float:
        return n * eff - (lag_star - lag0) * (1.0 - (1.0 - rate) ** n)

    if gained(max_steps) < delta:
        return max_steps
    lo, hi = 0.0, max_steps
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        if gained(mid) >= delta:
            hi = mid
        else:
            lo = mid
    return hi


@register_policy(
    "mpc",
    "Model-predictive: forecast the link, predict time-to-target per density, apply, re-plan.",
)
class MpcPolicy(DensityPolicy):
    """Receding-horizon density choice on the convergence model and a link forecast."""

    def __init__(
        self,
        *,
        densities: tuple[float, ...] | str = _DEFAULT_GRID,
        window_steps: int = 10,
        history: int = 40,
        target_progress: float = 0.0,
        horizon_progress: float = 200.0,
        risk: float = 0.5,
        spread: float = 1.0,
        switch_margin: float = 0.02,
        two_phase: bool = True,
        two_phase_margin: float = 0.03,
        replan_change: float = 0.25,
        replan_persist: int = 1,
        switch_chunks: int = 1,
        initial_density: float = 0.001,
        probe_every: int = 0,
        probe_factor: float = 10.0,
        regime_steps: int = 6,
        compressor: str = "topk",
        collective: str = "auto",
    ) -> None:
        grid = list(parse_densities(densities))
        if window_steps < 1 or history < 1:
            raise ValueError(f"need window_steps >= 1 and history >= 1, got {window_steps!r}, "
                             f"{history!r}")
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
        if isinstance(replan_persist, bool) or not isinstance(replan_persist, int) or (
            replan_persist < 1
        ):
            raise ValueError(f"replan_persist must be an integer >= 1, got {replan_persist!r}")
        self.replan_persist = int(replan_persist)
        if isinstance(switch_chunks, bool) or not isinstance(switch_chunks, int) or (
            switch_chunks < 1
        ):
            raise ValueError(f"switch_chunks must be an integer >= 1, got {switch_chunks!r}")
        self.switch_chunks = int(switch_chunks)
        if probe_every < 0 or not probe_factor > 1.0:
            raise ValueError(f"need probe_every >= 0 and probe_factor > 1, got {probe_every!r}, "
                             f"{probe_factor!r}")
        self.probe_every = int(probe_every)
        if regime_steps < 0:
            raise ValueError(f"regime_steps must be >= 0, got {regime_steps!r}")
        self.regime_steps = int(regime_steps)
        self.probe_factor = float(probe_factor)
        self.compressor = compressor
        self._auto_collective = collective == AUTO
        self._terms: dict[tuple[str, int, float, float, str], Any] = {}
        self._candidates = {
            comp: tuple(c for c in DEFAULT_ALLOWED if get_spec(comp).supports(c))
            if collective == AUTO else (collective,)
            for comp in ("none", compressor)
        }
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

    def _reset_state(self) -> None:
        self._state = ProgressState()
        # Latency keeps its whole window: the monitor's latency touches the 1 us floor on
        # links whose latency nears zero, and a log-space level test on a signal clipped at a
        # floor finds shifts that are the fit's, not the link's (regimes of a few observations
        # with no spread, planned on with false confidence).
        self._lat = LinkForecast(self.history, _LATENCY_FLOOR_S)
        self._bw = LinkForecast(self.history, _BANDWIDTH_FLOOR_BPS, self.regime_steps,
                                self.replan_change)
        self._since_plan = 0
        self._planned = False
        self._planned_on: tuple[float, float] = (0.0, 0.0)
        self._regime_on = 0
        #: Consecutive observations whose link moved past ``replan_change`` from the plan's.
        self._moved_run = 0
        self._compress_s = 0.0
        self._corr: dict[str, float] = {}
        #: Backward window (seconds) communication overlaps with, per kind of decision (dense
        #: or compressed: compression on the compute stream widens it), from the last
        #: measurement (:mod:`sim.control.overlap`).
        self._window_s: dict[bool, float | None] = {True: None, False: None}
        self._window_known: dict[bool, bool] = {True: False, False: False}
        self._ready: tuple[tuple[float, ...], tuple[float, ...]] = ((), ())
        self._gain_ratio = 1.0
        self._coeff_cache: dict[tuple[float, float], tuple[float, float, float]] = {}
        #: The planned density (a probe step runs another one without changing the plan).
        self._held = self.density
        self._probing = False
        self._last_probe = -(10**9)
        self._recent: deque[float] = deque(maxlen=max(1, self.probe_every))

    # ------------------------------------------------------------------ bookkeeping

    def _track(self, obs: Observation) -> None:
        """Advance the model state with the measured gain; learn compression and overlap."""
        pm = self.progress_model
        d = obs.decision
        if d is not None and obs.step > self._state.step:
            model_gain = pm.gain(d.compressor, d.density, obs.step)
            gain = obs.gain if obs.gain is not None and obs.gain > 0.0 else model_gain
            self._state = pm.advance(
                ProgressState(obs.step - 1, self._state.q, self._state.lag, self._state.progress),
                min(1.0, gain),
            )
            if d.density < 1.0:
                self._gain_ratio = min(4.0, max(0.25, gain / model_gain))
                if obs.compress_s is not None:
                    self._compress_s = obs.compress_s
        if (
            d is not None and obs.comm_s is not None and obs.comm_s > 0.0
            and obs.bandwidth_Bps is not None and obs.bandwidth_Bps > 0.0
        ):
            # Measured over predicted communication per collective (EWMA of the log): absorbs
            # per-bucket latencies and the monitor's bias where latency and bytes are confused.
            pred = self._decision_comm_s(obs, d, obs.latency_s or 0.0, obs.bandwidth_Bps)
            # The link's own time where the run measured it (a real run's ``comm_s`` also holds
            # the wait for late ranks, the same for every collective: corrected per collective,
            # it made an untried one look cheap).
            link = obs.extra.get("link_comm_s", obs.comm_s)
            if pred > 0.0 and link > 0.0 and obs.step > _SETTLE_STEPS:
                r = max(-_MAX_LOG_CORR, min(_MAX_LOG_CORR, math.log(link / pred)))
                for coll in d.collectives_used():
                    # From the inherited value, one measurement moving it at most 0.3 log 2:
                    # a timing spike (a descheduled rank) cannot brand a collective slow for
                    # good, a sustained bias is learned within a few steps.
                    base = self._correction(coll)
                    step = max(-_MAX_LOG_STEP, min(_MAX_LOG_STEP, r - base))
                    self._corr[coll] = base + 0.3 * step
        if obs.latency_s is not None and obs.latency_s > 0.0:
            self._lat.update(obs.latency_s)
        if obs.bandwidth_Bps is not None and obs.bandwidth_Bps > 0.0:
            self._bw.update(obs.bandwidth_Bps)
        it_s = obs.extra.get("iteration_s")
        if it_s is not None and d is not None and obs.comm_s is not None and obs.compute_s:
            # The backward window communication hides behind, per kind of decision (dense or
            # compressed: compression on the compute stream shifts when the buckets are
            # ready), solved from this iteration's per-bucket communication (the model's
            # shares of the measured total) and its exposed seconds.
            dense = d.density >= 1.0
            exposed = it_s - obs.compute_s - (obs.compress_s or 0.0)
            sizes = obs.bucket_bytes or (obs.grad_bytes,)
            lat, bw = obs.latency_s or 0.0, obs.bandwidth_Bps or 0.0
            shares = [
                self._comm_terms(d.collective_for(i), obs, float(m), d.density,
                                 d.compressor).time_s(lat, bw) if bw > 0.0 else float(m)
                for i, m in enumerate(sizes)
            ]
            total = sum(shares)
            per_bucket = [obs.comm_s * x / total for x in shares] if total > 0.0 else [
                obs.comm_s / len(shares)] * len(shares)
            ready = self._ready_fracs(obs)
            cap = obs.compute_s + (obs.compress_s or 0.0)
            least = min(cap, window_from_exposed(per_bucket, ready, max(0.0, exposed)))
            if exposed > _TAIL_MARGIN * per_bucket[-1] + 1e-12:
                # More than the last bucket's own collective is exposed: the window is the
                # one that explains it.
                self._window_s[dense] = least
                self._window_known[dense] = True
            else:
                # Only the last bucket (ready as the window closes) was exposed, or nothing:
                # the window is at least ``least``; beyond that keep what an earlier
                # measurement determined, else assume backward is 2/3 of the compute (B = 2F).
                old = self._window_s[dense] if self._window_known[dense] else None
                guess = old if old is not None else min(cap, _BACKWARD_SHARE * cap)
                self._window_s[dense] = max(least, guess)

    # ------------------------------------------------------------------ prediction

    def _comm_terms(self, collective: str, obs: Observation, m_bytes: float, density: float,
                    comp: str) -> Any:
        key = (collective, obs.world_size, m_bytes, density, comp)
        terms = self._terms.get(key)
        if terms is None:
            terms = collective_cost_terms(collective, obs.world_size, m_bytes, density, comp)
            self._terms[key] = terms
        return terms

    @staticmethod
    def _buckets(obs: Observation) -> dict[float, int]:
        """Bucket sizes (dense bytes per worker) and how many buckets have each; the whole
        gradient as one message when the caller gives no buckets."""
        sizes = obs.bucket_bytes or (obs.grad_bytes,)
        out: dict[float, int] = {}
        for b in sizes:
            out[float(b)] = out.get(float(b), 0) + 1
        return out

    def _decision_comm_s(self, obs: Observation, decision: Decision, lat: float, bw: float
                         ) -> float:
        """Predicted (uncorrected) communication of ``decision``, bucket by bucket."""
        sizes = obs.bucket_bytes or (obs.grad_bytes,)
        return sum(
            self._comm_terms(
                decision.collective_for(i), obs, float(m), decision.density, decision.compressor
            ).time_s(lat, bw)
            for i, m in enumerate(sizes)
        )

    def _minimax_choice(self, obs: Observation, density: float) -> dict[float, str]:
        """Per bucket size, the collective whose worst ratio to the best one over
        :data:`_PRIOR_LINKS` is least: the choice before the monitor knows anything."""
        comp = "none" if density >= 1.0 else self.compressor
        out: dict[float, str] = {}
        for m in self._buckets(obs):
            cands = self._candidates[comp]
            worst = dict.fromkeys(cands, 0.0)
            for lat, bw in _PRIOR_LINKS:
                times = {
                    c: self._comm_terms(c, obs, m, density, comp).time_s(lat, bw) for c in cands
                }
                best = min(times.values())
                for c in cands:
                    worst[c] = max(worst[c], times[c] / best if best > 0.0 else 1.0)
            out[m] = min(cands, key=lambda c: worst[c])
        return out

    def _bucket_times(
        self, obs: Observation, density: float, lat: float, bw: float
    ) -> tuple[dict[float, str], dict[float, float]]:
        """Cheapest collective per bucket size for ``density`` (each collective's prediction
        corrected by what it measured so far) and its predicted seconds per bucket."""
        comp = "none" if density >= 1.0 else self.compressor
        choice: dict[float, str] = {}
        secs: dict[float, float] = {}
        for m in self._buckets(obs):
            best, best_s = "", math.inf
            for coll in self._candidates[comp]:
                terms = self._comm_terms(coll, obs, m, density, comp)
                t = terms.time_s(lat, bw) * math.exp(self._dominated_correction(
                    coll, terms, obs, m, density, comp))
                if t < best_s:
                    best, best_s = coll, t
            choice[m] = best
            secs[m] = best_s
        return choice, secs

    def _comm_s(
        self, obs: Observation, density: float, lat: float, bw: float
    ) -> tuple[dict[float, str], float]:
        """Cheapest collective per bucket size for ``density`` and the predicted total
        communication."""
        choice, secs = self._bucket_times(obs, density, lat, bw)
        return choice, sum(count * secs[m] for m, count in self._buckets(obs).items())

    def _ready_fracs(self, obs: Observation) -> tuple[float, ...]:
        """Ready fraction of each bucket in the backward window (cumulative bytes)."""
        sizes = tuple(float(b) for b in (obs.bucket_bytes or (obs.grad_bytes,)))
        if self._ready[0] != sizes:
            self._ready = (sizes, ready_fractions(sizes))
        return self._ready[1]

    def _dominated_correction(self, coll: str, terms: Any, obs: Observation, m: float,
                              density: float, comp: str) -> float:
        """:meth:`_correction` of ``coll``, raised for a collective never run to the correction
        of any that ran whose terms it dominates for this bucket (as many latencies and bytes
        or more: it cannot be faster on any link, so no inherited share of a measured slowdown
        may make it look faster)."""
        corr = self._correction(coll)
        if coll in self._corr:
            return corr
        for ran, own in self._corr.items():
            if own <= corr or ran not in self._candidates[comp]:
                continue
            other = self._comm_terms(ran, obs, m, density, comp)
            if terms.n_alpha >= other.n_alpha and terms.n_bytes >= other.n_bytes:
                corr = own
        return corr

    def _correction(self, coll: str) -> float:
        """Log correction of ``coll``: its own once it ran, else half the mean of those that
        ran (what was measured is part shared by every collective, part specific to the one
        measured; nothing tells the two apart, so half the evidence carries over)."""
        own = self._corr.get(coll)
        if own is not None:
            return own
        return 0.5 * sum(self._corr.values()) / len(self._corr) if self._corr else 0.0

    def _iteration_s(self, obs: Observation, density: float, lat: float, bw: float) -> float:
        """Predicted seconds of one iteration at ``density``: compute, compression and the
        communication the backward window does not hide (nothing hidden before any window
        was measured)."""
        secs = self._bucket_times(obs, density, lat, bw)[1]
        times = [secs[float(m)] for m in (obs.bucket_bytes or (obs.grad_bytes,))]
        compute = obs.compute_s or 0.0
        compress = self._compress_s if density < 1.0 else 0.0
        dense = density >= 1.0
        window = self._window_s[dense]
        if window is None:
            window = self._window_s[not dense]
        exposed = sum(times) if window is None else exposed_s(times, self._ready_fracs(obs),
                                                              window)
        return compute + compress + exposed

    def _coeffs(self, density: float, mid: float) -> tuple[float, float, float]:
        """``(efficiency, equilibrium lag, relaxation rate)`` of ``density`` around step
        ``mid``: the workload model's gain there, scaled by the measured-over-model ratio."""
        key = (density, mid)
        hit = self._coeff_cache.get(key)
        if hit is None:
            pm = self.progress_model
            if density >= 1.0:
                g = 1.0
            else:
                g = min(1.0, pm.gain(self.compressor, density, mid) * self._gain_ratio)
            lag_star = pm.lam * (1.0 / g - 1.0) / (1.0 + mid * pm.inv_phase)
            hit = (pm.efficiency(g), lag_star, min(1.0, pm.mu * g))
            self._coeff_cache[key] = hit
        return hit

    def _finish(self, density: float, t: float, q: float, lag: float, prog: float,
                goal: float, cap: float) -> float:
        """Iterations at ``density`` from model state ``(t, q, lag, prog)`` until progress
        reaches ``goal`` (``inf`` beyond ``cap``): the convergence model's recursion in chunks
        of :data:`_CHUNK` iterations (gain and equilibrium lag of each chunk taken at its
        middle, the lag relaxing geometrically within it), whole iterations counted."""
        if prog >= goal:
            return 0.0
        n = 0.0
        while n < cap:
            eff, lag_star, rate = self._coeffs(density, t + n + 0.5 * _CHUNK)
            q_end = q + _CHUNK * eff
            lag_end = lag_star + (lag - lag_star) * (1.0 - rate) ** _CHUNK
            if q_end - lag_end >= goal:
                # Whole iterations: even a sliver of progress costs a full one.
                k = 1
                while k < _CHUNK and (
                    q + k * eff - (lag_star + (lag - lag_star) * (1.0 - rate) ** k) < goal
                ):
                    k += 1
                return n + k
            q, lag = q_end, lag_end
            prog = max(prog, q - lag)
            if prog >= goal:
                return n + _CHUNK
            n += _CHUNK
        return math.inf

    def _steps(self, density: float, delta: float) -> float:
        """Iterations at ``density`` until progress grows by ``delta`` from the current model
        state (``50 delta + 1000`` if never)."""
        st = self._state
        cap = 50.0 * delta + 1000.0
        n = self._finish(density, float(max(st.step, 0)), st.q, st.lag, st.progress,
                         st.progress + delta, cap)
        return min(n, cap)

    def _scenario_iteration_s(self, obs: Observation, density: float, bw_scale: float = 1.0
                              ) -> list[float]:
        """Predicted seconds per iteration at ``density`` under each forecast scenario: the
        spread's pessimistic, central and optimistic cases (the trend extrapolated to the next
        re-plan, the level held beyond it) and the link back at the window's median (a spike
        passing). ``bw_scale`` multiplies every bandwidth (a probe's what-if)."""
        ahead = float(self.window_steps)
        out = []
        for z in (-self.spread, 0.0, self.spread):
            out.append(self._iteration_s(obs, density, self._lat.at(ahead, -z),
                                         self._bw.at(ahead, z) * bw_scale))
        if len(self._bw):
            out.append(self._iteration_s(obs, density, self._lat.median(),
                                         self._bw.median() * bw_scale))
        return out

    def _robust(self, times: list[float]) -> float:
        """Mean over the scenarios plus ``risk`` times their half-range."""
        return sum(times) / len(times) + self.risk * (max(times) - min(times)) / 2.0

    def _plan_scores(self, obs: Observation, delta: float, two_phase: bool,
                     bw_scale: float = 1.0) -> dict[float, float]:
        """Robust predicted seconds to make ``delta`` of progress for plans that start at each
        density: hold it to the goal, or hold it a while and then finish at a higher density
        (a switch up releases the lag the error-feedback residual holds back, so a cheap low
        density followed by a short run at a higher one can reach the goal sooner than either
        alone). The score of a density is that of its best plan."""
        it_s = {d: self._scenario_iteration_s(obs, d, bw_scale) for d in self.grid}
        self._coeff_cache.clear()  # the state's step and the gain ratio moved since last time
        st = self._state
        t0 = float(max(st.step, 0))
        goal = st.progress + delta
        cap = 50.0 * delta + 1000.0
        single = {d: min(self._finish(d, t0, st.q, st.lag, st.progress, goal, cap), cap)
                  for d in self.grid}
        scores = {d: self._robust([single[d] * x for x in it_s[d]]) for d in self.grid}
        if not two_phase:
            return scores
        for d1 in self.grid:
            higher = [d for d in self.grid if d > d1]
            if not higher:
                continue
            q, lag, prog = st.q, st.lag, st.progress
            n1 = 0.0
            chunks = 0
            # The first phase never runs longer than holding d1 to the goal would.
            while n1 + _CHUNK < single[d1]:
                eff, lag_star, rate = self._coeffs(d1, t0 + n1 + 0.5 * _CHUNK)
                q += _CHUNK * eff
                lag = lag_star + (lag - lag_star) * (1.0 - rate) ** _CHUNK
                prog = max(prog, q - lag)
                n1 += _CHUNK
                if prog >= goal:
                    break
                head = [n1 * x for x in it_s[d1]]
                if self._robust(head) >= scores[d1]:
                    break
                chunks += 1
                if chunks % self.switch_chunks:
                    continue  # not a candidate switch point
                mean_head = sum(head) / len(head)
                for d2 in higher:
                    # The robust score is at least the mean, so a longer finish cannot win.
                    bound = scores[d1] / (1.0 + self.two_phase_margin) - mean_head
                    room = bound / max(min(it_s[d2]), 1e-12)
                    n2 = self._finish(d2, t0 + n1, q, lag, prog, goal, min(single[d2], room))
                    if not math.isfinite(n2):
                        continue
                    score = (1.0 + self.two_phase_margin) * self._robust(
                        [h + n2 * x for h, x in zip(head, it_s[d2], strict=True)])
                    if score < scores[d1]:
                        scores[d1] = score
        return scores

    def _delta(self) -> tuple[float, bool]:
        """Progress to plan for, and whether it is the way to a real target."""
        to_target = 0.0 < self.target_progress and self._state.progress < self.target_progress
        delta = self.target_progress - self._state.progress if to_target else (
            self.horizon_progress)
        return delta, to_target

    def _plan(self, obs: Observation) -> float:
        # Two-phase plans only towards a real target: a rolling horizon would always plan the
        # finishing switch for later.
        delta, to_target = self._delta()
        scores = self._plan_scores(obs, delta, to_target and self.two_phase)
        best = min(self.grid, key=lambda d: (scores[d], -d))
        current = min(self.grid, key=lambda d: abs(math.log(d / self._held)))
        chosen = best if scores[best] < scores[current] * (1.0 - self.switch_margin) else (
            self._held
        )
        return chosen

    def _probe(self, obs: Observation, chosen: float) -> float | None:
        """The density to probe after a plan that chose ``chosen``, or ``None`` (see the
        module docstring): the best single-density plan on a ``probe_factor`` times faster
        link when it is denser than ``chosen``, else the best on a ``probe_factor`` times
        slower link when it is sparser."""
        if (
            self.probe_every == 0
            or obs.step - self._last_probe < self.probe_every
            or len(self._recent) < self.probe_every
            or max(self._recent) > 3.0 * min(self._recent)
        ):
            return None
        delta = self._delta()[0]
        for scale in (self.probe_factor, 1.0 / self.probe_factor):
            scores = self._plan_scores(obs, delta, False, scale)
            best = min(self.grid, key=lambda d: (scores[d], -d))
            if (best > chosen) if scale > 1.0 else (best < chosen):
                return best
        return None

    def decide(self, obs: Observation) -> Decision:
        """The planned density; under ``collective="auto"`` each bucket over the collective
        with the least corrected predicted time on the current estimates."""
        decision = super().decide(obs)
        if not self._auto_collective:
            return decision
        if obs.bandwidth_Bps is None or not obs.bandwidth_Bps > 0:
            choice = self._minimax_choice(obs, self.density)
        else:
            choice = self._comm_s(obs, self.density, obs.latency_s or 0.0, obs.bandwidth_Bps)[0]
        sizes = [float(b) for b in (obs.bucket_bytes or (obs.grad_bytes,))]
        colls = tuple(choice[m] for m in sizes)
        largest = max(range(len(sizes)), key=lambda k: sizes[k])
        per_bucket = colls if len(set(colls)) > 1 else ()
        self._last = Decision(decision.compressor, decision.density, colls[largest], per_bucket)
        return self._last

    def _next_density(self, obs: Observation, current: bool) -> float:
        self._track(obs)
        if obs.decision is not None:
            self._recent.append(obs.decision.density)
        if self._probing:
            self._probing = False
            return self._held
        if len(self._bw) == 0 or iteration_time_s(obs) is None:
            return self._held
        self._since_plan += 1
        link = (math.log(max(obs.latency_s or 0.0, _LATENCY_FLOOR_S)),
                math.log(max(obs.bandwidth_Bps or 0.0, _BANDWIDTH_FLOOR_BPS)))
        moved = max(abs(a - b) for a, b in zip(link, self._planned_on, strict=True))
        self._moved_run = self._moved_run + 1 if moved >= math.log1p(self.replan_change) else 0
        # Persistence only at the least density: its payload's byte term is the hardest to see
        # under timing noise, and holding it is the cheapest mistake; above it, a slower link
        # costs every step it is not reacted to.
        persist = self.replan_persist if self._held <= self.grid[-1] else 1
        regime = self._bw.regime_start()
        if (
            self._planned
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
        probe = self._probe(obs, self._held)
        if probe is not None:
            self._probing = True
            self._last_probe = obs.step
            return probe
        return self._held
