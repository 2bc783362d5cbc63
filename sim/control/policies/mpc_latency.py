"""How fast a latency estimate moves, for :mod:`sim.control.policies.mpc`'s collective hedge
(:class:`LatencyDiffusion`; read every step)."""

from __future__ import annotations

import math
from collections import deque
from statistics import median

__all__ = ["LatencyDiffusion", "MEDIAN_OF_CHI2_1"]

#: Median of a chi-squared variable with one degree of freedom: the median squared move of a
#: walk with Gaussian steps is this fraction of their variance.
MEDIAN_OF_CHI2_1 = 0.454936423119572


class LatencyDiffusion:
    """How fast a latency estimate has moved: the rate of its quadratic variation (seconds
    squared of latency per second of run) over the last ``history`` observations.

    For a latency that random-walks (additively, as the generators' walk and real queueing
    delay do), the move over the next ``h`` seconds has a spread of ``sqrt(rate * h)``: what
    the history shows the latency could reach within one iteration, even while the latest
    estimates sit still (at a floor, say). A level that holds yields a rate of zero.

    With ``robust`` the rate is read from the median squared move (over
    :data:`MEDIAN_OF_CHI2_1`, which makes it the same rate for a walk with Gaussian steps)
    instead of their mean: a step of the link between two levels (a region pair changing on a
    geo trace: 48 ms to 0.9 ms) is one squared move that the mean spreads over the whole
    window as if the latency walked that fast, while the median sees the jitter around the
    level that holds.
    """

    def __init__(self, history: int, robust: bool = False) -> None:
        self._robust = bool(robust)
        #: Squared moves and seconds between consecutive estimates, newest last (two windows
        #: kept in step: the built-in ``sum`` adds each up in order, without a generator).
        self._sq: deque[float] = deque(maxlen=history)
        self._dt: deque[float] = deque(maxlen=history)
        self._last: float | None = None
        #: Squared moves in the window that are not 0 (a latency estimate that holds, as
        #: the monitor's often does, moves by exactly 0).
        self._moving = 0

    def update(self, latency_s: float, elapsed_s: float) -> None:
        """Add the estimate ``latency_s`` observed ``elapsed_s`` seconds after the previous
        one (the first observation only sets the level)."""
        if self._last is not None and elapsed_s > 0.0:
            sq = self._sq
            if len(sq) == sq.maxlen and sq[0] != 0.0:
                self._moving -= 1  # it leaves the window
            move = (latency_s - self._last) ** 2
            if move != 0.0:
                self._moving += 1
            sq.append(move)
            self._dt.append(elapsed_s)
        self._last = latency_s

    def spread_s(self, horizon_s: float) -> float:
        """Spread (standard deviation, seconds) of the latency's move over ``horizon_s``
        seconds (0 before two observations)."""
        if not self._sq or not horizon_s > 0.0:
            return 0.0
        if not self._moving and horizon_s < math.inf:
            # A window of exact zeros: its sum is 0, and 0 over the (positive) seconds times
            # a finite horizon is 0, without summing either window.
            return 0.0
        sq = (median(self._sq) / MEDIAN_OF_CHI2_1 * len(self._sq) if self._robust
              else sum(self._sq))
        dt = sum(self._dt)
        return math.sqrt(sq / dt * horizon_s)
