"""Trace player, hook emulator and kernel shaper timing, with injected clocks (no sleeping)."""

from __future__ import annotations

import math
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from realrun.emulation import HookEmulator
from realrun.shaper import TraceShaper
from realrun.traceplayer import TracePlayer, breakpoints
from sim.collectives import AlphaBeta, ring_allreduce
from sim.errors import InputError
from traces.model import PiecewiseTrace


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.t += s


STEPS = PiecewiseTrace([0.0, 10.0], [0.001, 0.004], [1e6, 2e6])


def test_player_looks_up_the_state_in_force() -> None:
    clk = FakeClock()
    p = TracePlayer(STEPS, clock=clk)
    assert p.elapsed_s() == 0.0 and not p.started
    p.start()
    clk.t += 9.5
    assert p.state_now() == (0.001, 1e6)
    clk.t += 1.0
    assert p.state_now() == (0.004, 2e6)


def test_collective_time_integrates_over_a_bandwidth_change() -> None:
    p = TracePlayer(STEPS, clock=FakeClock())
    p.start()
    # Start at 9 s: 1 latency (1 ms), then 2 MB through a link that doubles its rate at 10 s.
    terms = AlphaBeta(1.0, 2e6)
    got = p.collective_s(terms, start_elapsed_s=9.0)
    # from 9.001 s: 0.999 MB by 10 s, the remaining 1.001 MB at 2 MB/s
    assert got == pytest.approx(0.001 + 0.999 + 1.001e6 / 2e6)


@settings(max_examples=50, deadline=None)
@given(lat=st.floats(0, 0.05), bw=st.floats(1e5, 1e10), nbytes=st.floats(0, 1e9),
       n=st.integers(2, 64))
def test_constant_trace_matches_closed_form(lat: float, bw: float, nbytes: float, n: int) -> None:
    p = TracePlayer(PiecewiseTrace.constant(lat, bw), clock=FakeClock())
    p.start()
    terms = ring_allreduce(n, nbytes)
    assert p.collective_s(terms, 5.0) == pytest.approx(terms.time_s(lat, bw), rel=1e-9, abs=1e-12)


def test_hook_mode_sleeps_up_to_the_modelled_time() -> None:
    clk = FakeClock()
    p = TracePlayer(PiecewiseTrace.constant(0.002, 1e6), clock=clk)
    p.start()
    emu = HookEmulator("hook", p, sleep=clk.sleep, clock=clk)
    terms = AlphaBeta(2.0, 1e4)  # 4 ms + 10 ms
    start = emu.begin()
    clk.t += 0.003  # the real transport took 3 ms
    slept = emu.finish(terms, start)
    assert slept == pytest.approx(0.011)
    assert clk.t - start[0] == pytest.approx(0.014)


def test_hook_mode_serialises_collectives_on_one_link() -> None:
    clk = FakeClock()
    p = TracePlayer(PiecewiseTrace.constant(0.0, 1e6), clock=clk)
    p.start()
    emu = HookEmulator("hook", p, sleep=clk.sleep, clock=clk)
    a, b = emu.begin(), emu.begin()  # two buckets launched together
    emu.finish(AlphaBeta(0.0, 1e4), a)
    emu.finish(AlphaBeta(0.0, 1e4), b)
    assert clk.t - a[0] == pytest.approx(0.02)  # the second waits for the first


def test_netns_mode_adds_only_latency_and_none_adds_nothing() -> None:
    clk = FakeClock()
    p = TracePlayer(PiecewiseTrace.constant(0.005, 1e3), clock=clk)
    p.start()
    emu = HookEmulator("netns", p, sleep=clk.sleep, clock=clk)
    assert emu.finish(AlphaBeta(3.0, 1e9), emu.begin()) == pytest.approx(0.015)
    off = HookEmulator("none", sleep=clk.sleep, clock=clk)
    assert off.finish(AlphaBeta(3.0, 1e9), off.begin()) == 0.0
    with pytest.raises(InputError, match="unknown emulation"):
        HookEmulator("wan")
    with pytest.raises(InputError, match="trace player"):
        HookEmulator("hook")


def test_breakpoints_unroll_a_looping_trace() -> None:
    tr = PiecewiseTrace([0.0, 1.0], [0.0, 0.0], [1.0, 2.0], period_s=3.0)
    got = [(b.at_s, b.bandwidth_Bps) for b in breakpoints(tr, 7.0)]
    assert got == [(0.0, 1.0), (1.0, 2.0), (3.0, 1.0), (4.0, 2.0), (6.0, 1.0)]
    once = PiecewiseTrace([0.0, 1.0], [0.0, 0.0], [1.0, 2.0])
    assert [b.at_s for b in breakpoints(once, math.inf)] == [0.0, 1.0]


def test_shaper_applies_breakpoints_after_the_origin() -> None:
    applied: list[float] = []
    done = threading.Event()
    tr = PiecewiseTrace([0.0, 0.01, 0.02], [0.0, 0.0, 0.0], [1.0, 2.0, 3.0])

    def apply(bp: object) -> None:
        applied.append(bp.bandwidth_Bps)  # type: ignore[attr-defined]
        if len(applied) == 2:
            done.set()

    sh = TraceShaper(tr, apply, horizon_s=1.0)
    import time

    sh.start(time.monotonic())
    assert done.wait(5.0)
    sh.stop()
    assert applied == [2.0, 3.0]  # the initial state is set before the run, not by the shaper
    assert sh.error is None
