"""Plan scoring of :mod:`sim.control.policies.mpc`: iterations to a progress goal under the
convergence model (run chunk by chunk from the controller's model state), seconds per iteration
under each forecast scenario, and the robust score of single- and two-phase density plans.
A mixin: it shares the controller's state.
"""

from __future__ import annotations

import math

from ..progress import ProgressState, UsesProgressModel
from ..types import Observation
from .mpc_forecast import LinkForecast
from .mpc_pricing import MpcPricing

__all__ = ["MpcPlanning"]

#: Iterations per chunk of the progress prediction.
_CHUNK = 8
_HALF_CHUNK = 0.5 * _CHUNK
#: Entries of the coefficient cache kept from one plan to the next (at most).
_COEFF_CACHE_MAX = 100_000
#: Relative slack of the pruning bound of :meth:`MpcPlanning._plan_scores`.
_PRUNE_SLACK = 1.0 + 1e-9
#: Cached per (density, mid-step): efficiency, equilibrium lag, relaxation rate and
#: ``(1 - rate) ** _CHUNK``.
_Coeffs = tuple[float, float, float, float]


class MpcPlanning(MpcPricing, UsesProgressModel):
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
    _lat: LinkForecast
    _bw: LinkForecast

    def _coeffs(self, density: float, mid: float) -> _Coeffs:
        """``(efficiency, equilibrium lag, relaxation rate, (1 - rate) ** _CHUNK)`` of
        ``density`` around step ``mid``: the workload model's gain there, scaled by the
        measured-over-model ratio (the power is a whole chunk's lag relaxation)."""
        key = (density, mid)
        hit = self._coeff_cache.get(key)
        if hit is None:
            pm = self.progress_model
            if density >= 1.0:
                g = 1.0
            else:
                g = min(1.0, pm.gain(self.compressor, density, mid) * self._gain_ratio)
            lag_star = pm.lam * (1.0 / g - 1.0) / (1.0 + mid * pm.inv_phase)
            rate = min(1.0, pm.mu * g)
            hit = (pm.efficiency(g), lag_star, rate, (1.0 - rate) ** _CHUNK)
            self._coeff_cache[key] = hit
        return hit

    def _finish(self, density: float, t: float, q: float, lag: float, prog: float,
                goal: float, cap: float) -> float:
        """Iterations at ``density`` from model state ``(t, q, lag, prog)`` until progress
        reaches ``goal`` (``inf`` beyond ``cap``): the convergence model's recursion in chunks
        of :data:`_CHUNK` iterations (gain and equilibrium lag of each chunk taken at its
        middle, the lag relaxing geometrically within it), whole iterations counted.

        This runs hundreds of times per plan (on a real run's critical path): the cached
        coefficients carry a chunk's relaxation, and the arithmetic is written out in the
        order of the plain recursion, so the result is the same to the bit."""
        if prog >= goal:
            return 0.0
        cache = self._coeff_cache
        n = 0.0
        while n < cap:
            mid = t + n + _HALF_CHUNK
            hit = cache.get((density, mid))
            if hit is None:
                hit = self._coeffs(density, mid)
            eff, lag_star, rate, keep = hit
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
                     bw_scale: float = 1.0, exact: float | None = None) -> dict[float, float]:
        """Robust predicted seconds to make ``delta`` of progress for plans that start at each
        density: hold it to the goal, or hold it a while and then finish at a higher density
        (a switch up releases the lag the error-feedback residual holds back, so a cheap low
        density followed by a short run at a higher one can reach the goal sooner than either
        alone). The score of a density is that of its best plan.

        With ``exact`` (a grid density) only the least score (and which density has it) and
        ``exact``'s score are computed exactly, the others only as far as shows they are not
        the least: densities are searched in order of their single-phase score, and a
        two-phase plan whose first phase alone (its mean over the scenarios, a lower bound of
        its score) already exceeds the least score found so far is not finished. What a plan
        picks is the same, at a fraction of the cost (the plan runs on a real run's critical
        path)."""
        it_s = {d: self._scenario_iteration_s(obs, d, bw_scale) for d in self.grid}
        # The coefficients depend on (density, mid-step) and the gain ratio alone: kept from
        # plan to plan while the ratio holds (in the simulator, where the measured gain is the
        # model's, for the whole run), within a bound on the cache's size.
        if self._coeff_ratio != self._gain_ratio or len(self._coeff_cache) > _COEFF_CACHE_MAX:
            self._coeff_cache.clear()
            self._coeff_ratio = self._gain_ratio
        st = self._state
        t0 = float(max(st.step, 0))
        goal = st.progress + delta
        cap = 50.0 * delta + 1000.0
        single = {d: min(self._finish(d, t0, st.q, st.lag, st.progress, goal, cap), cap)
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
            # The first phase never runs longer than holding d1 to the goal would.
            while n1 + _CHUNK < single[d1]:
                eff, lag_star, _, keep = self._coeffs(d1, t0 + n1 + _HALF_CHUNK)
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
                t1 = t0 + n1
                for d2 in higher:
                    # The robust score is at least the mean, so a longer finish cannot win.
                    bound = scores[d1] / margin - mean_head
                    room = bound / fastest[d2]
                    if cut:
                        room = min(room, (tau / margin - mean_head) / fastest[d2])
                    n2 = finish(d2, t1, q, lag, prog, goal, min(single[d2], room))
                    if n2 == math.inf:
                        continue
                    score = margin * robust(
                        [h + n2 * x for h, x in zip(head, it_s[d2], strict=True)])
                    if score < scores[d1]:
                        scores[d1] = score
            if prune:
                tau = min(tau, scores[d1] * _PRUNE_SLACK)
        return scores
