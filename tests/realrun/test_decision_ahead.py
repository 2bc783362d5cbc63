"""Decisions computed ahead (``decision_lag=1``, :mod:`realrun.hook.ahead`): the call starts in
the first network wait, runs once, its seconds are counted (hidden: all but the wait for it at
the step's end), and the emulator's idle work hands back the wait in full."""

from __future__ import annotations

import threading
import time

import pytest

from realrun.emulation import HookEmulator
from realrun.hook.ahead import DecisionAhead, DecisionClock
from realrun.traceplayer import TracePlayer
from sim.collectives import AlphaBeta
from sim.control.types import Decision, Observation
from traces.model import PiecewiseTrace

OBS = Observation(step=3, world_size=2, grad_bytes=100)


class Slow:
    """A controller whose decide() takes ``secs`` and records the thread it ran on."""

    def __init__(self, secs: float, fail: bool = False) -> None:
        self.secs = secs
        self.fail = fail
        self.calls: list[tuple[int, str]] = []

    def reset(self, *, seed: int) -> None:
        """Stateless."""

    def decide(self, obs: Observation) -> Decision:
        self.calls.append((obs.step, threading.current_thread().name))
        time.sleep(self.secs)
        if self.fail:
            raise ValueError("planner broke")
        return Decision("topk", 0.01, "allgather")


def test_a_call_started_in_a_wait_runs_once_on_a_helper_and_is_hidden() -> None:
    clock = DecisionClock()
    ahead = DecisionAhead(clock)
    ctl = Slow(0.02)
    ahead.submit(ctl, OBS)
    assert ahead.pending
    assert ahead.run_idle(0.05) == 0.0  # returns at once: the wait goes on in full
    ahead.run_idle(0.05)  # a second wait starts nothing more
    time.sleep(0.05)  # the caller's wait
    assert ahead.take() == Decision("topk", 0.01, "allgather")
    assert ctl.calls == [(3, "decision-ahead")]
    spent, hidden = clock.drain()
    assert 0.02 <= spent < 1.0
    assert hidden > 0.5 * spent  # finished before the step's end needed it
    assert clock.drain() == (0.0, 0.0)
    assert not ahead.pending


def test_without_a_wait_the_call_runs_at_the_steps_end_on_the_critical_path() -> None:
    clock = DecisionClock()
    ahead = DecisionAhead(clock)
    ctl = Slow(0.005)
    ahead.submit(ctl, OBS)
    ahead.finish()
    assert ctl.calls == [(3, threading.current_thread().name)]
    spent, hidden = clock.drain()
    assert spent >= 0.005 and hidden == 0.0
    assert ahead.take() == Decision("topk", 0.01, "allgather")
    with pytest.raises(RuntimeError, match="no decision"):
        ahead.take()


def test_one_pending_call_at_a_time_and_errors_reach_the_training_thread() -> None:
    ahead = DecisionAhead(DecisionClock())
    ahead.submit(Slow(0.0, fail=True), OBS)
    with pytest.raises(RuntimeError, match="pending"):
        ahead.submit(Slow(0.0), OBS)
    ahead.run_idle(1.0)
    with pytest.raises(ValueError, match="planner broke"):
        ahead.finish()


def test_the_emulator_hands_its_wait_to_idle_work_first() -> None:
    started: list[float] = []
    slept: list[float] = []
    p = TracePlayer(PiecewiseTrace.constant(0.002, 1e6))
    p.start()
    emu = HookEmulator("hook", p, sleep=slept.append)

    def idle(budget_s: float) -> float:
        started.append(budget_s)
        return 0.0

    start = emu.begin()
    emu.finish(AlphaBeta(2.0, 1e4), start, idle)  # 14 ms modelled
    assert len(started) == 1 and 0.0 < started[0] <= 0.014
    assert slept and slept[0] <= started[0]


def test_one_parked_helper_serves_every_call_at_the_lowest_priority() -> None:
    """The helper is started once and parked between calls (no thread start inside a
    measured wait), and it runs at nice HELPER_NICE where the platform allows."""
    import os
    import sys

    from realrun.hook.ahead import HELPER_NICE

    seen: list[tuple[int, int | None]] = []

    class Where(Slow):
        def decide(self, obs: Observation) -> Decision:
            tid = threading.get_native_id()
            nice = os.getpriority(os.PRIO_PROCESS, tid) if hasattr(os, "getpriority") else None
            seen.append((tid, nice))
            return super().decide(obs)

    ahead = DecisionAhead(DecisionClock())
    before = threading.active_count()
    main_nice = os.getpriority(os.PRIO_PROCESS, 0) if hasattr(os, "getpriority") else None
    for step in range(3):
        ahead.submit(Where(0.001), Observation(step=step, world_size=2, grad_bytes=100))
        ahead.run_idle(0.01)
        assert ahead.pending
        assert ahead.take() == Decision("topk", 0.01, "allgather")
    assert threading.active_count() == before + 1  # one helper, parked, not three
    assert len({tid for tid, _ in seen}) == 1
    assert seen[0][0] != threading.get_native_id()
    if sys.platform.startswith("linux"):
        assert {nice for _, nice in seen} == {HELPER_NICE}
    if main_nice is not None:
        assert os.getpriority(os.PRIO_PROCESS, 0) == main_nice  # the rank's thread keeps its own
