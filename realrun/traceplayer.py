"""Replay a network trace against the wall clock during a real run.

A :class:`TracePlayer` maps "seconds since the run's agreed start" to the trace's link state, and
answers how long a collective (as alpha-beta terms) would take over the trace if started now.
The hook uses it to emulate the network in user space (``hook`` mode: delay and bandwidth;
``netns`` mode: delay only, the bandwidth being shaped by the kernel), and the netns shaper uses
its breakpoints to drive ``tc qdisc change``.

All ranks of one machine share ``CLOCK_MONOTONIC``; each rank starts its player right after a
barrier, so the players agree to well under a millisecond.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from sim.collectives import AlphaBeta, time_over_trace_s
from traces.model import PiecewiseTrace

__all__ = ["TracePlayer", "Breakpoint", "breakpoints"]


@dataclass(frozen=True)
class Breakpoint:
    """One change of the link state at ``at_s`` seconds after the run's start."""

    at_s: float
    latency_s: float
    bandwidth_Bps: float


def breakpoints(trace: PiecewiseTrace, horizon_s: float) -> Iterator[Breakpoint]:
    """Every state change of ``trace`` in ``[0, horizon_s)``, looping traces unrolled."""
    period = trace.period_s
    base = 0.0
    while base < horizon_s:
        for t, lat, bw in zip(trace.time_s, trace.latency_s, trace.bandwidth_Bps, strict=True):
            at = base + float(t)
            if at >= horizon_s:
                return
            yield Breakpoint(at, float(lat), float(bw))
        if period is None:
            return
        base += period


class TracePlayer:
    """Time-indexed lookups of one link trace during a run.

    Args:
        trace: the link schedule (for several links, the bottleneck the ranks use).
        clock: a monotonic clock in seconds; injectable so tests need no sleeping.
    """

    def __init__(
        self, trace: PiecewiseTrace, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.trace = trace
        self._clock = clock
        self._t0: float | None = None

    @property
    def started(self) -> bool:
        """True once :meth:`start` was called."""
        return self._t0 is not None

    def start(self, t0_s: float | None = None) -> float:
        """Set the run's time origin (now by default); returns it in clock seconds."""
        self._t0 = self._clock() if t0_s is None else float(t0_s)
        return self._t0

    def elapsed_s(self) -> float:
        """Seconds since the origin (0 before :meth:`start`)."""
        if self._t0 is None:
            return 0.0
        return max(0.0, self._clock() - self._t0)

    def state_now(self) -> tuple[float, float]:
        """(latency_s, bandwidth_Bps) in force now."""
        lat, bw, _ = self.trace.state_at(self.elapsed_s())
        return lat, bw

    def collective_s(self, terms: AlphaBeta, start_elapsed_s: float | None = None) -> float:
        """Modelled duration of a collective with ``terms`` started at ``start_elapsed_s``
        (now by default), the bandwidth changing underway as the trace says."""
        t = self.elapsed_s() if start_elapsed_s is None else start_elapsed_s
        # PiecewiseTrace satisfies the cost model's structural _TraceLike protocol.
        return time_over_trace_s(terms, self.trace, t)

    def latency_s(self, n_alpha: float, start_elapsed_s: float | None = None) -> float:
        """The latency part alone: ``n_alpha`` times the latency in force at the start."""
        t = self.elapsed_s() if start_elapsed_s is None else start_elapsed_s
        return n_alpha * self.trace.latency_at(t)
