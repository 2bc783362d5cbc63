"""The link monitor's log-space Kalman filter (:class:`sim.control.monitor_kalman.KalmanLink`):
invariants that any sequence of measurements keeps, and its edge arguments."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.control import monitor_kalman as mk
from sim.control.monitor_kalman import RESOLUTION_SHARE, KalmanLink

_ROW = st.tuples(st.floats(0.0, 2048.0), st.floats(0.0, 1e9), st.floats(1e-7, 100.0))


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(_ROW, min_size=1, max_size=40), alpha=st.floats(1e-7, 1.0),
       bw=st.floats(1e3, 1e12), drift=st.floats(0.0, 1.0), bw_drift=st.floats(0.0, 1.0),
       cap=st.floats(0.05, 4.0))
def test_the_covariance_stays_a_covariance_and_latency_above_its_floor(
        rows: list[tuple[float, float, float]], alpha: float, bw: float, drift: float,
        bw_drift: float, cap: float) -> None:
    """After every measurement: variances >= 0 and at most the cap (or the starting 0.25),
    the correlation within [-1, 1] (up to rounding), each step of the log estimates at most one unit, and latency at or above the
    floor (where it stands on the floor, it is flagged unresolved)."""
    k = KalmanLink(alpha, 1.0 / bw, drift=drift, bandwidth_drift=bw_drift, cap=cap)
    for n_alpha, n_bytes, seconds in rows:
        u0, v0 = k._u, k._v
        k.update(n_alpha, n_bytes, seconds)
        assert k._p11 >= -1e-12 and k._p22 >= -1e-12
        # A variance never exceeds the cap (the prior is capped; a measurement only shrinks it).
        assert max(k._p11, k._p22) <= max(cap * cap, 0.25) * (1 + 1e-12)
        assert k._p12 * k._p12 <= k._p11 * k._p22 * (1 + 1e-9) + 1e-15
        assert abs(k._u - u0) <= 1.0 + 1e-12 and abs(k._v - v0) <= 1.0 + 1e-12
        assert k.alpha_s >= mk._MIN_ALPHA_S * (1 - 1e-12)
        if k._u == math.log(mk._MIN_ALPHA_S):
            assert k.unresolved


@settings(max_examples=100, deadline=None)
@given(n_alpha=st.floats(0.5, 2048.0), n_bytes=st.floats(1.0, 1e9),
       alpha=st.floats(1e-5, 1.0), bw=st.floats(1e3, 1e12))
def test_a_measurement_the_estimate_predicts_leaves_it(n_alpha: float, n_bytes: float,
                                                      alpha: float, bw: float) -> None:
    k = KalmanLink(alpha, 1.0 / bw)
    got = k.update(n_alpha, n_bytes, n_alpha * alpha + n_bytes / bw)
    assert got == (pytest.approx(alpha, rel=1e-9), pytest.approx(1.0 / bw, rel=1e-9))


def test_a_slower_measurement_raises_the_terms_it_is_made_of() -> None:
    """All latency: the surprise goes to latency; all bytes: to bandwidth."""
    k = KalmanLink(1e-3, 1e-9)
    k.update(10.0, 0.0, 2 * 10 * 1e-3)
    assert k.alpha_s > 1e-3 and k.beta == pytest.approx(1e-9)
    k = KalmanLink(1e-3, 1e-9)
    k.update(0.0, 1e7, 2 * 1e7 * 1e-9)
    assert k.beta > 1e-9 and k.alpha_s == pytest.approx(1e-3)


def test_unresolved_clears_once_latency_is_a_real_share_of_a_duration() -> None:
    k = KalmanLink(1e-7, 1e-9)  # below the floor: unresolved from the start
    assert k.unresolved
    k.update(1.0, 1e6, 1e6 * 1e-9)  # latency a vanishing share: stays unresolved
    assert k.unresolved
    for _ in range(40):  # a latency of 1 ms, over two shapes (the split is resolvable)
        k.update(1.0, 1e6, 1e-3 + 1e6 * 1e-9)
        k.update(1.0, 1e4, 1e-3 + 1e4 * 1e-9)
    assert k.alpha_s == pytest.approx(1e-3, rel=0.05) and not k.unresolved
    ta = k.alpha_s
    assert ta >= RESOLUTION_SHARE * (ta + 1e4 * k.beta)


@pytest.mark.parametrize(("alpha", "beta"), [(0.0, 1e-9), (1e-3, 0.0), (-1.0, 1e-9),
                                             (1e-3, math.nan)])
def test_the_starting_estimate_needs_both_terms_positive(alpha: float, beta: float) -> None:
    with pytest.raises(ValueError, match="alpha > 0 and beta > 0"):
        KalmanLink(alpha, beta)
