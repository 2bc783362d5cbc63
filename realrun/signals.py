"""SIGINT, SIGTERM and SIGHUP take one clean path through a real-run launcher.

Inside :func:`stop_signals` each raises :class:`sim.signals.Interrupted` (a
:class:`KeyboardInterrupt` that remembers its signal) in the main thread, so every ``finally``
and context manager of the launcher runs: ranks stopped, namespaces and qdiscs removed, temp
folders deleted, the run marked ``interrupted``. Unlike :func:`sim.signals.interrupt_on_signals`
it also takes Ctrl-C, and only the first signal raises: a second one, of any of the three,
cannot cut the clean-up short.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from sim.signals import Interrupted

__all__ = ["Interrupted", "stop_signals", "STOP_SIGNALS"]

#: Signals handled like SIGINT.
STOP_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGHUP)


class _Once:
    """Raises :class:`Interrupted` for the first stop signal and ignores the rest, so a second
    signal cannot cut the clean-up short."""

    def __init__(self) -> None:
        self.fired = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.fired:
            return
        self.fired = True
        raise Interrupted(signum)


@contextmanager
def stop_signals() -> Iterator[None]:
    """Within the block, SIGINT, SIGTERM and SIGHUP raise :class:`Interrupted` (once; later
    ones are ignored while the clean-up runs).

    Outside the main thread (where Python cannot install handlers) it changes nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[signal.Signals, Any] = {}
    handler = _Once()
    for sig in (signal.SIGINT, *STOP_SIGNALS):
        previous[sig] = signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
