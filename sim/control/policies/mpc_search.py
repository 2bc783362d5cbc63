"""The plan search of :mod:`sim.control.policies.mpc` written for speed: a plan runs on a real
run's critical path.

:func:`plan_scores` computes what :meth:`MpcPlanning._plan_scores_reference` computes -- the
same searches, the same pruning, the same floating-point operations in the same order, so the
same scores to the bit and the same decisions -- with the per-call overhead taken out:

* the convergence model's chunk coefficients of every grid density are built once per plan
  for a block of chunks at a time (:class:`PlanRows`: gains sampled for all densities at once,
  the gain-only terms computed once per distinct gain, the rest elementwise in numpy, whose
  float64 ``+ - * /`` round as Python's do; the powers stay Python's, whose ``pow`` rounds
  differently from numpy's on some inputs);
* the recursion, the robust score and the finish of a two-phase plan run inline on plain
  lists, without method calls or dictionary look-ups per chunk.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from itertools import repeat

import numpy as np

from sim.convergence.progress import efficiency

from ..progress import ProgressModel, ProgressState

__all__ = ["NonPositiveGain", "PlanRows", "plan_scores", "single_floors", "single_scores"]

#: Iterations per chunk of the progress prediction (as :mod:`.mpc_plan`).
_CHUNK = 8
_HALF_CHUNK = 0.5 * _CHUNK
#: Relative slack of the pruning bound (as :mod:`.mpc_plan`).
_PRUNE_SLACK = 1.0 + 1e-9
#: Relative slack (of the score) of the mean-based bound on a finish.
_MEAN_SLACK = 1e-9
#: Chunks of the first block of rows; a search that needs more doubles them.
_FIRST_BLOCK = 32


class NonPositiveGain(ValueError):
    """A chunk's model gain is not positive (the reference search raises on it when it needs
    the chunk, and skips it when it does not): the caller falls back to the reference."""


class PlanRows:
    """Per grid density the chunk coefficients of one plan (chunk ``j`` centred on step
    ``t0 + 8 j + 4``): efficiency, equilibrium lag, relaxation rate and ``(1 - rate) ** 8``,
    each a list indexed by chunk, equal to the bit to what
    :meth:`MpcPlanning._row` builds."""

    def __init__(self, pm: ProgressModel, compressor: str, grid: Sequence[float], t0: float,
                 ratio: float, first: int = _FIRST_BLOCK) -> None:
        self._pm = self.pm = pm
        self._t0 = t0
        self._ratio = self.ratio = ratio
        #: The model's gain curves of the grid (one row per density).
        self._curves = self.curves = pm.gain_matrix(compressor, grid)
        #: Rows whose gain is 1 at every step without the gain ratio (density 1).
        self._dense = np.array([d >= 1.0 for d in grid])[:, None]
        n = len(grid)
        #: Eight times the efficiency (a chunk's summed efficiency), exactly as the
        #: reference's ``_CHUNK * eff``; the efficiency is it over 8, exactly.
        self.eff8: list[list[float]] = [[] for _ in range(n)]
        self.lag_star: list[list[float]] = [[] for _ in range(n)]
        #: Relaxation rates (read only where a finish crosses its goal).
        self.rate = np.empty((n, 0))
        self.keep: list[list[float]] = [[] for _ in range(n)]
        self.built = 0
        self.grow(max(1, first))

    def grow(self, chunks: int) -> None:
        """Build the rows up to ``chunks`` chunks at least (doubling)."""
        if chunks <= self.built:
            return
        upto = max(chunks, self.built + max(8, self.built // 2))
        pm = self._pm
        mids = self._t0 + _CHUNK * np.arange(self.built, upto) + _HALF_CHUNK
        idx = pm.sample_rows(mids)
        # The sampled steps are non-decreasing along the chunks: the distinct ones and where
        # each chunk reads.
        new = np.empty(len(idx), dtype=bool)
        new[0] = True
        np.not_equal(idx[1:], idx[:-1], out=new[1:])
        inv = np.cumsum(new) - 1
        gains = np.where(self._dense, 1.0,
                         np.minimum(1.0, self._curves[:, idx[new]] * self._ratio))
        if not (gains > 0.0).all():
            raise NonPositiveGain("a chunk's gain is not positive")
        # Python's powers (the reference's ``g ** alpha`` and ``(1 - rate) ** 8``: for these
        # finite non-negative bases ``math.pow`` and ``**`` both return the C library's ``pow``).
        g_pow = np.array(list(map(math.pow, gains.ravel().tolist(), repeat(pm.alpha))))
        rate = np.minimum(1.0, pm.mu * gains)
        keep = np.array(list(map(math.pow, (1.0 - rate).ravel().tolist(), repeat(_CHUNK))))
        knee = pm.model.params.knee
        inv_k = 1.0 / knee if knee > 0 else 0.0
        eff = g_pow.reshape(gains.shape) / (1.0 + (1.0 / gains - 1.0) * inv_k)
        lag_star = pm.lam * (1.0 / gains[:, inv] - 1.0) / (1.0 + mids * pm.inv_phase)
        self.rate = np.concatenate([self.rate, rate[:, inv]], axis=1)
        for out, table in ((self.eff8, _CHUNK * eff[:, inv]), (self.lag_star, lag_star),
                           (self.keep, keep.reshape(gains.shape)[:, inv])):
            for row, values in zip(out, table.tolist(), strict=True):
                row.extend(values)
        self.built = upto


def plan_scores(rows: PlanRows, grid: Sequence[float], it_s: Sequence[list[float]],
                state: ProgressState, delta: float, two_phase: bool, exact: int | None,
                risk: float, two_phase_margin: float, switch_chunks: int) -> list[float]:
    """Robust predicted seconds per grid density (index-aligned with ``grid``; ``it_s[i]`` the
    seconds per iteration of density ``grid[i]`` on each forecast scenario); ``exact`` the
    index of the density whose score must be exact besides the least one (``None``: all).
    See :meth:`MpcPlanning._plan_scores_reference`, whose computation this is."""
    n_grid = len(grid)
    goal = state.progress + delta
    cap = 50.0 * delta + 1000.0
    eff8_rows, ls_rows, keep_rows = rows.eff8, rows.lag_star, rows.keep
    inf = math.inf

    def finish(i: int, j: int, q: float, lag: float, prog: float, limit: float) -> float:
        # MpcPlanning._finish on the rows: chunk ``j + m`` runs while ``8 m < limit``. Its
        # progress never reaches the goal without the crossing test passing (the running
        # maximum only holds values below it), so that test alone ends the walk.
        if prog >= goal:
            return 0.0
        if not limit > 0.0:
            return inf
        eff8s, lss, keeps = eff8_rows[i], ls_rows[i], keep_rows[i]
        end = j + math.ceil(limit / _CHUNK) if limit < inf else -1
        at = j
        while True:
            stop = rows.built if end < 0 else min(end, rows.built)
            for m in range(at, stop):
                lag_star = lss[m]
                q_end = q + eff8s[m]
                lag_end = lag_star + (lag - lag_star) * keeps[m]
                if q_end - lag_end >= goal:
                    return float(_CHUNK * (m - j) + crossing(
                        i, m, q, lag, lag_end, eff8s[m] / _CHUNK, lag_star))
                q = q_end
                lag = lag_end
            at = stop
            if at == end:
                return inf
            rows.grow(at + 1)

    def crossing(i: int, j: int, q: float, lag: float, lag_end: float, eff: float,
                 lag_star: float) -> int:
        # The first iteration of chunk ``j`` that reaches the goal. Within the chunk the lag
        # stays between its start and its end, so an iteration whose progress falls short
        # with the lag at the lesser of the two (and a slack for the rounding) falls short:
        # those are skipped without computing the power.
        low = lag if lag < lag_end else lag_end
        tol = _MEAN_SLACK * (abs(goal) + abs(q) + abs(lag) + 1.0)
        k = 1
        while k < _CHUNK and q + k * eff - low < goal - tol:
            k += 1
        if k < _CHUNK:
            rate = float(rows.rate[i, j])
            while k < _CHUNK and (
                q + k * eff - (lag_star + (lag - lag_star) * (1.0 - rate) ** k) < goal
            ):
                k += 1
        return k

    robust: Callable[[list[float]], float] = _robust_fn(risk)
    floors = None if two_phase or exact is None else single_floors(
        rows.pm, rows.curves, grid, rows.ratio, state, delta, it_s, risk)
    if floors is not None and exact is not None:

        def held_to_goal(i: int) -> float:
            n = min(finish(i, 0, state.q, state.lag, state.progress, cap), cap)
            return robust([n * x for x in it_s[i]])

        return single_scores(floors, exact, held_to_goal)
    single = [min(finish(i, 0, state.q, state.lag, state.progress, cap), cap)
              for i in range(n_grid)]
    scores = [robust([single[i] * x for x in it_s[i]]) for i in range(n_grid)]
    if not two_phase:
        return scores
    margin = 1.0 + two_phase_margin
    fastest = [max(min(ts), 1e-12) for ts in it_s]
    # For the shortcuts (bounds only, never a score): each density's mean and range over the
    # scenarios, and its greatest efficiency and least equilibrium lag over the rows built.
    mean_it = [sum(ts) / len(ts) for ts in it_s]
    range_it = [max(ts) - min(ts) for ts in it_s]
    known = rows.built
    eff_max = [max(r[:known]) / _CHUNK for r in eff8_rows]
    ls_min = [min(r[:known]) for r in ls_rows]
    half_risk = 0.5 * risk
    prune = exact is not None
    tau = min(scores) * _PRUNE_SLACK
    order = sorted(range(n_grid), key=lambda i: (scores[i], -grid[i])) if prune else range(
        n_grid)
    # Per density what a finish at it needs, in one tuple.
    info = [(i, fastest[i], single[i], mean_it[i], range_it[i], eff_max[i], ls_min[i], it_s[i])
            for i in range(n_grid)]
    slack = 1.0 + _MEAN_SLACK
    for i1 in order:
        d1 = grid[i1]
        higher = [info[i] for i in range(n_grid) if grid[i] > d1]
        if not higher:
            continue
        cut = prune and i1 != exact
        q, lag, prog = state.q, state.lag, state.progress
        n1 = 0.0
        chunks = 0
        head_s = it_s[i1]
        eff8s, lss, keeps = eff8_rows[i1], ls_rows[i1], keep_rows[i1]
        limit1 = single[i1]
        best = scores[i1]
        while n1 + _CHUNK < limit1:
            if chunks >= rows.built:
                rows.grow(chunks + 1)
            lag_star = lss[chunks]
            q += eff8s[chunks]
            lag = lag_star + (lag - lag_star) * keeps[chunks]
            if q - lag > prog:
                prog = q - lag
            n1 += _CHUNK
            if prog >= goal:
                break
            head = [n1 * x for x in head_s]
            if robust(head) >= best:
                break
            chunks += 1
            if chunks % switch_chunks:
                continue  # not a candidate switch point
            mean_head = sum(head) / len(head)
            if cut and margin * mean_head > tau:
                break
            range_head = max(head) - min(head)
            tol = _MEAN_SLACK * (abs(goal) + abs(q) + abs(lag) + 1.0)
            to_go = goal - q - tol
            bound = best / margin - mean_head
            over = best * slack
            tau_room = tau / margin - mean_head
            for i2, fast2, single2, mean2, range2, eff_max2, ls_min2, it2 in higher:
                room = bound / fast2
                if cut:
                    other = tau_room / fast2
                    room = min(room, other)
                limit = min(single2, room)
                # Shortcuts the reference does not take, with the same result: a finish that
                # cannot score below ``best`` does not change it, whether it runs to the end
                # or not. Its score is at least ``margin`` times the mean over the scenarios
                # plus ``risk`` times half the range the finish adds beyond the head's (the
                # slack covers the rounding): beyond ``beyond`` iterations it cannot win, nor
                # when the goal needs more iterations than it could win in (at least
                # ``need``: the efficiency at its greatest, the lag at its least).
                if mean2 > 0.0:
                    beyond = (bound + _MEAN_SLACK * best) / mean2 + _CHUNK
                    if beyond < limit:
                        limit = beyond
                if eff_max2 > 0.0 and chunks + limit / _CHUNK + 1.0 <= known:
                    need = (to_go + (lag if lag < ls_min2 else ls_min2)) / eff_max2
                    if need > 0.0:
                        spread = need * range2 - range_head
                        if margin * (mean_head + need * mean2 + (
                                half_risk * spread if spread > 0.0 else 0.0)) > over:
                            continue
                n2 = finish(i2, chunks, q, lag, prog, limit)
                if n2 == inf:
                    continue
                # The same bound with the finish's length: most finishes end here.
                spread = n2 * range2 - range_head
                if margin * (mean_head + n2 * mean2 + (
                        half_risk * spread if spread > 0.0 else 0.0)) > over:
                    continue
                # (zip without the strict keyword, whose parsing costs: both per scenario)
                score = margin * robust([h + n2 * x for h, x in zip(head, it2)])  # noqa: B905
                if score < best:
                    best = score
                    bound = best / margin - mean_head
                    over = best * slack
        scores[i1] = best
        if prune:
            tau = min(tau, best * _PRUNE_SLACK)
    return scores


def single_floors(pm: ProgressModel, curves: np.ndarray, grid: Sequence[float], ratio: float,
                  state: ProgressState, delta: float, it_s: Sequence[Sequence[float]],
                  risk: float) -> list[float] | None:
    """Per grid density a lower bound of the robust score of holding it until progress grows
    by ``delta`` from ``state`` (``curves``: the model's gain curves of the grid, ``ratio``
    the gain ratio, ``it_s`` the seconds per iteration per scenario), or ``None`` where the
    model's parameters give none.

    Every iteration adds at most the efficiency of the density's greatest gain to the summed
    efficiency (the efficiency grows with the gain for ``alpha, knee >= 0``) and the lag never
    falls below the lesser of its start and 0 (it relaxes towards equilibrium lags that are
    not negative for ``lam, 1 / phase >= 0``), so the goal takes at least ``(goal - q +
    min(lag, 0)) / efficiency`` iterations (at most the cap); the score is that many times the
    robust seconds per iteration (the robust score scales with the iterations). The bound is
    shaded by 1e-9 a factor for the rounding, so it is below the score, never above."""
    params = pm.model.params
    if not (delta > 0.0 and pm.alpha >= 0.0 and params.knee >= 0.0 and pm.lam >= 0.0
            and pm.inv_phase >= 0.0):
        return None
    cap = 50.0 * delta + 1000.0
    robust = _robust_fn(risk)
    reach = state.progress + delta - state.q + min(state.lag, 0.0)
    out = []
    for d, top, ts in zip(grid, curves.max(axis=1).tolist(), it_s, strict=True):
        g = 1.0 if d >= 1.0 else min(1.0, top * ratio)
        if not g > 0.0:
            return None
        eff = efficiency(g, pm.alpha, params.knee) * (1.0 + _FLOOR_SHADE)
        n = min(max(reach / eff, 0.0), cap)
        out.append(n * robust(list(ts)) * (1.0 - _FLOOR_SHADE) ** 2)
    return out


def single_scores(floors: list[float], exact: int, score: Callable[[int], float]
                  ) -> list[float]:
    """Scores of single-density plans pruned by ``floors`` (:func:`single_floors`): the
    densities in order of their floor, ``exact`` (an index) first, each scored by ``score``
    unless its floor exceeds the least score found so far (then the floor stands for it: its
    score is above the least, which is exact, and so is ``exact``'s)."""
    out = list(floors)
    least = math.inf
    for i in sorted(range(len(floors)), key=lambda i: (i != exact, floors[i], i)):
        if i != exact and floors[i] > least:
            continue
        out[i] = score(i)
        if out[i] < least:
            least = out[i]
    return out


#: Relative shading of :func:`single_floors`' bound (the rounding is a few units of 2 ** -53).
_FLOOR_SHADE = 1e-9


def _robust_fn(risk: float) -> Callable[[list[float]], float]:
    """:meth:`MpcPlanning._robust` with ``risk`` bound."""

    def robust(times: list[float]) -> float:
        return sum(times) / len(times) + risk * (max(times) - min(times)) / 2.0

    return robust
