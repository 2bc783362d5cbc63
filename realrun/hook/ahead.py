"""Decisions computed ahead (``decision_lag=1``): the controller's ``decide()`` on the
observation before step ``s`` runs while step ``s`` waits on the network, and its decision is
applied at step ``s + 1``.

A plan can cost milliseconds of CPU (``mpc``), and the hook asks for the decision at the first
bucket of the backward pass, on the critical path. With a lag of one step, the call can run
wherever the rank would otherwise idle: it starts at the step's first emulated network wait
(:meth:`DecisionAhead.run_idle`, called by the emulator before it sleeps) on a helper thread and
overlaps the step's waits; the step's end (the hook's ``end_iteration``) waits for it. If no
wait came, it runs there, on the critical path as without the lag.
Either way every rank computes the same decision from the same agreed observation, and the
simulator applies decisions with the same lag (:class:`sim.config.SimConfig` ``decision_lag``),
so both worlds run one controller the same way.

The helper is one thread, parked on an event between calls, at the lowest scheduling priority
(nice :data:`HELPER_NICE` on Linux; elsewhere as it is). Whatever the waiting thread waits for
on its way back from a wait (the core, the GIL) lands inside the measured collective and reads
as a slower link: with a thread started per call (``Thread.start`` hands the GIL to the new
thread and waits to get it back) and a 0.2 ms switch interval, the stepped trace's 1.16 ms
collectives measured 1.48 ms at their 10th percentile; with the parked helper and a 20 us
interval, 1.19-1.21 ms.

The wait may be on the process group's worker thread (the asynchronous dense path), so a lock
makes the job start once. The main thread gets the GIL back from the helper within Python's
switch interval: the real worker lowers it (:func:`realrun.worker.hook_state_for`) when a lag
is set.
"""

from __future__ import annotations

import os
import threading
import time

from sim.control.types import Controller, Decision, Observation

__all__ = ["DecisionClock", "DecisionAhead", "HELPER_NICE", "lower_thread_priority"]

#: The nice value of the helper thread that computes a decision ahead (19: the lowest priority).
HELPER_NICE = 19


def lower_thread_priority(nice: int = HELPER_NICE) -> bool:
    """Give the calling thread (only it: Linux sets the nice value per thread id) the nice
    value ``nice``; ``False`` where the platform has no per-thread priority or refuses."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
    except (AttributeError, OSError):
        return False
    return True


class DecisionClock:
    """Seconds of ``decide()`` this rank spent since the last :meth:`drain`, and how much of
    it ran inside network waits (hidden from the critical path)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.decide_s = 0.0
        self.hidden_s = 0.0

    def add(self, decide_s: float, hidden_s: float = 0.0) -> None:
        """Count one ``decide()`` call."""
        with self._lock:
            self.decide_s += decide_s
            self.hidden_s += hidden_s

    def drain(self) -> tuple[float, float]:
        """``(decide_s, hidden_s)`` since the last drain; resets both."""
        with self._lock:
            out = (self.decide_s, self.hidden_s)
            self.decide_s = self.hidden_s = 0.0
            return out


class DecisionAhead:
    """At most one pending ``decide()`` call and the result of the last one.

    :meth:`run_idle` (the first network wait of the step) hands the call to a helper thread
    and returns at once, so the wait it came from -- and every later wait of the step, the
    agreement's included -- overlaps with it (the rank's main thread sleeps or blocks in the
    transport, without the GIL); :meth:`finish` (the step's end) waits for it, or runs it there
    if no wait came. Only the time :meth:`finish` waits for it is on the critical path.

    The helper is one thread for the object's life, started at the first hand-over and parked
    on an event between calls: starting a thread per call would make the waiting thread hand
    the GIL to the new one and wait to get it back (``Thread.start`` blocks until the thread
    runs), time that lands inside the measured collective."""

    def __init__(self, clock: DecisionClock) -> None:
        self._lock = threading.Lock()
        self._clock = clock
        self._job: tuple[Controller, Observation] | None = None
        self._spent_s = 0.0
        self._result: Decision | None = None
        self._error: BaseException | None = None
        #: The helper's call in flight, if any, and the event it sets when done.
        self._running = False
        self._done = threading.Event()
        self._handed: tuple[Controller, Observation] | None = None
        self._go = threading.Event()
        self._helper: threading.Thread | None = None

    @property
    def pending(self) -> bool:
        """A call is submitted or its result not yet taken."""
        return self._job is not None or self._running or self._result is not None

    def submit(self, controller: Controller, obs: Observation) -> None:
        """Queue ``controller.decide(obs)``; the previous result must have been taken."""
        with self._lock:
            if self.pending:
                raise RuntimeError("a decision is still pending")
            self._job = (controller, obs)

    def _call(self, job: tuple[Controller, Observation]) -> None:
        t0 = time.perf_counter()
        try:
            self._result = job[0].decide(job[1])
        except BaseException as exc:  # re-raised on the training thread by finish()
            self._error = exc
        self._spent_s = time.perf_counter() - t0

    def _serve(self) -> None:
        """The helper thread: run each handed-over call, at the lowest priority."""
        lower_thread_priority()
        while True:
            self._go.wait()
            self._go.clear()
            job, self._handed = self._handed, None
            if job is not None:
                self._call(job)
            self._done.set()

    def run_idle(self, budget_s: float) -> float:
        """Hand the queued call, if any, to the helper thread; returns 0 (the caller's wait
        goes on in full, overlapping with it)."""
        with self._lock:
            job, self._job = self._job, None
            if job is not None:
                if self._helper is None:
                    self._helper = threading.Thread(target=self._serve, name="decision-ahead",
                                                    daemon=True)
                    self._helper.start()
                self._running = True
                self._done.clear()
                self._handed = job
                self._go.set()
        return 0.0

    def finish(self) -> None:
        """Complete the queued call: wait for the helper's, or run it here if no wait started
        it; count its seconds (hidden: all but the time spent waiting here)."""
        with self._lock:
            job, self._job = self._job, None
            running, self._running = self._running, False
        if job is not None:
            self._call(job)
            self._clock.add(self._spent_s, 0.0)
        elif running:
            t0 = time.perf_counter()
            self._done.wait()
            waited = time.perf_counter() - t0
            self._clock.add(self._spent_s, max(self._spent_s - waited, 0.0))
        if self._error is not None:
            err, self._error = self._error, None
            raise err

    def take(self) -> Decision:
        """The result of the queued call (completed first if needed)."""
        self.finish()
        if self._result is None:
            raise RuntimeError("no decision was submitted")
        out, self._result = self._result, None
        return out

    def state(self) -> Decision | None:
        """The untaken result, the queued call completed first (for a checkpoint)."""
        self.finish()
        return self._result

    def restore(self, result: Decision | None) -> None:
        """Put back what :meth:`state` returned."""
        self._result = result
