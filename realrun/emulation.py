"""User-space network emulation inside the communication hook.

Three emulation modes exist for real runs (recorded in ``meta.json``):

* ``hook``: delay *and* bandwidth are emulated here. After a collective finishes on the (fast)
  real transport, the hook sleeps until the time the collective would have taken over the trace
  (:meth:`TracePlayer.collective_s`). If the real transport was already slower, nothing is added.
* ``netns``: the kernel shapes bandwidth (tbf on veth pairs between network namespaces, see
  :mod:`realrun.netns`); this module adds only the latency part, ``n_alpha`` times the trace's
  latency, after the transfer, because this kernel has no netem to delay packets.
* ``tc``: netem does both in the kernel; nothing is added here.
* ``none``: no emulation (the machine's own network).

The sleep happens on whichever thread completes the collective (for the asynchronous dense path
that is the process group's worker thread, which also serialises the next bucket's collective,
as one real link would).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from sim.collectives import AlphaBeta
from sim.errors import InputError

from .traceplayer import TracePlayer

__all__ = ["EMULATION_MODES", "HookEmulator"]

#: Emulation modes a real run can use.
EMULATION_MODES: tuple[str, ...] = ("none", "hook", "netns", "tc")


class HookEmulator:
    """Adds the emulated part of a collective's duration in the hook.

    Args:
        mode: one of :data:`EMULATION_MODES`.
        player: the trace player (required for ``hook`` and ``netns``).
        sleep: injectable for tests.
    """

    def __init__(
        self,
        mode: str,
        player: TracePlayer | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        if mode not in EMULATION_MODES:
            raise InputError(
                f"unknown emulation mode {mode!r}; known: {', '.join(EMULATION_MODES)}"
            )
        if mode in ("hook", "netns") and player is None:
            raise InputError(f"emulation mode {mode!r} needs a trace player")
        self.mode = mode
        self.player = player
        self._sleep = sleep
        self._clock = clock
        # Emulated collectives share one link: one that starts while another is still "on the
        # wire" waits for it. Callbacks run on the process group's thread, hence the lock.
        self._busy_until = -math.inf
        self._lock = threading.Lock()

    @property
    def active(self) -> bool:
        """True when this emulator ever adds time."""
        return self.mode in ("hook", "netns")

    def begin(self) -> tuple[float, float]:
        """Mark a collective's start: (perf-counter time, trace-elapsed time)."""
        elapsed = self.player.elapsed_s() if self.player is not None else 0.0
        return self._clock(), elapsed

    def target_s(self, terms: AlphaBeta, trace_start_s: float) -> float:
        """Seconds the collective should last in total under this mode (0 when inactive)."""
        if self.player is None or not self.active:
            return 0.0
        if self.mode == "hook":
            return self.player.collective_s(terms, trace_start_s)
        return self.player.latency_s(terms.n_alpha, trace_start_s)

    def finish(self, terms: AlphaBeta, start: tuple[float, float],
               idle: Callable[[float], float] | None = None) -> float:
        """Sleep as the mode requires after a collective that began at ``start``; returns the
        seconds slept. ``idle(budget_s)``, when given, is called first with the seconds there
        are to wait, to do work that would otherwise wait (a decision computed ahead,
        :mod:`realrun.hook.ahead`); only what is left of the wait is then slept."""
        if not self.active:
            return 0.0
        t_clock, t_trace = start
        if self.mode == "hook":
            with self._lock:
                begin = max(t_clock, self._busy_until)
                end = begin + self.target_s(terms, t_trace + (begin - t_clock))
                self._busy_until = end
            remaining = end - self._clock()
        else:
            remaining = self.target_s(terms, t_trace)  # latency added after the shaped transfer
        if remaining > 0.0 and idle is not None:
            t0 = self._clock()
            if idle(remaining) > 0.0:
                remaining -= self._clock() - t0
        if remaining > 0.0:
            self._sleep(remaining)
            return remaining
        return 0.0
