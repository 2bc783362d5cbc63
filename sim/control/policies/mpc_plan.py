"""Plan scoring of :mod:`sim.control.policies.mpc`: iterations to a progress goal under the
convergence model (run chunk by chunk from the controller's model state), seconds per iteration
under each forecast scenario, and the robust score of single- and two-phase density plans.
A mixin: it shares the controller's state.
"""

from __future__ import annotations

import math

from sim.convergence.progress import efficiency

from ..progress import ProgressState, UsesProgressModel
from ..types import Observation
from .mpc_forecast import LinkForecast
from .mpc_price_grid import MpcGridPricing
from .mpc_search import NonPositiveGain, PlanRows, plan_scores, single_floors, single_scores

#: A ``(latency, bandwidth)`` pair (or factors on one).
Link = tuple[float, float]

__all__ = ["MpcPlanning"]

#: Iterations per chunk of the progress prediction.
_CHUNK = 8
_HALF_CHUNK = 0.5 * _CHUNK
#: Entries of the coefficient cache kept from one plan to the next (at most).
_COEFF_CACHE_MAX = 100_000
#: Chunks a coefficient row grows by beyond the one a search asks for.
_AHEAD = 2
#: Relative slack of the pruning bound of :meth:`MpcPlanning._plan_scores`.
_PRUNE_SLACK = 1.0 + 1e-9
#: A latency estimate this many times its window's median is a jump the planner also reads as
#: bytes (``byte_reading``).
_JUMP = 2.0
#: Cached per (density, mid-step): efficiency, equilibrium lag, relaxation rate and
#: ``(1 - rate) ** _CHUNK``.
_Coeffs = tuple[float, float, float, float]


class MpcPlanning(MpcGridPricing, UsesProgressModel):
    """Robust predicted seconds to a progress goal for the plans of a density grid."""

    grid: tuple[float, ...]
    window_steps: int
    risk: float
    spread: float
    two_phase_margin: float
    switch_chunks: int
    _state: ProgressState
    _gain_ratio: float
    _coeff_cache: dict[tuple[float, float], _Coeffs]
    _coeff_ratio: float
    _raw_gain: dict[tuple[float, float], float]
    _raw_model: object
    _rows: dict[float, list[_Coeffs]]
    _row_t0: float
    _by_gain: dict[float, tuple[float, float, float]]
    _lat: LinkForecast
    _bw: LinkForecast
    _bytes_link: tuple[float, float] | None
    byte_reading: bool
    byte_reading_sd: float
    target_progress: float
    horizon_progress: float
    #: The scenarios the last plan at the forecast's own bandwidth priced, and for which
    #: observation (:meth:`_forecast_band` reads them).
    _planned_links: tuple[Observation, list[tuple[float, float]]] | None = None

    def _row(self, density: float, chunks: int, ahead: int = 0) -> list[_Coeffs]:
        """This plan's coefficients of ``density`` for its first ``chunks`` chunks at least
        (chunk ``j`` centred on step ``t0 + 8 j + 4``), extended as a search needs them, and up
        to ``ahead`` chunks more while their gain is positive (a search that needs one more
        chunk usually needs several)."""
        row = self._rows.get(density)
        if row is None:
            row = self._rows[density] = []
        if len(row) >= chunks:
            return row
        # :meth:`_coeffs` written out for a run of chunks (the same operations in the same
        # order): a real run's plan computes a few hundred of them.
        t0 = self._row_t0
        cache = self._coeff_cache
        raw_gain = self._raw_gain
        pm = self.progress_model
        lam, inv_phase = pm.lam, pm.inv_phase
        # The gain-only terms (efficiency, rate, a chunk's relaxation) of each gain seen in
        # this plan: chunks whose model gain is the same (one sampled step of the gain curve,
        # or a gain capped at 1) share them.
        by_gain = self._by_gain
        ratio = self._gain_ratio
        dense = density >= 1.0
        for j in range(len(row), chunks + ahead):
            mid = t0 + _CHUNK * j + _HALF_CHUNK
            key = (density, mid)
            hit = cache.get(key)
            if hit is None:
                if dense:
                    g = 1.0
                else:
                    raw = raw_gain.get(key)
                    if raw is None:
                        raw = pm.gain(self.compressor, density, mid)
                        raw_gain[key] = raw
                    g = min(1.0, raw * ratio)
                    if j >= chunks and not g > 0.0:
                        break  # not needed yet: a needed one raises as the recursion would
                terms = by_gain.get(g)
                if terms is None:
                    terms = self._gain_terms(g)
                    by_gain[g] = terms
                eff, rate, keep = terms
                hit = (eff, lam * (1.0 / g - 1.0) / (1.0 + mid * inv_phase), rate, keep)
                cache[key] = hit
            row.append(hit)
        return row

    def _gain_terms(self, g: float) -> tuple[float, float, float]:
        """``(efficiency, relaxation rate, (1 - rate) ** _CHUNK)`` of gain ``g``."""
        pm = self.progress_model
        rate = min(1.0, pm.mu * g)
        return efficiency(g, pm.alpha, pm.model.params.knee), rate, (1.0 - rate) ** _CHUNK

    def _start_rows(self, t0: float) -> None:
        """Begin a plan from step ``t0``: coefficient rows are per plan (lists indexed by
        chunk), the caches behind them are kept while the gain ratio holds."""
        if self._coeff_ratio != self._gain_ratio or len(self._coeff_cache) > _COEFF_CACHE_MAX:
            self._coeff_cache.clear()
            self._coeff_ratio = self._gain_ratio
        if len(self._raw_gain) > _COEFF_CACHE_MAX or self._raw_model is not self.progress_model:
            self._raw_gain.clear()
            self._coeff_cache.clear()
            self._raw_model = self.progress_model
        self._rows = {}
        self._by_gain = {}
        self._row_t0 = t0

    def _finish(self, density: float, j0: int, q: float, lag: float, prog: float,
                goal: float, cap: float) -> float:
        """Iterations at ``density`` from chunk ``j0`` of the plan (step ``t0 + 8 j0``) and
        model state ``(q, lag, prog)`` until progress reaches ``goal`` (``inf`` beyond
        ``cap``): the convergence model's recursion in chunks of :data:`_CHUNK` iterations
        (gain and equilibrium lag of each chunk taken at its middle, the lag relaxing
        geometrically within it), whole iterations counted.

        This runs hundreds of times per plan (on a real run's critical path): the plan's
        coefficient rows carry a chunk's relaxation, and the arithmetic is written out in the
        order of the plain recursion, so the result is the same to the bit."""
        if prog >= goal:
            return 0.0
        row = self._rows.get(density)
        if row is None:
            row = self._row(density, 0)
        j = j0
        n = 0.0
        while n < cap:
            if j >= len(row):
                row = self._row(density, j + 1, _AHEAD)
            eff, lag_star, rate, keep = row[j]
            q_end = q + _CHUNK * eff
            lag_end = lag_star + (lag - lag_star) * keep
            if q_end - lag_end >= goal:
                # Whole iterations: even a sliver of progress costs a full one.
                k = 1
                while k < _CHUNK and (
                    q + k * eff - (lag_star + (lag - lag_star) * (1.0 - rate) ** k) < goal
                ):
                    k += 1
                return n + k
            q, lag = q_end, lag_end
            if q - lag > prog:
                prog = q - lag
            if prog >= goal:
                return n + _CHUNK
            n += _CHUNK
            j += 1
        return math.inf

    def _steps(self, density: float, delta: float) -> float:
        """Iterations at ``density`` until progress grows by ``delta`` from the current model
        state (``50 delta + 1000`` if never)."""
        st = self._state
        cap = 50.0 * delta + 1000.0
        self._start_rows(float(max(st.step, 0)))
        n = self._finish(density, 0, st.q, st.lag, st.progress, st.progress + delta, cap)
        return min(n, cap)

    def _scenario_links(self, bw_scale: float = 1.0) -> list[tuple[float, float]]:
        """The forecast scenarios' ``(latency, bandwidth)``: the spread's pessimistic, central
        and optimistic cases (the trend extrapolated to the next re-plan, the level held beyond
        it) and the link back at the window's median (a spike passing). ``bw_scale``
        multiplies every bandwidth (a probe's what-if)."""
        ahead = float(self.window_steps)
        out = [(self._lat.at(ahead, -z), self._bw.at(ahead, z) * bw_scale)
               for z in (-self.spread, 0.0, self.spread)]
        if len(self._bw):
            out.append((self._lat.median(), self._bw.median() * bw_scale))
        if self._bytes_link is not None:
            # Every scenario also read as bytes: the latency back at the window's median, the
            # bandwidth as much slower as the latest measurement read so makes it.
            lat_k, bw_k = self._bytes_link
            out = [(lat * lat_k, bw * bw_k) for lat, bw in out]
        return out

    def _init_byte_reading(self, byte_reading: bool, byte_reading_sd: float,
                           byte_hedge_sd: float) -> None:
        """Keep the byte reading's options (checked; docs/controllers.md)."""
        for key, sd in (("byte_reading_sd", byte_reading_sd), ("byte_hedge_sd", byte_hedge_sd)):
            if not sd >= 0.0:
                raise ValueError(f"{key} must be >= 0 (0: off), got {sd!r}")
        #: A guessed split's latency jump also read as bytes.
        self.byte_reading = byte_reading
        #: ... and one on a window that does not pin the bandwidth (log sd above this; 0: off).
        self.byte_reading_sd = float(byte_reading_sd)
        #: The collective hedge also prices the byte reading: of a guessed split's jump, and
        #: of one on a window whose bandwidth log sd is above this (0: off).
        self.byte_hedge_sd = float(byte_hedge_sd)

    def _read_as_bytes(self, obs: Observation) -> tuple[Link | None, Link | None]:
        """``obs``'s measured communication read with the latency at the forecast window's
        median and the rest booked as bytes, as factors on the estimate's ``(latency, bandwidth)``
        (both below 1), when the latency
        estimate stands more than :data:`_JUMP` times above that median and this reading is
        slower on bytes than the estimate (None otherwise). On a split the measurements do
        not resolve (the byte term a few percent of each collective), a slowdown the monitor
        books as latency may be the bandwidth's; the planner prices both readings. Returns
        the reading for the planner (``byte_reading_sd``) and for the collective hedge
        (``byte_hedge_sd``): each None where its option does not take it."""
        d = obs.decision
        lat, bw = obs.latency_s, obs.bandwidth_Bps
        measured = obs.extra.get("link_comm_s", obs.comm_s)
        if d is None or lat is None or bw is None or measured is None or not measured > 0.0:
            return None, None
        guessed = obs.extra.get("split_guessed", 0.0) == 1.0
        sd = obs.extra.get("bandwidth_log_sd", 0.0)
        plan = guessed or 0.0 < self.byte_reading_sd < sd
        hedge = self.byte_hedge_sd > 0.0 and (guessed or self.byte_hedge_sd < sd)
        if not (plan or hedge):
            return None, None  # a split the monitor's window resolves: the jump is the latency's
        base = self._lat.window_median()
        if not lat > _JUMP * base:
            return None, None
        n_alpha = n_bytes = 0.0
        for i, m in enumerate(obs.bucket_bytes or (obs.grad_bytes,)):
            coll = d.collective_for(i)
            terms = self._comm_terms(coll, obs, float(m), d.density, d.compressor)
            corr = math.exp(self._correction(coll))
            n_alpha += terms.n_alpha * corr
            n_bytes += terms.n_bytes * corr
        rest = measured - n_alpha * base
        if not (rest > 0.0 and n_bytes > 0.0):
            return None, None
        slow = n_bytes / rest
        if not slow < bw:
            return None, None
        reading = (base / lat, slow / bw)
        return (reading if plan else None), (reading if hedge else None)

    def _delta(self) -> tuple[float, bool]:
        """Progress to plan for, and whether it is the way to a real target."""
        to_target = 0.0 < self.target_progress and self._state.progress < self.target_progress
        delta = self.target_progress - self._state.progress if to_target else (
            self.horizon_progress)
        return delta, to_target

    def _robust(self, times: list[float]) -> float:
        """Mean over the scenarios plus ``risk`` times their half-range."""
        return sum(times) / len(times) + self.risk * (max(times) - min(times)) / 2.0

    def _plan_scores(self, obs: Observation, delta: float, two_phase: bool,
                     bw_scale: float = 1.0, exact: float | None = None) -> dict[float, float]:
        """:meth:`_plan_scores_reference`'s scores, to the bit, computed by
        :func:`.mpc_search.plan_scores` (the same search with the per-call overhead taken
        out: a plan runs on a real run's critical path)."""
        links = self._scenario_links(bw_scale)
        if bw_scale == 1.0:
            self._planned_links = (obs, links)
        grid = self.grid
        it_s = self._iteration_s_grid(obs, links)
        st = self._state
        try:
            # Rows for the progress to make at full efficiency, and a few chunks more (a
            # search that needs more grows them).
            rows = PlanRows(self.progress_model, self.compressor, grid,
                            float(max(st.step, 0)), self._gain_ratio,
                            min(int(delta / _CHUNK) + 6, 1000))
            out = plan_scores(rows, grid, it_s, st, delta, two_phase,
                              None if exact is None else grid.index(exact), self.risk,
                              self.two_phase_margin, self.switch_chunks)
        except NonPositiveGain:
            return self._plan_scores_reference(obs, delta, two_phase, bw_scale, exact)
        return dict(zip(grid, out, strict=True))

    def _plan_scores_reference(self, obs: Observation, delta: float, two_phase: bool,
                               bw_scale: float = 1.0, exact: float | None = None
                               ) -> dict[float, float]:
        """Robust predicted seconds to make ``delta`` of progress for plans that start at each
        density: hold it to the goal, or hold it a while and then finish at a higher density
        (a switch up releases the lag the error-feedback residual holds back, so a cheap low
        density followed by a short run at a higher one can reach the goal sooner than either
        alone). The score of a density is that of its best plan.

        With ``exact`` (a grid density) only the least score (and which density has it) and
        ``exact``'s score are computed exactly, the others only as far as shows they are not
        the least: densities are searched in order of their single-phase score, and a
        two-phase plan whose first phase alone (its mean over the scenarios, a lower bound of
        its score) already exceeds the least score found so far is not finished; without
        two-phase plans, a density whose floor (:func:`.mpc_search.single_floors`) exceeds the
        least score found is not finished either, its floor stands for its score. What a plan
        picks is the same, at a fraction of the cost (the plan runs on a real run's critical
        path)."""
        links = self._scenario_links(bw_scale)
        it_s = {d: self._iteration_s_on(obs, d, links) for d in self.grid}
        # The coefficients depend on (density, mid-step) and the gain ratio alone: kept from
        # plan to plan while the ratio holds (in the simulator, where the measured gain is the
        # model's, for the whole run), within a bound on the cache's size; the plan reads them
        # from rows indexed by chunk.
        st = self._state
        t0 = float(max(st.step, 0))
        self._start_rows(t0)
        goal = st.progress + delta
        cap = 50.0 * delta + 1000.0
        floors = None if two_phase or exact is None else single_floors(
            self.progress_model, self.progress_model.gain_matrix(self.compressor, self.grid),
            self.grid, self._gain_ratio, st, delta, [it_s[d] for d in self.grid], self.risk)
        if floors is not None and exact is not None:
            # Single-density plans with ``exact``: one whose floor (a lower bound of its score)
            # exceeds the least score found is not finished (:func:`.mpc_search.single_scores`).
            def held_to_goal(i: int) -> float:
                n = min(self._finish(self.grid[i], 0, st.q, st.lag, st.progress, goal, cap), cap)
                return self._robust([n * x for x in it_s[self.grid[i]]])

            return dict(zip(self.grid, single_scores(floors, self.grid.index(exact), held_to_goal),
                            strict=True))
        single = {d: min(self._finish(d, 0, st.q, st.lag, st.progress, goal, cap), cap)
                  for d in self.grid}
        scores = {d: self._robust([single[d] * x for x in it_s[d]]) for d in self.grid}
        if not two_phase:
            return scores
        margin = 1.0 + self.two_phase_margin
        # The fastest scenario's seconds per iteration of each density (bounds a finish).
        fastest = {d: max(min(it_s[d]), 1e-12) for d in self.grid}
        robust = self._robust
        finish = self._finish
        prune = exact is not None
        # A hair above the least score: float rounding cannot make a pruned plan the least.
        tau = min(scores.values()) * _PRUNE_SLACK
        for d1 in sorted(self.grid, key=lambda d: (scores[d], -d)) if prune else self.grid:
            higher = [d for d in self.grid if d > d1]
            if not higher:
                continue
            cut = prune and d1 != exact
            q, lag, prog = st.q, st.lag, st.progress
            n1 = 0.0
            chunks = 0
            head_s = it_s[d1]
            row = self._row(d1, 0)
            # The first phase never runs longer than holding d1 to the goal would.
            while n1 + _CHUNK < single[d1]:
                if chunks >= len(row):
                    row = self._row(d1, chunks + 1, _AHEAD)
                eff, lag_star, _, keep = row[chunks]
                q += _CHUNK * eff
                lag = lag_star + (lag - lag_star) * keep
                prog = max(prog, q - lag)
                n1 += _CHUNK
                if prog >= goal:
                    break
                head = [n1 * x for x in head_s]
                if robust(head) >= scores[d1]:
                    break
                chunks += 1
                if chunks % self.switch_chunks:
                    continue  # not a candidate switch point
                mean_head = sum(head) / len(head)
                if cut and margin * mean_head > tau:
                    break  # every later switch point scores more than the least score
                for d2 in higher:
                    # The robust score is at least the mean, so a longer finish cannot win.
                    bound = scores[d1] / margin - mean_head
                    room = bound / fastest[d2]
                    if cut:
                        room = min(room, (tau / margin - mean_head) / fastest[d2])
                    n2 = finish(d2, chunks, q, lag, prog, goal, min(single[d2], room))
                    if n2 == math.inf:
                        continue
                    score = margin * robust(
                        [h + n2 * x for h, x in zip(head, it_s[d2], strict=True)])
                    if score < scores[d1]:
                        scores[d1] = score
            if prune:
                tau = min(tau, scores[d1] * _PRUNE_SLACK)
        return scores
