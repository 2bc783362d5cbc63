"""Clocks of :func:`realrun.hook.compression_hook`: device-synchronised timestamps for the
compression and exchange spans, and the emulated network time added after each collective."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from sim.collectives import AlphaBeta

from ..emulation import HookEmulator

__all__ = ["CommClock"]


class CommClock:
    """Timestamps for one rank's hook.

    Args:
        device: the gradients' device; on CUDA :meth:`now` waits for its queued work.
        emulator: adds emulated network time after collectives; ``None`` for none.
    """

    def __init__(self, device: torch.device, emulator: HookEmulator | None) -> None:
        self.device = device
        self.emulator = emulator
        self._sync = device.type == "cuda"
        #: Work to do inside emulated network waits (``idle(budget_s) -> seconds spent``);
        #: ``None``: none (:mod:`realrun.hook.ahead`).
        self.idle: Callable[[float], float] | None = None

    def now(self) -> float:
        """``perf_counter`` after the device has finished its queued work (on CUDA), so the
        compression and exchange times count kernels where they run."""
        if self._sync:
            torch.cuda.synchronize(self.device)
        return time.perf_counter()

    def begin_comm(self) -> tuple[float, float]:
        """Mark a collective's start (the emulator's reference, or the wall clock)."""
        if self.emulator is not None:
            return self.emulator.begin()
        return time.perf_counter(), 0.0

    def end_comm(self, terms: AlphaBeta, start: tuple[float, float]) -> None:
        """After a collective begun at ``start``: wait out its emulated network time, if any."""
        if self.emulator is not None:
            self.emulator.finish(terms, start, self.idle)
