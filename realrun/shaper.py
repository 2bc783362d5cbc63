"""Follow a trace with kernel shaping: a thread that applies each breakpoint on time.

Used by ``netns`` mode (``tc qdisc change ... tbf rate R`` on every rank's veth) and by ``tc``
mode (``tc qdisc replace ... netem delay D rate R``). The time origin is the run's agreed start
(``CLOCK_MONOTONIC``), read from a file rank 0 writes, so the kernel and the hook's trace player
share one clock.
"""

from __future__ import annotations

import logging
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from sim.errors import InputError
from traces.model import PiecewiseTrace

from .traceplayer import Breakpoint, breakpoints

__all__ = ["TraceShaper", "run_tc", "wait_for_t0"]

log = logging.getLogger(__name__)


def run_tc(args: Sequence[str], *, netns: str | None = None) -> None:
    """Run one ``tc`` (or ``ip``) command, optionally inside ``netns``; InputError on failure."""
    cmd = (["ip", "netns", "exec", netns] if netns else []) + list(args)
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        msg = (res.stderr or res.stdout).strip().splitlines()
        raise InputError(f"`{' '.join(cmd)}` failed: {msg[0] if msg else res.returncode}")


def wait_for_t0(path: Path, stop: threading.Event, timeout_s: float = 600.0) -> float | None:
    """Poll ``path`` until rank 0 wrote the run's time origin; ``None`` if stopped first."""
    deadline = time.monotonic() + timeout_s
    while not stop.is_set() and time.monotonic() < deadline:
        if path.is_file():
            try:
                return float(path.read_text())
            except ValueError:
                pass  # being written; os.replace makes this rare
        stop.wait(0.02)
    return None


class TraceShaper:
    """Applies ``apply(breakpoint)`` at each breakpoint of ``trace`` after the time origin.

    Args:
        trace: the schedule.
        apply: applies one link state (runs ``tc``); exceptions are logged and stop the shaper.
        horizon_s: how far to unroll a looping trace.
        clock: monotonic clock (seconds), shared with the ranks.
    """

    def __init__(
        self,
        trace: PiecewiseTrace,
        apply: Callable[[Breakpoint], None],
        *,
        horizon_s: float = 24 * 3600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.trace = trace
        self._apply = apply
        self._horizon_s = horizon_s
        self._clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.applied: list[tuple[float, Breakpoint]] = []
        self.error: BaseException | None = None

    def start(self, t0_s: float | None = None, *, t0_file: Path | None = None) -> None:
        """Run in a daemon thread from origin ``t0_s``, or from the origin in ``t0_file``."""
        self._thread = threading.Thread(
            target=self._run, args=(t0_s, t0_file), name="compctl-shaper", daemon=True
        )
        self._thread.start()

    def _run(self, t0_s: float | None, t0_file: Path | None) -> None:
        if t0_s is None:
            if t0_file is None:
                raise ValueError("give t0_s or t0_file")
            t0_s = wait_for_t0(t0_file, self._stop)
            if t0_s is None:
                return
        try:
            for bp in breakpoints(self.trace, self._horizon_s):
                if bp.at_s == 0.0:
                    continue  # the initial state is applied before the run starts
                delay = t0_s + bp.at_s - self._clock()
                if delay > 0 and self._stop.wait(delay):
                    return
                self._apply(bp)
                self.applied.append((self._clock() - t0_s, bp))
        except BaseException as exc:  # noqa: BLE001 - reported by stop()
            self.error = exc
            log.error("trace shaper stopped: %s", exc)

    def stop(self) -> None:
        """Stop following the trace (idempotent)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
