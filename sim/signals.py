"""SIGTERM and SIGHUP take the same clean path as Ctrl-C (SIGINT).

``kill PID`` (SIGTERM) or a closed terminal (SIGHUP) used to end a sweep or a capture at once,
skipping the clean-up that Ctrl-C runs (stopping worker processes, recording what was kept).
Inside :func:`interrupt_on_signals` those signals raise :class:`Interrupted`, a
:class:`KeyboardInterrupt` that remembers its signal, so every ``except KeyboardInterrupt`` /
``finally`` clean-up runs, and the command exits with the conventional ``128 + signal number``.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

__all__ = ["Interrupted", "interrupt_on_signals", "exit_status", "signal_name"]

_SIGNALS = tuple(
    s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s is not None
)


class Interrupted(KeyboardInterrupt):
    """A stop requested by a signal; ``signum`` says which."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal_name(signum))
        self.signum = signum


def signal_name(signum: int) -> str:
    """``"SIGTERM"`` for 15 and so on; the number when the platform has no name for it."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def exit_status(exc: BaseException) -> int:
    """``128 + signal``: 130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP."""
    return 128 + int(getattr(exc, "signum", signal.SIGINT))


@contextlib.contextmanager
def interrupt_on_signals() -> Iterator[None]:
    """Turn SIGTERM and SIGHUP into :class:`Interrupted` for the ``with`` block (main thread).

    After the first signal further ones are ignored, so the clean-up is not cut short by a
    second ``kill``; the previous handlers come back when the block ends.
    """
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        for s in _SIGNALS:
            signal.signal(s, signal.SIG_IGN)
        raise Interrupted(signum)

    previous = {s: signal.signal(s, handler) for s in _SIGNALS}
    try:
        yield
    finally:
        for s, old in previous.items():
            signal.signal(s, old)
