"""The aligned trace's placement of a change inside an iteration, and the trace as a real run's
shaper applied it (``link_changes``): no processes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.validate_align import applied_trace, warped_trace
from traces.bundled import resolve_trace
from traces.model import PiecewiseTrace, TraceSet


def _one(ts: TraceSet) -> PiecewiseTrace:
    (tr,) = ts.links.values()
    return tr


def test_a_change_inside_an_iteration_keeps_its_offset_from_the_start() -> None:
    ts = TraceSet({"l": PiecewiseTrace([0.0, 1.0], [1e-3, 1e-3], [100.0, 10.0])})
    real = np.array([0.5, 0.9, 1.3])  # the change at 1.0 is 0.1 s into real iteration 2
    short = np.array([0.5, 0.8, 0.85])  # simulated iteration 2 takes 50 ms only
    long = np.array([0.5, 0.8, 1.5])
    # 0.1 s after the simulated start, wherever the next iteration starts; capped at it
    assert _one(warped_trace(ts, real, long, 5.0)).time_s[1] == pytest.approx(0.9)
    assert _one(warped_trace(ts, real, short, 5.0)).time_s[1] == pytest.approx(0.85)


@settings(max_examples=60, deadline=None)
@given(offset=st.floats(0.0, 0.39), d_real=st.floats(0.4, 1.0), d_a=st.floats(0.4, 2.0),
       d_b=st.floats(0.4, 2.0))
def test_the_placement_does_not_move_with_the_iteration_it_falls_in(
        offset: float, d_real: float, d_a: float, d_b: float) -> None:
    """The feedback the fraction-of-duration warp had: where the simulated iteration holding
    the change ends (which the change itself decides) must not move the change."""
    at = 1.0 + offset
    ts = TraceSet({"l": PiecewiseTrace([0.0, at], [1e-3, 1e-3], [100.0, 10.0])})
    real = np.array([0.5, 1.0, 1.0 + d_real])
    a = _one(warped_trace(ts, real, np.array([0.4, 0.7, 0.7 + d_a]), 5.0)).time_s[1]
    b = _one(warped_trace(ts, real, np.array([0.4, 0.7, 0.7 + d_b]), 5.0)).time_s[1]
    assert a == pytest.approx(0.7 + offset) and b == pytest.approx(0.7 + offset)


def test_applied_trace_moves_bandwidth_changes_to_when_tc_ran() -> None:
    ts = resolve_trace("steps:dur_s=1/1,lat_ms=1/3,bw_mbps=50/10,loop=true")
    changes = [{"at_s": 1.0, "begin_s": 1.2, "end_s": 1.3, "bandwidth_Bps": 10e6 / 8},
               {"at_s": 2.0, "begin_s": 2.01, "end_s": 2.03, "bandwidth_Bps": 50e6 / 8}]
    tr = _one(applied_trace(ts, changes, 6.0))
    # the latency changes on the trace's clock (the hook sleeps it), the rate when tc did
    assert tr.state_at(1.1)[:2] == pytest.approx((3e-3, 50e6 / 8))
    assert tr.state_at(1.26)[:2] == pytest.approx((3e-3, 10e6 / 8))
    assert tr.state_at(2.005)[:2] == pytest.approx((1e-3, 10e6 / 8))
    assert tr.state_at(2.03)[:2] == pytest.approx((1e-3, 50e6 / 8))
    # after the last recorded change the trace's own times
    assert tr.state_at(2.99)[1] == pytest.approx(50e6 / 8)
    assert tr.state_at(3.0)[1] == pytest.approx(10e6 / 8)
    assert tr.state_at(4.5)[1] == pytest.approx(50e6 / 8)
    assert applied_trace(ts, [], 6.0) is ts
    const = resolve_trace("const:lat_ms=1,bw_mbps=20")
    assert applied_trace(const, changes, 6.0).links == const.links
