"""How fast a latency estimate moves, for :mod:`sim.control.policies.mpc`'s collective hedge
(:class:`LatencyDiffusion`; read every step)."""

from __future__ import annotations

import math
from collections import deque

__all__ = ["LatencyDiffusion"]


class LatencyDiffusion:
    """How fast a latency estimate has moved: the rate of its quadratic variation (seconds
    squared of latency per second of run) over the last ``history`` observations.

    For a latency that random-walks (additively, as the generators' walk and real queueing
    delay do), the move over the next ``h`` seconds has a spread of ``sqrt(rate * h)``: what
    the history shows the latency could reach within one iteration, even while the latest
    estimates sit still (at a floor, say). A level that holds yields a rate of zero.

    With ``jump_ratio`` > 0, the window's largest squared move is left out (the rate is the
    mean of the others) when it is more than ``jump_ratio`` times their mean: one step of the
    link between two levels (a geo trace changing region pair, 48 ms to 0.9 ms) is not a walk,
    and the plain mean spreads it over the whole window as if the latency walked that fast.
    Of 40 squared Gaussian steps, the largest exceeds 20 times the mean of the others in about
    one window in 400 (simulated), so a walk's rate is barely touched.
    """

    def __init__(self, history: int, jump_ratio: float = 0.0) -> None:
        if not (jump_ratio == 0.0 or jump_ratio > 1.0):
            raise ValueError(f"jump_ratio must be 0 (off) or > 1, got {jump_ratio!r}")
        self._jump_ratio = float(jump_ratio)
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
        sq = sum(self._sq)
        n = len(self._sq)
        if self._jump_ratio and n >= 3:
            top = max(self._sq)
            rest = (sq - top) / (n - 1)
            if top > self._jump_ratio * rest:
                sq = rest * n
        dt = sum(self._dt)
        return math.sqrt(sq / dt * horizon_s)
