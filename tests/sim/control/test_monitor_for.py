"""The monitor a run builds for its controller (:func:`sim.control.monitor.monitor_for`), the
pinned split's residual rows, and ``mpc``'s requests for both, in the simulator and the
real-run hook alike."""

from __future__ import annotations

import pytest

from sim.control.monitor import LinkMonitor, monitor_for
from sim.control.monitor_kalman import BANDWIDTH_DRIFT
from sim.control.monitor_split import RESIDUAL_ROWS, pinned_split
from sim.control.registry import make_policy
from sim.errors import InputError


def _row(bw: float, noise_s: float = 0.0) -> tuple[float, float, float]:
    """One 80-byte allgather at 1 ms latency, delayed by ``noise_s``."""
    return 1.0, 80.0, 1e-3 + 80.0 / bw + noise_s


def test_default_monitor_for_every_policy_and_mpc_by_default() -> None:
    for ctl in (make_policy("dc2-aimd"), make_policy("mpc"), object()):
        m = monitor_for(ctl)
        assert (m.smoothing, m.residual_rows, m.window) == ("ewma", RESIDUAL_ROWS, 8)


def test_mpc_asks_for_its_monitor() -> None:
    m = monitor_for(make_policy("mpc", monitor_smoothing="none", monitor_residual_rows=6))
    assert (m.smoothing, m.residual_rows) == ("none", 6)
    m = monitor_for(make_policy("mpc", monitor_smoothing="min"))
    assert (m.smoothing, m.residual_rows) == ("min", RESIDUAL_ROWS)


@pytest.mark.parametrize(
    "params",
    [{"monitor_smoothing": "median"}, {"monitor_residual_rows": 9},
     {"monitor_residual_rows": -1}, {"monitor_residual_rows": True}],
)
def test_mpc_rejects_bad_monitor_requests(params: dict[str, object]) -> None:
    with pytest.raises(InputError, match="monitor_"):
        make_policy("mpc", **params)


def test_residual_rows_validation() -> None:
    with pytest.raises(ValueError, match="residual_rows"):
        LinkMonitor(residual_rows=0)
    with pytest.raises(ValueError, match="residual_rows"):
        LinkMonitor(window=4, residual_rows=5)
    with pytest.raises(ValueError, match="residual_rows"):
        pinned_split([_row(1e6)], 1e-3, 0)


def test_more_residual_rows_see_through_frequent_delays_and_see_a_slow_link_later() -> None:
    """Three delayed collectives in a row read as a slow link with three rows; with six, one
    clean collective among the last six keeps the fast link, and a real slow-down shows once it
    fills all six."""
    fast, slow = 1.25e6, 6.25e4
    clean = _row(fast)
    late = _row(fast, noise_s=2e-3)
    window = [clean, late, clean, late, late, late]
    assert pinned_split(window, 1e-3, 3)[1] > 10.0 / fast  # type: ignore[index]
    got = pinned_split(window, 1e-3, 6)
    assert got is not None and got[1] == pytest.approx(1.0 / fast)
    m3 = LinkMonitor(smoothing="none", latency_reference_s=1e-3, residual_rows=3)
    m6 = LinkMonitor(smoothing="none", latency_reference_s=1e-3, residual_rows=6)
    for r in [clean] * 8:
        m3.observe(*r)
        m6.observe(*r)
    seen3, seen6 = [], []
    for _ in range(6):
        m3.observe(*_row(slow))
        m6.observe(*_row(slow))
        seen3.append(m3.estimate()[1])
        seen6.append(m6.estimate()[1])
    assert seen3[2] == pytest.approx(slow) and seen3[1] == pytest.approx(fast)
    assert seen6[5] == pytest.approx(slow) and seen6[4] == pytest.approx(fast)


def test_the_hook_builds_the_monitor_its_controller_asks_for() -> None:
    from realrun.hook.state import CompressionHookState

    st = CompressionHookState(
        controller=make_policy("mpc", monitor_smoothing="none", monitor_residual_rows=5),
        world_size=1, rank=0,
    )
    assert (st.monitor.smoothing, st.monitor.residual_rows) == ("none", 5)
    assert CompressionHookState(controller=make_policy("mpc"), world_size=1,
                                rank=0).monitor.smoothing == "ewma"


def test_the_simulator_builds_the_monitor_its_controller_asks_for() -> None:
    from sim.engine import _make_monitor

    m = _make_monitor(make_policy("mpc", monitor_smoothing="none"))
    assert m.smoothing == "none"
    assert _make_monitor(make_policy("mpc")).smoothing == "ewma"


def test_mpc_asks_for_a_bandwidth_drift_opt_in() -> None:
    assert monitor_for(make_policy("mpc")).bandwidth_drift == BANDWIDTH_DRIFT
    assert monitor_for(make_policy("mpc", monitor_bandwidth_drift=0.1)).bandwidth_drift == 0.1
    for bad in (-0.1, 1.5):
        with pytest.raises(InputError, match="monitor_bandwidth_drift"):
            make_policy("mpc", monitor_bandwidth_drift=bad)
    with pytest.raises(ValueError, match="bandwidth_drift"):
        LinkMonitor(bandwidth_drift=0.0)


def test_a_larger_bandwidth_drift_books_a_byte_heavy_slowdown_as_bandwidth() -> None:
    """Rows of two shapes resolve the split; then the byte-heavy shape slows 3x (the bandwidth
    fell to a third). With the default drift the filter raises the latency more than with a
    drift equal to the latency's, which lowers the bandwidth instead."""
    def run(drift: float) -> tuple[float, float]:
        m = LinkMonitor(bandwidth_drift=drift)
        lat, beta = 0.05, 1.0 / 1e9
        for _ in range(8):  # two shapes, one link state: an exact split
            m.observe(6.0, 1e6, 6 * lat + 1e6 * beta)
            m.observe(6.0, 3e8, 6 * lat + 3e8 * beta)
        for _ in range(6):  # the byte-heavy shape only, the bandwidth a third
            m.observe(6.0, 3e8, 6 * lat + 3e8 * 3 * beta)
        est_lat, est_bw = m.estimate()
        assert est_lat is not None and est_bw is not None
        return est_lat, est_bw

    lat_default, bw_default = run(BANDWIDTH_DRIFT)
    lat_equal, bw_equal = run(0.1)
    assert lat_equal < lat_default
    assert bw_equal < bw_default
