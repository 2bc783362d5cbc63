"""Link forecasts of :mod:`sim.control.policies.mpc`: level, trend and spread of a monitor
signal in log space, cut at the last level shift, and the iterations a constant gain needs for
a given progress (kept for callers and tests; the planner runs the model chunk by chunk), and
the rate a latency estimate moves at (:class:`LatencyDiffusion`, from :mod:`.mpc_latency`)."""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections import deque
from itertools import accumulate, islice, repeat
from operator import mul, sub

from .mpc_latency import LatencyDiffusion

__all__ = ["LatencyDiffusion", "LinkForecast", "robust_scale", "steps_to_progress"]


class LinkForecast:
    """Level, trend and spread of a positive signal in log space over a sliding window.

    With ``regime_steps`` > 0 the window is cut at a level shift (a step of the link): when
    splitting it in two constant levels explains at least :data:`_SHIFT_SHARE` of its variance
    and the levels differ by more than ``log(1 + shift)``, and the newer level has held for at
    least ``regime_steps`` observations, only the observations since the shift count (the
    level, trend, spread and median describe the link in force, not the one before it). A
    shift younger than that may be a spike passing, and the whole window still counts.

    With ``walk`` the window is also read as a random walk seen through noise (:meth:`walk`):
    the forecast's centre and the median move towards the walk's latest level by the share of
    the increments' variance the walk explains (a process-type reading from the history, not
    a fixed model: noise around a level keeps the fit, a walk is forecast by its last level).

    With ``robust`` the spread is the least of the residuals' standard deviation and their
    :func:`robust_scale` (an isolated spike in the window does not widen the forecast).
    """

    def __init__(self, history: int, floor: float = 0.0, regime_steps: int = 0,
                 shift: float = 0.25, walk: bool = False, robust: bool = False) -> None:
        self._xs: deque[float] = deque(maxlen=history)
        self._robust = bool(robust)
        self._floor = float(floor)
        self._regime_steps = int(regime_steps)
        self._min_shift = math.log1p(shift)
        self._cut: int | None = 0
        self._seen = 0
        #: Observations before a regime started by :meth:`start_regime` (None: none).
        self._forced: int | None = None
        #: :meth:`fit` of the current window (a plan asks for it once per density and case).
        self._fit: tuple[float, float, float] | None = None
        self._walk_on = bool(walk)
        #: :meth:`walk` of the current window.
        self._walk: tuple[float, float, float, float] | None = None
        #: The window's values in order (kept as it slides: its least, greatest and median
        #: values are read every step); None once a NaN came in, which has no order.
        self._sorted: list[float] | None = []

    def update(self, value: float) -> None:
        """Add one observation (positive; raised to the floor first, so that a signal touching
        zero does not send the log-space fit to minus infinity)."""
        x = math.log(self._floor if self._floor > value else value)  # max(value, floor)
        ordered = self._sorted
        if ordered is not None:
            if x != x:
                self._sorted = None
            else:
                if len(self._xs) == self._xs.maxlen:
                    del ordered[bisect_left(ordered, self._xs[0])]
                insort(ordered, x)
        self._xs.append(x)
        self._seen += 1
        self._cut = None
        self._fit = None
        self._walk = None

    def regime_start(self) -> int:
        """Number of observations before the regime in force (the accepted level shift; the
        window's first observation without one): it moves when a new shift is accepted."""
        self._cut_at()
        first = self._seen - len(self._xs)
        return first + (self._cut or 0) if self._cut else 0

    def start_regime(self) -> None:
        """Start a regime at the latest observation now, without waiting ``regime_steps``
        (a caller that saw a step of the link itself): until a later shift is accepted, only
        the observations from it on count."""
        if self._xs:
            self._forced = self._seen - 1
            self._cut = None
            self._fit = None
            self._walk = None

    def __len__(self) -> int:
        return len(self._xs)

    def _cut_at(self) -> int | None:
        """Index in the window of the regime's first observation (the level shift tested once
        per window), or ``None`` when the whole window counts without a test."""
        base = 0
        if self._forced is not None:
            base = max(0, self._forced - (self._seen - len(self._xs)))
        if self._regime_steps <= 0 and not base:
            return None
        if self._cut is None:
            if self._regime_steps <= 0:
                self._cut = base
            elif base or self._sorted is None:
                self._cut = base + _level_shift(list(islice(self._xs, base, None)),
                                                self._regime_steps, self._min_shift)
            else:  # the whole window: its least and greatest values are kept in order
                self._cut = _level_shift(list(self._xs), self._regime_steps, self._min_shift,
                                         self._sorted[0], self._sorted[-1])
        return self._cut

    def _regime(self) -> list[float]:
        """The window's observations since the last accepted level shift (all without one)."""
        cut = self._cut_at()
        xs = list(self._xs)
        return xs if cut is None else xs[cut:]

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
        sxx = _SXX.get(n)
        if sxx is None:  # a function of the window's length alone
            sxx = _SXX[n] = sum((i - mx) ** 2 for i in range(n))
        slope = sum((i - mx) * (x - my) for i, x in enumerate(xs)) / sxx
        level = my + slope * (n - 1 - mx)
        res = [x - (my + slope * (i - mx)) for i, x in enumerate(xs)]
        std = math.sqrt(sum(r * r for r in res) / (n - 2))
        if self._robust:
            std = min(std, robust_scale(res))
        return level, slope, std

    def walk(self) -> tuple[float, float, float, float]:
        """``(share, level, move variance, noise variance)`` of the window read as a local
        level (a random walk seen through noise, in log units): from the increments' variance
        ``g0`` and lag-1 autocovariance ``g1`` (the walk's moves add ``q`` to ``g0`` and
        nothing to ``g1``; measurement noise of variance ``r`` adds ``2 r`` to ``g0`` and
        ``-r`` to ``g1``), ``r = -g1`` and ``q = g0 - 2 r``, bounded to ``[0, g0]``. ``share``
        is ``q / g0``: 1 for a pure random walk (the best forecast is the last level, its
        spread grows like the square root of the horizon), 0 for noise around a level (the
        window's fit is the forecast). ``level`` is the walk's filtered latest level (the
        steady-state Kalman filter of the local level model, an EWMA with gain from
        ``q / r``). ``(0, last, 0, 0)`` when off, under four observations, or when the window
        came within :data:`_FLOOR_CLEARANCE` times the signal's floor."""
        if self._walk is None:
            self._walk = self._walk_window()
        return self._walk

    def _walk_window(self) -> tuple[float, float, float, float]:
        xs = self._regime()
        if not self._walk_on or len(xs) < 4:
            return 0.0, xs[-1] if xs else 0.0, 0.0, 0.0
        if self._floor > 0.0 and min(xs) < math.log(_FLOOR_CLEARANCE * self._floor):
            # A signal that touched its floor: in log space the clipping makes moves of
            # orders of magnitude that are the floor's, not the link's.
            return 0.0, xs[-1], 0.0, 0.0
        d = [b - a for a, b in zip(xs, xs[1:], strict=False)]
        m = sum(d) / len(d)
        g0 = sum((x - m) ** 2 for x in d) / len(d)
        if not g0 > 0.0:
            return 0.0, xs[-1], 0.0, 0.0
        g1 = sum((a - m) * (b - m) for a, b in zip(d, d[1:], strict=False)) / len(d)
        r = min(0.5 * g0, max(0.0, -g1))
        q = max(0.0, g0 - 2.0 * r)
        share = q / g0
        if r <= 0.0:
            return share, xs[-1], q, r
        ratio = q / r
        gain = 0.5 * (-ratio + math.sqrt(ratio * ratio + 4.0 * ratio))
        level = xs[0]
        for x in xs[1:]:
            level += gain * (x - level)
        return share, level, q, r

    def window_median(self, default: float = 0.0) -> float:
        """Median of the whole window as observed (``default`` before any observation): no
        regime cut and no walk reading, so a jump of the latest observations leaves it."""
        if not self._xs:
            return default
        xs = self._sorted if self._sorted is not None else sorted(self._xs)
        m = len(xs) // 2
        return math.exp(xs[m] if len(xs) % 2 else 0.5 * (xs[m - 1] + xs[m]))

    def median(self, default: float = 0.0) -> float:
        """Median of the window (``default`` before any observation); with the walk reading
        on, moved towards the walk's latest level by its share (a walk does not come back to
        where it was)."""
        if not self._xs:
            return default
        xs = sorted(self._regime())
        m = len(xs) // 2
        med = xs[m] if len(xs) % 2 else 0.5 * (xs[m - 1] + xs[m])
        share, level, _, _ = self.walk()
        return math.exp(med + share * (level - med))

    def at(self, steps_ahead: float, z: float, default: float = 0.0) -> float:
        """Forecast ``steps_ahead`` observations ahead, ``z`` spreads away from the trend
        (``default`` before any observation). With the walk reading on, the centre moves
        from the window's trend towards the walk's latest level by the walk's share (a
        regression line through a random walk lags it: for a walk the best point forecast is
        the last level)."""
        if not self._xs:
            return default
        level, slope, std = self.fit()
        # The trend is trusted only as far as the window it was fitted on, and never beyond
        # the range the window saw.
        xs = self._regime()
        ahead = min(steps_ahead, float(len(xs)))
        centre = min(max(xs), max(min(xs), level + slope * ahead))
        share, walk_level, _, _ = self.walk()
        # The spread stays the fit's: widened like a walk's (the square root of the horizon)
        # it priced latency spikes of orders of magnitude on walks near zero (tried, not
        # kept: docs/benchmarks/controllers.md).
        centre += share * (walk_level - centre)
        return math.exp(centre + z * std)


#: Per window length ``n``: the sum of squares of ``i - (n - 1) / 2`` over ``i < n``.
_SXX: dict[int, float] = {}
#: A walk reading needs the window at least this many times above the signal's floor.
_FLOOR_CLEARANCE = 10.0
#: Share of a window's variance two constant levels must explain to count as a level shift.
_SHIFT_SHARE = 0.8


def _level_shift(xs: list[float], min_after: int, min_shift: float,
                 lo: float | None = None, hi: float | None = None) -> int:
    """Index of the first observation after the window's level shift (0 when there is none):
    the split into two constant levels with the least squared error, accepted when it explains
    :data:`_SHIFT_SHARE` of the variance, the levels differ by ``min_shift`` and the later one
    has at least ``min_after`` observations.

    This runs every step (on a real run's critical path), so it is searched in two passes
    with the plain loop's result, to the bit:

    * a window whose range stays below ``min_shift`` by more than the rounding of a level's
      mean (:data:`_MEAN_ROUNDING`) has no shift, whatever its split, and is not searched;
    * every split's explained sum of squares is first computed the cheap way (``n D ** 2 /
      (k (n - k))``, ``D`` the first level's sum less ``k`` means), and only the splits within
      twice a bound on the two ways' rounding difference (:data:`_SPLIT_ROUNDING`) of the
      greatest are computed exactly as the plain loop does; no other split can be the plain
      loop's first greatest.

    ``lo`` and ``hi``, when given, are ``min(xs)`` and ``max(xs)`` (a caller that keeps them)."""
    n = len(xs)
    if n < min_after + 2:
        return 0
    if lo is None or hi is None:
        lo, hi = min(xs), max(xs)
    big = -lo if -lo > hi else hi  # max(hi, -lo)
    if hi - lo + _MEAN_ROUNDING * n * n * (1.0 + big) <= min_shift:
        return 0  # no two levels' means can differ by more than min_shift
    total = sum(xs)
    mean = total / n
    coef = _SPLITS.get(n)
    if coef is None:
        coef = _SPLITS[n] = [n / (k * (n - k)) for k in range(1, n)]
    # The cheap way: D = the running sum of the deviations from the mean (zip stops at the
    # n - 1 splits: the last observation starts none), then n D ** 2 / (k (n - k)).
    dev = list(map(sub, xs, repeat(mean)))  # x - mean, as the plain loop's
    cheap = [d * d * c for d, c in zip(accumulate(dev), coef)]  # noqa: B905 (a keyword costs)
    top = max(cheap)
    floor = top - 2.0 * (_SPLIT_ROUNDING * n ** 3 * (1.0 + big) ** 2 + _SPLIT_RELATIVE * top)
    first = cheap.index(top)
    cheap[first] = -math.inf
    if max(cheap) < floor:
        splits = [first + 1]  # the usual case: one candidate
    else:
        cheap[first] = top
        splits = [k for k, v in enumerate(cheap, 1) if v >= floor]
    best_k, best_gain = 0, 0.0
    for k in splits:
        head = sum(xs[:k])  # the plain loop's running sum (from 0, in order)
        # Between-levels sum of squares: what the split explains.
        gain = k * (head / k - mean) ** 2 + (n - k) * ((total - head) / (n - k) - mean) ** 2
        if gain > best_gain:
            best_k, best_gain = k, gain
    # Without a split that explains anything, or one too young or too small, there is no
    # shift, whatever the total variance: it is summed only for a candidate (a test run every
    # step). No variance (every value the same) explains nothing either.
    if not best_k or n - best_k < min_after:
        return 0
    head = sum(xs[:best_k])
    if not abs((total - head) / (n - best_k) - head / best_k) > min_shift:
        return 0
    # The total sum of squares, squared by multiplying (each square within a unit or so of
    # the plain ``(x - mean) ** 2``): the test is decided on it unless the gain falls within
    # the bound of the two ways' difference, where the plain sum is taken.
    sst = sum(map(mul, dev, dev))
    near = _SUM_ROUNDING * (n + 1) * sst
    if not (sst > 0.0 and near < math.inf) or abs(best_gain - _SHIFT_SHARE * sst) <= near:
        sst = sum([d ** 2 for d in dev])  # the plain generator's sum, in its order
    return best_k if sst > 0.0 and best_gain >= _SHIFT_SHARE * sst else 0


#: Bound on the rounding of a mean of ``n`` observations (sequentially summed, and a mean of
#: the rest from the total), as a multiple of ``n ** 2`` and of the values' magnitude: over a
#: thousand times the worst case of IEEE double arithmetic (a few units of 2 ** -53).
_MEAN_ROUNDING = 1e-12
#: Bound on how far a split's explained sum of squares computed the cheap way and the plain way
#: can differ: this times ``n ** 3 (1 + max |x|) ** 2`` plus :data:`_SPLIT_RELATIVE` times the
#: value (the worst case of IEEE double arithmetic is under 128 and 16 units of 2 ** -53).
_SPLIT_ROUNDING = 1e-12
_SPLIT_RELATIVE = 1e-13
#: Bound on the relative difference of a sum of ``n`` squares taken by multiplying and by
#: ``** 2``, per square: over a hundred times the worst case (about 2 units of 2 ** -53).
_SUM_ROUNDING = 1e-13
#: ``n / (k (n - k))`` for each split ``k`` of a window of ``n`` (per window length).
_SPLITS: dict[int, list[float]] = {}


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


#: Median absolute deviation to standard deviation for normal residuals.
_MAD_TO_STD = 1.4826


def robust_scale(res: list[float]) -> float:
    """Standard deviation of a fit's residuals (centred on zero) read from the median of their
    absolute values (times :data:`_MAD_TO_STD`): the spread of the bulk, which a few isolated
    spikes do not move (0 for no residuals)."""
    xs = sorted(abs(r) for r in res)
    n = len(xs)
    if n == 0:
        return 0.0
    m = n // 2
    mad = xs[m] if n % 2 else 0.5 * (xs[m - 1] + xs[m])
    return _MAD_TO_STD * mad

