"""Link forecasts of :mod:`sim.control.policies.mpc`: level, trend and spread of a monitor
signal in log space, cut at the last level shift, and the iterations a constant gain needs for
a given progress (kept for callers and tests; the planner runs the model chunk by chunk)."""

from __future__ import annotations

import math
from collections import deque

__all__ = ["LatencyDiffusion", "LinkForecast", "steps_to_progress"]


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


class LatencyDiffusion:
    """How fast a latency estimate has moved: the rate of its quadratic variation (seconds
    squared of latency per second of run) over the last ``history`` observations.

    For a latency that random-walks (additively, as the generators' walk and real queueing
    delay do), the move over the next ``h`` seconds has a spread of ``sqrt(rate * h)``: what
    the history shows the latency could reach within one iteration, even while the latest
    estimates sit still (at a floor, say). A level that holds yields a rate of zero.
    """

    def __init__(self, history: int) -> None:
        #: ``(squared move, seconds)`` between consecutive estimates, newest last.
        self._steps: deque[tuple[float, float]] = deque(maxlen=history)
        self._last: float | None = None

    def update(self, latency_s: float, elapsed_s: float) -> None:
        """Add the estimate ``latency_s`` observed ``elapsed_s`` seconds after the previous
        one (the first observation only sets the level)."""
        if self._last is not None and elapsed_s > 0.0:
            self._steps.append(((latency_s - self._last) ** 2, elapsed_s))
        self._last = latency_s

    def spread_s(self, horizon_s: float) -> float:
        """Spread (standard deviation, seconds) of the latency's move over ``horizon_s``
        seconds (0 before two observations)."""
        if not self._steps or not horizon_s > 0.0:
            return 0.0
        sq = sum(s for s, _ in self._steps)
        dt = sum(d for _, d in self._steps)
        return math.sqrt(sq / dt * horizon_s)


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
