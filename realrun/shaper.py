"""Follow a trace with kernel shaping: a thread that applies each breakpoint on time.

Used by ``netns`` mode (``tc qdisc change ... tbf rate R`` on every rank's veth) and by ``tc``
mode (``tc qdisc replace ... netem delay D rate R``). The time origin is the run's agreed start
(``CLOCK_MONOTONIC``), read from a file rank 0 writes, so the kernel and the hook's trace player
share one clock.
"""

from __future__ import annotations

import logging
import os
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from sim.errors import InputError
from traces.model import PiecewiseTrace

from .traceplayer import Breakpoint, breakpoints

__all__ = ["TraceShaper", "run_tc", "run_tc_all", "wait_for_t0"]

log = logging.getLogger(__name__)


def run_tc(args: Sequence[str], *, netns: str | None = None) -> None:
    """Run one ``tc`` (or ``ip``) command, optionally inside ``netns``; InputError on failure."""
    run_tc_all([(args, netns)])


def run_tc_all(commands: Sequence[tuple[Sequence[str], str | None]]) -> None:
    """Run ``tc`` (or ``ip``) commands, each ``(args, netns)``, at once (all started, then
    all waited for); InputError naming the first that failed. One link change of a netns run
    changes every rank's link: started one after another on a loaded machine, the last rank's
    link changed tens of milliseconds after the first's."""
    cmds = [(["ip", "netns", "exec", ns] if ns else []) + list(args) for args, ns in commands]
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for c in cmds]
    failed: str | None = None
    for cmd, proc in zip(cmds, procs, strict=True):
        out, err = proc.communicate()
        if proc.returncode != 0 and failed is None:
            msg = (err or out).strip().splitlines()
            failed = f"`{' '.join(cmd)}` failed: {msg[0] if msg else proc.returncode}"
    if failed is not None:
        raise InputError(failed)


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
        rt_priority: > 0: the shaper's thread (and the ``tc`` processes it starts) run under
            ``SCHED_FIFO`` at this priority where permitted (root), so that a change is applied
            on time while the ranks keep every core busy; 0 (the default): unchanged.

    ``applied`` holds ``(t, breakpoint)`` with ``t`` when ``apply`` returned and ``changes``
    ``(begin_s, end_s, breakpoint)``, when ``apply`` was called and when it returned, on the
    run's clock (seconds after the origin): on a loaded machine a ``tc`` call starts and
    returns late (up to 0.25 s seen at 4 ranks on 2 cores), and a comparison with the trace
    should use when the link changed, not when it was meant to (:meth:`link_changes`).
    """

    def __init__(
        self,
        trace: PiecewiseTrace,
        apply: Callable[[Breakpoint], None],
        *,
        horizon_s: float = 24 * 3600.0,
        clock: Callable[[], float] = time.monotonic,
        rt_priority: int = 0,
    ) -> None:
        if rt_priority < 0:
            raise ValueError(f"rt_priority must be >= 0, got {rt_priority!r}")
        self._rt_priority = int(rt_priority)
        self.trace = trace
        self._apply = apply
        self._horizon_s = horizon_s
        self._clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.applied: list[tuple[float, Breakpoint]] = []
        self.changes: list[tuple[float, float, Breakpoint]] = []
        self.error: BaseException | None = None

    def start(self, t0_s: float | None = None, *, t0_file: Path | None = None) -> None:
        """Run in a daemon thread from origin ``t0_s``, or from the origin in ``t0_file``."""
        self._thread = threading.Thread(
            target=self._run, args=(t0_s, t0_file), name="compctl-shaper", daemon=True
        )
        self._thread.start()

    def _run(self, t0_s: float | None, t0_file: Path | None) -> None:
        if self._rt_priority:
            try:  # pid 0: this thread only; the tc processes it forks inherit the policy
                os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(self._rt_priority))
            except (OSError, ValueError) as exc:
                log.warning("trace shaper: no real-time priority (%s); changes may be late", exc)
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
                begin = self._clock() - t0_s
                self._apply(bp)
                end = self._clock() - t0_s
                self.applied.append((end, bp))
                self.changes.append((begin, end, bp))
        except BaseException as exc:  # noqa: BLE001 - reported by stop()
            self.error = exc
            log.error("trace shaper stopped: %s", exc)

    def link_changes(self) -> list[dict[str, float]]:
        """The changes applied so far, for a run's ``meta.json``: per change the trace's time
        (``at_s``), when the ``tc`` calls began and ended (``begin_s``, ``end_s``) on the run's
        clock, and the new rate (``bandwidth_Bps``)."""
        return [{"at_s": float(bp.at_s), "begin_s": float(b), "end_s": float(e),
                 "bandwidth_Bps": float(bp.bandwidth_Bps)} for b, e, bp in list(self.changes)]

    def stop(self) -> None:
        """Stop following the trace (idempotent)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
