"""The monitor when one shape of collective cannot split latency from bandwidth: the
identifiability test, the split pinned at a latency reference, and the monitor using it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.control.monitor import LinkMonitor
from sim.control.monitor_split import (
    RESIDUAL_ROWS,
    RESOLUTION_REL,
    SPLIT_SINE,
    bandwidth_log_sd,
    identifiable,
    pinned_split,
)


def _row(alpha: float, bw: float, n_alpha: float, n_bytes: float, noise_s: float = 0.0
         ) -> tuple[float, float, float]:
    return n_alpha, n_bytes, n_alpha * alpha + n_bytes / bw + noise_s


def test_one_shape_is_not_identifiable_two_shapes_are() -> None:
    same = [_row(1e-3, 1e6, 1.0, 80.0), _row(1e-3, 5e4, 1.0, 80.0), _row(2e-3, 1e6, 2.0, 160.0)]
    assert not identifiable(same)  # (1, 80) and (2, 160) are one direction
    assert identifiable([*same, _row(1e-3, 1e6, 1.0, 3840.0)])
    assert not identifiable([])
    assert not identifiable([(0.0, 80.0, 1e-3)])
    assert not identifiable([(1.0, 0.0, 1e-3)] * 3)  # no bytes: nothing to split


@pytest.mark.parametrize("scale", [1e-6, 1e-3, 1.0, 1e4])
def test_identifiable_at_the_split_sine_whatever_the_units(scale: float) -> None:
    """Rows ``(cos t, 1)`` and ``(sin t, 0)``: the latency column is at angle ``t`` to the bytes
    column, so the window resolves the split iff ``sin t >= SPLIT_SINE``, at any scale of the
    counts (a tiny ``n_alpha`` is a shape like any other)."""
    for sine, expect in ((SPLIT_SINE * 0.98, False), (SPLIT_SINE * 1.02, True)):
        cos = math.sqrt(1.0 - sine * sine)
        rows = [(cos * scale, 1.0 * scale, 1e-3), (sine * scale, 0.0, 1e-3)]
        assert identifiable(rows) is expect


@settings(max_examples=60, deadline=None)
@given(
    alpha=st.floats(1e-5, 1e-1),
    bw=st.floats(1e4, 1e10),
    n_bytes=st.floats(1.0, 1e8),
)
def test_pinned_split_is_exact_on_a_resolved_byte_term(alpha: float, bw: float,
                                                       n_bytes: float) -> None:
    rows = [_row(alpha, bw, 1.0, n_bytes)] * 4
    if n_bytes / bw < RESOLUTION_REL * (alpha + n_bytes / bw):
        return  # below the resolution: checked in the next test
    got = pinned_split(rows, alpha)
    assert got is not None
    assert got[0] == alpha
    assert got[1] == pytest.approx(1.0 / bw, rel=1e-9)


def test_an_unresolved_byte_term_reads_as_the_resolution() -> None:
    # 80 bytes at 1 GB/s next to 1 ms: 80 ns, far below 5% of the duration.
    t = 1e-3 + 80 / 1e9
    got = pinned_split([(1.0, 80.0, t)], 1e-3)
    assert got is not None
    assert got[1] == pytest.approx(RESOLUTION_REL * t / 80.0)
    # A reference above the duration (noise under it) is clamped the same way.
    got = pinned_split([(1.0, 80.0, t)], 2e-3)
    assert got is not None and got[1] == pytest.approx(RESOLUTION_REL * t / 80.0)


def test_a_single_spike_does_not_read_as_a_slow_link() -> None:
    clean = _row(1e-3, 6.25e4, 1.0, 80.0)
    spike = _row(1e-3, 6.25e4, 1.0, 80.0, noise_s=20e-3)
    got = pinned_split([clean] * 5 + [spike], 1e-3)
    assert got is not None and got[1] == pytest.approx(1 / 6.25e4)
    # A slow-down seen in RESIDUAL_ROWS rows in a row is the link.
    slow = _row(1e-3, 1e4, 1.0, 80.0)
    got = pinned_split([clean] * 5 + [slow] * RESIDUAL_ROWS, 1e-3)
    assert got is not None and got[1] == pytest.approx(1 / 1e4)


def test_pinned_split_edge_cases() -> None:
    assert pinned_split([(1.0, 0.0, 1e-3)], 1e-3) is None
    with pytest.raises(ValueError, match="reference"):
        pinned_split([(1.0, 80.0, 1e-3)], -1.0)
    # A zero latency reference is a link of bytes alone; one residual row is the newest.
    assert pinned_split([(1.0, 80.0, 1e-3)], 0.0) == (0.0, 1e-3 / 80.0)
    rows = [(1.0, 80.0, 1e-3), (1.0, 80.0, 2e-3)]
    assert pinned_split(rows, 0.0, residual_rows=1) == (0.0, 2e-3 / 80.0)
    assert pinned_split(rows, 0.0, residual_rows=2) == (0.0, 1e-3 / 80.0)
    with pytest.raises(ValueError, match="residual_rows"):
        pinned_split(rows, 0.0, residual_rows=0)


def test_monitor_tracks_a_bandwidth_step_through_one_shape_with_a_reference() -> None:
    """One shape (80-byte allgathers at 1 ms): without a reference the filter's prior splits a
    bandwidth step into latency; with one, latency stays and the bandwidth follows."""
    plain = LinkMonitor(smoothing="none")
    pinned = LinkMonitor(smoothing="none", latency_reference_s=1e-3)
    for bw in [1.25e6] * 30 + [6.25e4] * 30:
        for m in (plain, pinned):
            m.observe(*_row(1e-3, bw, 1.0, 80.0))
    lat, got_bw = pinned.estimate()
    assert lat == pytest.approx(1e-3)
    assert got_bw == pytest.approx(6.25e4)
    assert not pinned.split_identifiable
    plain_lat, plain_bw = plain.estimate()
    assert plain_lat is not None and plain_bw is not None
    assert abs(math.log(plain_bw / 6.25e4)) > math.log(2.0)  # the prior's split is far off


def test_a_faster_collective_lowers_the_reference() -> None:
    m = LinkMonitor(smoothing="none", latency_reference_s=3e-3)
    m.observe(*_row(1e-3, 1e6, 1.0, 80.0))
    assert m.latency_reference_s == pytest.approx(1e-3 + 80 / 1e6)


def test_with_a_reference_every_window_is_split_at_it() -> None:
    """Shapes that resolve the split too: the latency is the reference, the bandwidth the least
    residual's, as a real hook's noisy windows are read (only a simulator's windows are ever
    exact); without a reference the data's split."""
    sizes = (9600.0, 38400.0, 19200.0)
    for ref in (1e-3, 2e-3):
        m = LinkMonitor(smoothing="none", latency_reference_s=ref)
        for nbytes in sizes:
            m.observe(*_row(1e-3, 1e6, 1.0, nbytes))
        assert m.split_identifiable
        lat, bw = m.estimate()
        assert lat == pytest.approx(ref)
        betas = [(nbytes / 1e6 + 1e-3 - ref) / nbytes for nbytes in sizes]
        assert bw == pytest.approx(1.0 / min(betas))
    plain = LinkMonitor(smoothing="none")
    for nbytes in sizes:
        plain.observe(*_row(1e-3, 1e6, 1.0, nbytes))
    assert plain.estimate() == pytest.approx((1e-3, 1e6))


def test_two_rows_do_not_override_the_reference() -> None:
    """Two rows of two shapes are always solved exactly, noise included: with a reference they
    are split at it (a noisy first pair gave a real run 12 ms of latency on a 1 ms link)."""
    m = LinkMonitor(smoothing="none", latency_reference_s=1e-3)
    m.observe(*_row(1e-3, 1e6, 1.0, 38400.0 * 1.3))  # a slow first call: 30% extra
    m.observe(*_row(1e-3, 1e6, 1.0, 9600.0))
    lat, _ = m.estimate()
    assert lat == pytest.approx(1e-3)


def test_noisy_close_shapes_keep_a_bandwidth_step_out_of_latency() -> None:
    """One bucket at densities a few percent apart, durations with 5% timing noise, then the
    link's rate falls 5x: with a reference the latency stays at it and the bandwidth follows;
    the filter alone books much of the step as latency."""
    rng = np.random.default_rng(3)
    plain = LinkMonitor()
    pinned = LinkMonitor(latency_reference_s=1e-3)
    n_alpha = 6.0
    for bw in [6.25e6] * 40 + [1.25e6] * 40:
        nbytes = 2e5 * (1.0 + 0.1 * rng.random())
        t = (n_alpha * 1e-3 + nbytes / bw) * (1.0 + 0.05 * rng.random())
        for m in (plain, pinned):
            m.observe(n_alpha, nbytes, t)
    lat, bw_est = pinned.estimate()
    assert lat == pytest.approx(1e-3)
    assert bw_est is not None and abs(math.log(bw_est / 1.25e6)) < math.log(1.2)
    plain_lat, _ = plain.estimate()
    assert plain_lat is not None and plain_lat > 3e-3


def test_reference_survives_reset_and_is_validated() -> None:
    m = LinkMonitor(latency_reference_s=1e-3)
    m.reset()
    assert m.latency_reference_s == 1e-3
    m.set_latency_reference(None)
    assert m.latency_reference_s is None
    for bad in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="latency reference"):
            m.set_latency_reference(bad)


def test_a_window_of_delayed_rows_does_not_linger_under_the_default_smoothing() -> None:
    """With a reference the split is already filtered (least residual of its rows), so the
    default ``ewma`` smoothing leaves it alone: a window whose rows were all delayed by a
    transport hiccup (4 ms on a 1.16 ms collective) reads low for that window only, and the
    first clean row after it brings the estimate back. An EWMA of beta would hold it down
    for several rows; without a reference the default still smooths."""
    pinned = LinkMonitor(latency_reference_s=1e-3, residual_rows=2)
    plain = LinkMonitor()
    assert pinned.smoothing == plain.smoothing == "ewma"
    clean = _row(1e-3, 1.25e6, 1.0, 80.0)
    spiked = _row(1e-3, 1.25e6, 1.0, 80.0, noise_s=4e-3)
    for row in [clean] * 6 + [spiked] * 2:
        pinned.observe(*row)
    assert pinned.estimate()[1] < 0.05 * 1.25e6  # both rows delayed: read as a slow link
    pinned.observe(*clean)
    assert pinned.estimate()[1] == pytest.approx(1.25e6)
    for row in [_row(1e-3, 1.25e6, 1.0, 80.0), _row(1e-3, 1.25e6, 1.0, 4000.0)] * 4:
        plain.observe(*row)
    before = plain.estimate()[1]
    plain.observe(*_row(1e-3, 6.25e4, 1.0, 4000.0))
    after = plain.estimate()[1]
    assert before is not None and after is not None
    # Half way (in beta) from the old bandwidth to the new one: smoothed.
    assert 6.25e4 * 1.5 < after < before


def test_bandwidth_log_sd_closed_forms() -> None:
    """Rows of one shape: inf (latency free), the byte shares' resolution with a reference;
    two shapes of byte shares 1/2 and 0 (latency free): resolution / sqrt(det / s11)."""
    alpha, beta = 1e-3, 1e-6
    one = [(1.0, 1000.0, 0.0)] * 4  # byte share 1/2 in each row
    assert bandwidth_log_sd(one, alpha, beta) == math.inf
    assert bandwidth_log_sd(one, alpha, beta, latency_known=True) == pytest.approx(
        RESOLUTION_REL / math.sqrt(4 * 0.25))
    two = [(1.0, 1000.0, 0.0), (1.0, 0.0, 0.0)]  # shares (1/2, 1/2) and (1, 0)
    s11, s22, s12 = 0.25 + 1.0, 0.25, 0.25
    assert bandwidth_log_sd(two, alpha, beta) == pytest.approx(
        RESOLUTION_REL / math.sqrt((s11 * s22 - s12 * s12) / s11))
    assert bandwidth_log_sd([], alpha, beta) == math.inf
    assert bandwidth_log_sd([(0.0, 0.0, 0.0)], alpha, beta) == math.inf


_SHAPE = st.tuples(st.floats(0.0, 64.0), st.floats(0.0, 1e9))


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(_SHAPE, min_size=1, max_size=8), extra=_SHAPE,
       alpha=st.floats(1e-6, 1.0), bw=st.floats(1e5, 1e11), known=st.booleans())
def test_bandwidth_log_sd_never_grows_with_a_row_and_ignores_the_durations(
        rows: list[tuple[float, float]], extra: tuple[float, float], alpha: float, bw: float,
        known: bool) -> None:
    """A row adds information, never removes it; and the value depends on the shapes and the
    estimate only (the durations themselves do not enter)."""
    window = [(a, b, 1.0) for a, b in rows]
    sd = bandwidth_log_sd(window, alpha, 1.0 / bw, known)
    more = bandwidth_log_sd([*window, (*extra, 1.0)], alpha, 1.0 / bw, known)
    assert more <= sd * (1 + 1e-6) or sd == math.inf
    assert bandwidth_log_sd([(a, b, 7.0) for a, b in rows], alpha, 1.0 / bw, known) == sd


def test_the_monitor_reports_how_well_its_window_pins_the_bandwidth() -> None:
    """inf before any estimate and on rows of one shape; finite once a second shape with a
    real byte term arrives; with a latency reference one shape is enough (latency is known)."""
    alpha, bw = 1e-3, 1e8
    m = LinkMonitor()
    assert m.bandwidth_log_sd == math.inf
    for _ in range(4):
        m.observe(*_row(alpha, bw, 10.0, 1e5))
    assert m.bandwidth_log_sd > 1e3
    m.observe(*_row(alpha, bw, 10.0, 1e7))
    free = m.bandwidth_log_sd
    assert free < 1.0
    ref = LinkMonitor(latency_reference_s=alpha)
    for _ in range(4):
        ref.observe(*_row(alpha, bw, 10.0, 1e5))
    assert ref.bandwidth_log_sd < 1.0
