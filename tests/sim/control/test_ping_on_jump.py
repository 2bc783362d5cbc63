"""``ping_on_jump``: a ping when the monitor's latency estimate jumps, and the monitor re-split
at the measured latency (:class:`sim.control.pings.LatencyJumpCheck`,
:meth:`sim.control.monitor.LinkMonitor.anchor_latency`), the same rule in the simulator and in
the real hook (:class:`realrun.hook.pings.PingSchedule`)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from realrun.hook.pings import PingSchedule
from sim.control.monitor import LinkMonitor
from sim.control.pings import LatencyJumpCheck
from sim.errors import InputError
from sim.runner import SimConfig, run_simulation

pos = st.floats(1e-6, 10.0, allow_nan=False)


@given(ratio=st.floats(1.01, 100.0), first=pos, later=st.lists(pos, max_size=20))
def test_a_ping_is_due_exactly_when_the_estimate_left_the_anchor_by_the_ratio(
        ratio: float, first: float, later: list[float]) -> None:
    check = LatencyJumpCheck(ratio)
    assert not check.due(None) and not check.due(0.0)
    assert not check.due(first) and check.anchor_s == first  # the first estimate anchors
    for lat in later:
        due = check.due(lat)
        assert due == (lat > ratio * check.anchor_s or lat * ratio < check.anchor_s)
        if due:
            check.measured(lat / 2.0)
            assert check.anchor_s == lat / 2.0
    assert check.pings <= len(later)


@pytest.mark.parametrize("bad", [1.0, 0.5, 0.0, -3.0, math.inf, math.nan])
def test_the_ratio_must_be_finite_and_above_one(bad: float) -> None:
    with pytest.raises(ValueError, match="ping_on_jump"):
        LatencyJumpCheck(bad)


def _one_shape_monitor() -> LinkMonitor:
    m = LinkMonitor(smoothing="none")
    for _ in range(6):
        m.observe(10.0, 1e6, 0.2)  # one shape: the split is not the data's
    return m


def test_anchoring_re_splits_the_newest_row_at_the_measured_latency() -> None:
    m = _one_shape_monitor()
    m.anchor_latency(0.005)
    lat, bw = m.estimate()
    assert lat == 0.005 and bw == pytest.approx(1e6 / (0.2 - 10 * 0.005))
    assert m.split_source == "reference"
    # The window restarted from that split: the same row again keeps it.
    m.observe(10.0, 1e6, 0.2)
    lat2, bw2 = m.estimate()
    assert lat2 == pytest.approx(0.005, rel=1e-6) and bw2 == pytest.approx(bw, rel=1e-6)
    # A ping longer than the row's latency share leaves bytes a thousandth of the row.
    m.anchor_latency(0.05)
    assert m.estimate() == (0.05, pytest.approx(1e6 / (1e-3 * 0.2)))
    with pytest.raises(ValueError, match="anchor"):
        m.anchor_latency(0.0)


def test_anchoring_moves_a_latency_reference_instead() -> None:
    m = LinkMonitor(latency_reference_s=0.001)
    m.observe(10.0, 1e6, 0.2)
    m.anchor_latency(0.004)
    assert m.latency_reference_s == 0.004


def test_the_hooks_schedule_pings_on_jumps_and_anchors_the_monitor() -> None:
    calls: list[int] = []

    def measure(count: int) -> float:
        calls.append(count)
        return 0.002

    sched = PingSchedule(0, 0, 4.0)
    m = _one_shape_monitor()
    first = m.estimate()[0]
    assert first is not None
    sched.before_step(0, 1, m, measure)  # warm-up: nothing
    sched.before_step(1, 1, m, measure)  # the first estimate anchors the check
    assert calls == [] and sched.jump_check is not None and sched.jump_check.anchor_s == first
    m.anchor_latency(first * 5.0)  # as if the estimate had jumped fivefold
    sched.before_step(2, 1, m, measure)
    assert calls == [1] and m.estimate()[0] == 0.002 and sched.jump_check.anchor_s == 0.002
    sched.before_step(3, 1, m, measure)
    assert calls == [1]  # no jump since
    # With latency_pings, the same count as the scheduled pings (a reference then moves).
    both = PingSchedule(3, 0, 4.0)
    m2 = _one_shape_monitor()
    both.before_step(1, 1, m2, measure)
    assert calls == [1, 3] and m2.latency_reference_s == 0.002
    for bad in ({"latency_pings": -1}, {"ping_every": True}, {"ping_on_jump": 1.0}):
        with pytest.raises(InputError):
            PingSchedule(**bad)  # type: ignore[arg-type]


BASE: dict[str, Any] = {
    "workload": "digits-cnn", "workers": 16, "iterations": 200, "convergence": "off",
    "warmup_steps": 1, "policy": "fixed", "monitor": "on",
    "policy_params": {"density": 0.05, "compressor": "topk", "collective": "allgather"},
}


def test_config_field_is_validated_and_left_out_when_off() -> None:
    cfg = SimConfig.from_dict({**BASE, "trace": "const:lat_ms=1,bw_mbps=50"})
    assert "ping_on_jump" not in cfg.to_dict()
    on = SimConfig.from_dict({**cfg.to_dict(), "ping_on_jump": 5})
    assert on.to_dict()["ping_on_jump"] == 5.0 and SimConfig.from_dict(on.to_dict()) == on
    for bad in (1.0, -2.0, True, "5", math.inf):
        with pytest.raises(InputError, match="ping_on_jump"):
            SimConfig.from_dict({**cfg.to_dict(), "ping_on_jump": bad})


def test_a_constant_link_never_pings() -> None:
    cfg = {**BASE, "trace": "const:lat_ms=1,bw_mbps=50"}
    plain = run_simulation(SimConfig.from_dict(cfg))[0]
    jump = run_simulation(SimConfig.from_dict({**cfg, "ping_on_jump": 3.0}))[0]
    assert plain.equals(jump)


def test_a_latency_step_read_on_one_shape_is_checked_by_one_ping() -> None:
    """One collective shape and a link whose latency steps 1 -> 20 ms while its bandwidth
    halves: the ping's measured 20 ms is what the monitor holds afterwards."""
    cfg = {**BASE, "trace": "steps:dur_s=1/1000,lat_ms=1/20,bw_mbps=50/25"}
    plain = run_simulation(SimConfig.from_dict(cfg))[0]
    jump = run_simulation(SimConfig.from_dict({**cfg, "ping_on_jump": 3.0}))[0]
    extra = jump["iter_s"].to_numpy() - plain["iter_s"].to_numpy()
    pinged = np.nonzero(np.abs(extra) > 1e-12)[0]
    assert 1 <= len(pinged) <= 3 and np.all(extra[pinged] > 0.0)
    after = jump["start_s"].to_numpy() > jump["start_s"].iloc[pinged[-1]] + 1e-9
    assert after.sum() > 20
    assert np.allclose(jump["est_latency_s"].to_numpy()[after], 0.020, rtol=0.05)
    assert np.allclose(jump["est_bandwidth_Bps"].to_numpy()[after], 25e6 / 8, rtol=0.05)
    # Unchecked, the one shape's split books much of the bandwidth fall as latency and reads
    # the link as several times faster than it is.
    late = plain["start_s"].to_numpy() > 2.0
    assert np.all(plain["est_bandwidth_Bps"].to_numpy()[late] > 5 * 25e6 / 8)
