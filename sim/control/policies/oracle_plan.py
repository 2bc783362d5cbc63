"""The oracle's planner: least time-to-target over piecewise-constant density schedules.

A schedule gives each window of wall time (``bounds[w] <= start < bounds[w + 1]``) one density of
the grid; each iteration runs that density over the collective with the least true iteration time
at its start. :meth:`Planner.run` replays a schedule through the true iteration times and the
convergence model's recursion (:class:`~sim.control.progress.ProgressModel`, the recursion that
scores runs) until progress reaches the target, and returns the end time of that iteration.

:meth:`Planner.search` starts from the best fixed density, cuts the horizon (that density's time to
target) into at most ``windows`` windows at the trace's change points (the change points nearest
to an even grid when there are more), then makes ``passes`` passes over the windows: for each
window it tries every density for that window alone and for that window and all later ones, and
keeps the fastest. Every candidate is replayed from the state saved at its window's start, so a
pass costs about ``windows x densities`` partial replays. Last, it tries a finishing switch: from
some iteration on, another density to the target (:meth:`Planner._finish`), and where one helps,
a second one on top of it (three-phase schedules). The result is never slower than the best
fixed density of the grid (the starting point is one of the candidates).

When the context can say which constant link state holds at a time (``segment_s``), an iteration
that starts and ends inside one state reuses the duration computed for that state and decision.
The context answers only where that duration is the same to the bit wherever in the state the
iteration starts (:class:`sim.engine.OracleContext`), so the reuse changes no plan: the same
schedule and time to target as simulating every candidate iteration (tests check it at every
fidelity), at a fraction of the cost where iterations are short against the states.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..progress import ProgressModel
from ..types import Decision

__all__ = ["Planner"]

_Snapshot = tuple[int, float, float, float, float]  # iterations, clock, q, lag, progress


class Planner:
    """Replays and searches density schedules for one run.

    Args:
        ctx: the oracle context (``iteration_time_s``; optionally ``segment_s`` and
            ``change_points_s``).
        model: the convergence model that scores the run.
        options: per density of the grid, its decisions (one per usable collective).
        target: progress to reach (dense-iteration equivalents).
        start_s: the clock at the first iteration.
        max_iterations: replays stop (never reaching the target) after this many iterations;
            default ``20 * target + 2000``.
        per_bucket: optional ``(decision, t) -> decision or None``: the per-bucket choice of
            ``decision``'s density at time ``t`` (see :meth:`decisions`).
        initial: the state replays start from, ``(iterations, clock, q, lag, progress)``;
            default the run's start, ``(0, start_s, 0, 0, 0)`` (a planner that re-plans during
            the run passes the state reached so far).
    """

    def __init__(
        self,
        ctx: Any,
        model: ProgressModel,
        options: list[list[Decision]],
        target: float,
        start_s: float,
        max_iterations: int | None = None,
        per_bucket: Callable[[Decision, float], Decision | None] | None = None,
        initial: _Snapshot | None = None,
    ) -> None:
        self.ctx = ctx
        self.per_bucket = per_bucket
        self.model = model
        self.options = options
        self.target = float(target)
        self.start_s = float(start_s)
        self.max_iterations = (
            int(20 * target) + 2000 if max_iterations is None else int(max_iterations)
        )
        self.initial: _Snapshot = (
            (0, self.start_s, 0.0, 0.0, 0.0) if initial is None else initial
        )
        self._segment = getattr(ctx, "segment_s", None)
        self._cache: dict[tuple[int, float], float] = {}
        self.bounds: list[float] = [self.start_s]
        self.replays = 0
        #: Candidate iterations simulated, and those that reused a price of their state.
        self.priced = 0
        self.reused = 0

    def decisions(self, i: int, t: float) -> list[Decision]:
        """Density ``i``'s candidate decisions at time ``t``: one per usable collective, plus
        the per-bucket choice (each bucket over its cheapest collective on the true link at
        ``t``) when the buckets would not all take the same one."""
        if self.per_bucket is None:
            return self.options[i]
        extra = self.per_bucket(self.options[i][0], t)
        return self.options[i] if extra is None else [*self.options[i], extra]

    def _time(self, i: int, t: float) -> float:
        """Least true iteration time among density ``i``'s collectives, starting at ``t``."""
        seg = self._segment(t) if self._segment is not None else None
        if seg is not None:
            dur = self._cache.get((i, seg[0]))
            if dur is not None and t + dur <= seg[1]:
                self.reused += 1
                return dur
        self.priced += 1
        dur = min(float(self.ctx.iteration_time_s(d, t)) for d in self.decisions(i, t))
        if seg is not None and t + dur <= seg[1]:
            self._cache[(i, seg[0])] = dur
        return dur

    def run(
        self, choice: list[int], w0: int = 0, snap: _Snapshot | None = None,
        record: list[tuple[_Snapshot, int]] | None = None,
    ) -> tuple[float, list[_Snapshot | None]]:
        """Replay ``choice`` (a density index per window) from window ``w0``'s saved state.

        Returns the end time of the iteration reaching the target (``inf`` if none within
        ``max_iterations``) and the state at the start of each window entered. ``record``, when
        given, receives the state at the start of every iteration and its density index.
        """
        self.replays += 1
        bounds, nb = self.bounds, len(self.bounds)
        k, t, q, lag, p = snap if snap is not None else self.initial
        w = w0 if snap is not None else 0
        snaps: list[_Snapshot | None] = [None] * nb
        snaps[w] = (k, t, q, lag, p)
        next_b = bounds[w + 1] if w + 1 < nb else math.inf
        pm = self.model
        mu, lam, alpha = pm.mu, pm.lam, pm.alpha
        inv_ph, inv_k = pm.inv_phase, pm.inv_knee
        target = self.target
        # Per density index, its gain at every step (ProgressModel.gain's floats, read once).
        gains: dict[int, list[float]] = {}
        while p < target:
            while t >= next_b:
                w += 1
                snaps[w] = (k, t, q, lag, p)
                next_b = bounds[w + 1] if w + 1 < nb else math.inf
            if k >= self.max_iterations:
                return math.inf, snaps
            i = choice[w]
            if record is not None:
                record.append(((k, t, q, lag, p), i))
            dur = self._time(i, t)
            k += 1
            g_i = gains.get(i)
            if g_i is None or k >= len(g_i):
                d0 = self.options[i][0]
                g_i = gains[i] = pm.gains_by_step(d0.compressor, d0.density, 2 * k)
            g = g_i[k]
            s = 1.0 / g - 1.0
            lag += min(1.0, mu * g) * (lam * s / (1.0 + k * inv_ph) - lag)
            q += g**alpha / (1.0 + s * inv_k)
            if q - lag > p:
                p = q - lag
            t += dur
        return t, snaps

    def _windows(self, horizon_s: float, windows: int) -> list[float]:
        start = self.start_s
        points_fn = getattr(self.ctx, "change_points_s", None)
        points = (
            [float(x) for x in points_fn(start, start + horizon_s)] if callable(points_fn) else []
        )
        points = sorted(x for x in set(points) if start < x < start + horizon_s)
        if len(points) <= windows - 1:
            if windows == 1:
                return [start]
            # Few change points (none on a constant link): the even grid fills the remaining
            # windows, so a schedule can also switch inside a long constant stretch (follow the
            # gradient statistics, or run denser just before a link falls).
            grid = [start + horizon_s * j / windows for j in range(1, windows)]
            spare = windows - 1 - len(points)
            if spare > 0:
                # The grid points farthest from any change point first.
                grid.sort(key=lambda g: (-min((abs(g - x) for x in points), default=math.inf),
                                         g))
                points = sorted([*points, *grid[:spare]])
            return [start, *points]
        picked = set()
        for j in range(1, windows):
            goal = start + horizon_s * j / windows
            picked.add(min(points, key=lambda x: abs(x - goal)))
        return [start, *sorted(picked)]

    def search(self, windows: int, passes: int) -> tuple[list[float], list[int]]:
        """The best schedule found: ``(window starts, density index per window)``."""
        self.bounds = [self.start_s]
        fixed = [self.run([i])[0] for i in range(len(self.options))]
        best_i = min(range(len(fixed)), key=lambda i: (fixed[i], i))
        if not math.isfinite(fixed[best_i]) or windows <= 1:
            return self.bounds, [best_i]
        self.bounds = self._windows(fixed[best_i] - self.start_s, windows)
        nw = len(self.bounds)
        choice = [best_i] * nw
        choice, tta = self._passes(choice, passes)
        bounds, choice = self._finish(choice, tta)
        if bounds == self.bounds:
            return bounds, choice
        # Around the finishing switch: the windows again (the switch is now a window boundary,
        # so a window before it can change with it in place), then a second finishing switch on
        # top (three-phase schedules: hold a low density, run a middle one, finish higher -- or
        # lower, where the link falls late).
        self.bounds = bounds
        choice, tta = self._passes(choice, passes)
        return self._finish(choice, tta, fixed_bases=False)

    def search_two_phase(self, every_base: bool = True) -> tuple[list[float], list[int]]:
        """The best schedule of at most two phases from :attr:`initial`: the best fixed
        density, then the best finishing switch to another density (on every fixed density
        as the first phase with ``every_base``, else on the best one); the plans ``mpc``
        searches, for a planner that re-plans as it goes (:mod:`.oracle_myopic`)."""
        self.bounds = [self.start_s]
        fixed = [self.run([i])[0] for i in range(len(self.options))]
        best_i = min(range(len(fixed)), key=lambda i: (fixed[i], i))
        if not math.isfinite(fixed[best_i]):
            return self.bounds, [best_i]
        return self._finish([best_i], fixed[best_i], fixed_bases=every_base)

    def _passes(self, choice: list[int], passes: int) -> tuple[list[int], float]:
        """Up to ``passes`` passes over the windows of ``self.bounds``, each window (alone, and
        with every later one) set to every density in turn, the fastest kept."""
        nw = len(self.bounds)
        tta, snaps = self.run(choice)
        for _ in range(passes):
            improved = False
            for w in range(nw):
                snap = snaps[w]
                if snap is None:
                    break  # the target is reached before this window
                best_c: list[int] | None = None
                best_t = tta
                for i in range(len(self.options)):
                    single = choice[:w] + [i] + choice[w + 1:]
                    suffix = choice[:w] + [i] * (nw - w)
                    for cand in (single, suffix) if single != suffix else (single,):
                        if cand == choice:
                            continue
                        t_c = self.run(cand, w, snap)[0]
                        if t_c < best_t * (1.0 - 1e-12):
                            best_c, best_t = cand, t_c
                if best_c is not None:
                    choice = best_c
                    tta, snaps = self.run(choice)
                    improved = True
            if not improved:
                break
        return choice, tta

    def _tail_time(self, i: int, snap: _Snapshot, limit: float) -> float:
        """End time of the iteration reaching the target when density ``i`` runs from state
        ``snap`` on; ``inf`` once the clock passes ``limit`` first."""
        self.replays += 1
        k, t, q, lag, p = snap
        pm = self.model
        mu, lam, alpha = pm.mu, pm.lam, pm.alpha
        inv_ph, inv_k = pm.inv_phase, pm.inv_knee
        d0 = self.options[i][0]
        gains = pm.gains_by_step(d0.compressor, d0.density, 2 * k + 1)
        while p < self.target:
            if t >= limit or k >= self.max_iterations:
                return math.inf
            dur = self._time(i, t)
            k += 1
            if k >= len(gains):
                gains = pm.gains_by_step(d0.compressor, d0.density, 2 * k)
            g = gains[k]
            s = 1.0 / g - 1.0
            lag += min(1.0, mu * g) * (lam * s / (1.0 + k * inv_ph) - lag)
            q += g**alpha / (1.0 + s * inv_k)
            if q - lag > p:
                p = q - lag
            t += dur
        return t

    def _finish(self, choice: list[int], tta: float, fixed_bases: bool = True
                ) -> tuple[list[float], list[int]]:
        """The best schedule with a finishing switch added: from some iteration on, another
        density to the target (a switch up releases the lag the low density held back; a
        switch down pays where the link falls late in the run; the windows, cut at the trace's
        change points, are too coarse to place either). Tried on the searched schedule and,
        with ``fixed_bases``, on every fixed density; switch points every ``ceil(iterations /
        100)`` iterations, then every iteration around the best; the switch becomes a window
        boundary half way between two iteration starts."""
        best_bounds, best_choice = self.bounds, choice
        if not math.isfinite(tta):
            return best_bounds, best_choice
        bases = [(self.bounds, choice)]
        if fixed_bases:
            bases += [([self.start_s], [i]) for i in range(len(self.options))]
        best: tuple[float, int, int] | None = None
        searched = self.bounds
        for bounds, base in bases:
            self.bounds = bounds
            traj: list[tuple[_Snapshot, int]] = []
            self.run(base, record=traj)
            n = len(traj)
            found: tuple[float, int, int] | None = None

            def scan(points: range, traj: list[tuple[_Snapshot, int]] = traj) -> None:
                nonlocal best, found
                for j in points:
                    snap, cur = traj[j]
                    for i2 in range(len(self.options)):
                        if i2 == cur:
                            continue
                        limit = tta if best is None else best[0]
                        t_end = self._tail_time(i2, snap, limit)
                        if t_end < limit * (1.0 - 1e-12):
                            best = found = (t_end, j, i2)

            stride = max(1, -(-n // 100))
            scan(range(n - 1, 0, -stride))
            if found is not None and stride > 1:
                j0 = found[1]
                scan(range(min(n - 1, j0 + stride - 1), max(0, j0 - stride), -1))
            if found is not None:
                _, j, i2 = found
                switch_s = 0.5 * (traj[j - 1][0][1] + traj[j][0][1])
                keep = [w for w, b in enumerate(bounds) if b < switch_s]
                best_bounds = [bounds[w] for w in keep] + [switch_s]
                best_choice = [base[w] for w in keep] + [i2]
        self.bounds = searched
        return best_bounds, best_choice
