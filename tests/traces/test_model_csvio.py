"""PiecewiseTrace / TraceSet semantics and the canonical CSV / Parquet formats."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.errors import InputError
from traces.csvio import read_trace, write_trace_csv, write_trace_parquet
from traces.model import PiecewiseTrace, TraceSet, bottleneck

finite_pos = st.floats(min_value=1e3, max_value=1e11, allow_nan=False, allow_infinity=False)
finite_lat = st.floats(min_value=0.0, max_value=1.0, allow_nan=False, allow_infinity=False)


@st.composite
def traces(draw: st.DrawFn, loop: bool | None = None) -> PiecewiseTrace:
    n = draw(st.integers(min_value=1, max_value=8))
    gaps = draw(st.lists(st.floats(min_value=1e-3, max_value=50.0), min_size=n - 1, max_size=n - 1))
    t = np.concatenate([[0.0], np.cumsum(gaps)]) if n > 1 else np.array([0.0])
    lat = draw(st.lists(finite_lat, min_size=n, max_size=n))
    bw = draw(st.lists(finite_pos, min_size=n, max_size=n))
    do_loop = draw(st.booleans()) if loop is None else loop
    period = float(t[-1]) + draw(st.floats(min_value=1e-2, max_value=10.0)) if do_loop else None
    return PiecewiseTrace(t, lat, bw, period_s=period, name="h")


def _same(a: PiecewiseTrace, b: PiecewiseTrace) -> None:
    assert np.array_equal(a.time_s, b.time_s)
    assert np.array_equal(a.latency_s, b.latency_s)
    assert np.array_equal(a.bandwidth_Bps, b.bandwidth_Bps)
    assert np.array_equal(a.loss, b.loss)
    assert a.period_s == b.period_s


# ---------------------------------------------------------------- round trips
@settings(max_examples=25, deadline=None)
@given(tr=traces())
def test_csv_and_parquet_round_trip_exactly(
    tmp_path_factory: pytest.TempPathFactory, tr: PiecewiseTrace
) -> None:
    d = tmp_path_factory.mktemp("rt")
    ts = TraceSet(
        {
            "a": tr,
            "b": PiecewiseTrace(
                tr.time_s, tr.latency_s * 2, tr.bandwidth_Bps, period_s=tr.period_s
            ),
        },
        name="x",
    )
    for path, write in ((d / "t.csv", write_trace_csv), (d / "t.parquet", write_trace_parquet)):
        write(ts, path)
        back = read_trace(path)
        assert back.name == "x"
        assert back.labels == ["a", "b"]
        for lab in ts.labels:
            _same(ts.links[lab], back.links[lab])


def test_shared_trace_with_loss_round_trips(tmp_path: Path) -> None:
    tr = PiecewiseTrace([0.0, 1.5], [1e-3, 2e-3], [1e9, 5e8], [0.0, 0.01], period_s=3.0, name="l")
    write_trace_csv(TraceSet.single(tr), tmp_path / "l.csv")
    text = (tmp_path / "l.csv").read_text()
    assert "loss" in text and "link" not in text
    back = read_trace(tmp_path / "l.csv")
    assert back.is_shared
    _same(tr, back.links["*"])


# ---------------------------------------------------------------- validation
@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("", "empty"),
        ("# name: x\n", "empty"),
        ("time_s,latency_s,bandwidth_Bps\n", "no rows"),
        ("time,latency,bandwidth\n0,1,10\n", "missing column"),
        ("time_s,latency_ms,bandwidth_Bps\n0,1,10\n", "missing column"),
        ("time_s,latency_s,bandwidth_Bps\n0,0.001,-5\n", "bandwidth_Bps must be > 0"),
        ("time_s,latency_s,bandwidth_Bps\n0,0.001,0\n", "bandwidth_Bps must be > 0"),
        (
            "time_s,latency_s,bandwidth_Bps\n0,0.001,1e9\n2,0.001,1e9\n1,0.001,1e9\n",
            "strictly increasing",
        ),
        ("time_s,latency_s,bandwidth_Bps\n0,abc,1e9\n", "not a number"),
        ("time_s,latency_s,bandwidth_Bps\n0,0.001\n", "expected 3 fields"),
        ("time_s,latency_s,bandwidth_Bps\n1,0.001,1e9\n", "start at 0, got 1.0$"),
        ("time_s,latency_s,bandwidth_Bps\n0,-0.001,1e9\n", "latency_s must be >= 0"),
        ("# period_s: 0.5\ntime_s,latency_s,bandwidth_Bps\n0,0.001,1e9\n1,0.001,1e9\n", "period_s"),
    ],
)
def test_malformed_csv_raises_input_error(tmp_path: Path, content: str, needle: str) -> None:
    p = tmp_path / "bad.csv"
    p.write_text(content)
    with pytest.raises(InputError, match=needle):
        read_trace(p)


def test_missing_file_and_bad_parquet(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such"):
        read_trace(tmp_path / "nope.csv")
    (tmp_path / "x.parquet").write_bytes(b"not parquet")
    with pytest.raises(InputError, match="parquet"):
        read_trace(tmp_path / "x.parquet")


# ---------------------------------------------------------------- lookups and looping
def test_periodic_lookup_repeats() -> None:
    tr = PiecewiseTrace([0.0, 1.0], [1e-3, 5e-3], [100.0, 50.0], period_s=3.0)
    for k in range(4):
        assert tr.state_at(0.5 + 3 * k)[:2] == (1e-3, 100.0)
        assert tr.state_at(2.9 + 3 * k)[:2] == (5e-3, 50.0)
    # One period carries 1 s * 100 + 2 s * 50 bytes.
    assert tr.bytes_between(0.0, 3.0) == pytest.approx(200.0)
    assert tr.bytes_between(0.0, 30.0) == pytest.approx(2000.0)
    assert tr.transfer_end_s(0.0, 400.0) == pytest.approx(6.0)


def test_holding_trace_keeps_last_state() -> None:
    tr = PiecewiseTrace([0.0, 1.0], [1e-3, 5e-3], [100.0, 50.0])
    assert tr.state_at(1e6)[:2] == (5e-3, 50.0)
    assert tr.transfer_end_s(0.0, 150.0) == pytest.approx(2.0)


def test_period_equal_to_last_breakpoint_drops_it() -> None:
    tr = PiecewiseTrace([0.0, 1.0, 2.0], [1.0, 2.0, 3.0], [1.0, 2.0, 3.0], period_s=2.0)
    assert tr.n_segments == 2
    assert tr.latency_at(2.5) == 1.0
    for got in (tr.time_s, tr.latency_s, tr.bandwidth_Bps, tr.loss):
        assert len(got) == 2
    assert tr.time_s.tolist() == [0.0, 1.0] and tr.bandwidth_Bps.tolist() == [1.0, 2.0]


def test_period_offset_is_the_start_of_the_period_in_force() -> None:
    tr = PiecewiseTrace([0.0, 4.0], [1.0, 2.0], [1.0, 2.0], period_s=10.0)
    assert [tr.period_offset_s(t) for t in (0.0, 9.9, 10.0, 25.0)] == [0.0, 0.0, 10.0, 20.0]
    assert PiecewiseTrace([0.0, 4.0], [1.0, 2.0], [1.0, 2.0]).period_offset_s(25.0) == 0.0


@pytest.mark.parametrize(("times", "lat", "bw", "loss", "needle"), [
    ([0.0, 1.0, 1.0, 2.0], [0.0] * 4, [1.0] * 4, None, "strictly increasing (row 2)"),
    ([0.0, 1.0, 2.0], [0.0, 0.0, -1e-3], [1.0] * 3, None, "latency_s must be >= 0 (row 2)"),
    ([0.0, 1.0], [0.0, 0.0], [1.0, 1.0], [0.0, 1.0], "loss must be in [0, 1)"),
    ([0.0, 1.0], [0.0, 0.0], [1.0, 1.0], [-0.1, 0.0], "loss must be in [0, 1)"),
])
def test_a_bad_trace_names_its_first_bad_row(times: list[float], lat: list[float],
                                             bw: list[float], loss: list[float] | None,
                                             needle: str) -> None:
    with pytest.raises(InputError) as err:
        PiecewiseTrace(times, lat, bw, loss)
    assert needle in str(err.value)
    assert PiecewiseTrace([0.0, 1.0], [0.0, 0.0], [1.0, 1.0], [0.0, 0.999]).loss[1] == 0.999


# ---------------------------------------------------------------- transfer_end_s properties
@settings(max_examples=60, deadline=None)
@given(tr=traces(), start=st.floats(0, 200), a=st.floats(0, 1e11), b=st.floats(0, 1e11))
def test_transfer_monotone_and_additive(
    tr: PiecewiseTrace, start: float, a: float, b: float
) -> None:
    ta = tr.transfer_end_s(start, a)
    tab = tr.transfer_end_s(start, a + b)
    assert ta >= start
    assert tab >= ta  # more bytes never finish earlier
    # Pushing a, then b from where a ended, ends where pushing a+b does.
    chained = tr.transfer_end_s(ta, b)
    assert chained == pytest.approx(tab, rel=1e-9, abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(tr=traces(), start=st.floats(0, 200), nbytes=st.floats(1, 1e11), factor=st.floats(1.0, 10.0))
def test_faster_trace_is_never_slower(
    tr: PiecewiseTrace, start: float, nbytes: float, factor: float
) -> None:
    fast = PiecewiseTrace(tr.time_s, tr.latency_s, tr.bandwidth_Bps * factor, period_s=tr.period_s)
    assert fast.transfer_end_s(start, nbytes) <= tr.transfer_end_s(start, nbytes) * (1 + 1e-12)


@settings(max_examples=60, deadline=None)
@given(tr=traces(), start=st.floats(0, 200), nbytes=st.floats(1, 1e11))
def test_transfer_carries_exactly_the_bytes(
    tr: PiecewiseTrace, start: float, nbytes: float
) -> None:
    end = tr.transfer_end_s(start, nbytes)
    # bytes_between differences cumulative sums, so its rounding scales with bytes since t=0;
    # and ``end`` is a float time: one unit in its last place carries up to bandwidth x ulp bytes.
    scale = tr.bytes_between(0.0, end)
    time_res = 2.0 * float(np.max(tr.bandwidth_Bps)) * float(np.spacing(end))
    assert tr.bytes_between(start, end) == pytest.approx(
        nbytes, rel=1e-9, abs=1e-12 * scale + time_res
    )


def test_constant_transfer_is_closed_form() -> None:
    tr = PiecewiseTrace.constant(1e-3, 1.25e9)
    assert tr.transfer_end_s(3.0, 1e8) == 3.0 + 1e8 / 1.25e9


# ---------------------------------------------------------------- bottleneck
@settings(max_examples=40, deadline=None)
@given(trs=st.lists(traces(loop=False), min_size=1, max_size=4), t=st.floats(0, 500))
def test_bottleneck_is_pointwise_worst(trs: list[PiecewiseTrace], t: float) -> None:
    bn = bottleneck(trs)
    lat, bw, _ = bn.state_at(t)
    assert lat == max(x.latency_at(t) for x in trs)
    assert bw == min(x.bandwidth_at(t) for x in trs)


@settings(max_examples=40, deadline=None)
@given(trs=st.lists(traces(loop=False), min_size=1, max_size=7),
       fan_in=st.integers(min_value=1, max_value=4))
def test_bottleneck_by_tree_is_the_one_pass_trace(trs: list[PiecewiseTrace],
                                                  fan_in: int) -> None:
    """The tree over ``fan_in`` traces at a time gives the trace the one pass gives."""
    _same(bottleneck(trs, fan_in=fan_in, force_tree=True), bottleneck(trs))


def test_bottleneck_keeps_a_change_of_loss_alone() -> None:
    a = PiecewiseTrace([0.0, 1.0], [1e-3, 1e-3], [10.0, 10.0], [0.0, 0.2])
    b = PiecewiseTrace.constant(5e-4, 20.0)
    bn = bottleneck([a, b])
    assert bn.time_s.tolist() == [0.0, 1.0] and bn.loss.tolist() == [0.0, 0.2]


def test_bottleneck_needs_horizon_for_mixed_periods() -> None:
    a = PiecewiseTrace([0.0, 1.0], [1e-3, 2e-3], [10.0, 20.0], period_s=2.0)
    b = PiecewiseTrace([0.0, 1.5], [3e-3, 1e-3], [15.0, 5.0], period_s=3.0)
    with pytest.raises(ValueError, match="horizon"):
        bottleneck([a, b])
    bn = bottleneck([a, b], horizon_s=12.0)
    for t in np.linspace(0, 11.9, 120):
        assert bn.latency_at(t) == max(a.latency_at(t), b.latency_at(t))
        assert bn.bandwidth_at(t) == min(a.bandwidth_at(t), b.bandwidth_at(t))


def test_traceset_assigns_workers_round_robin() -> None:
    a, b = PiecewiseTrace.constant(1e-3, 1.0), PiecewiseTrace.constant(2e-3, 2.0)
    ts = TraceSet({"a": a, "b": b})
    assert [ts.for_worker(i) for i in range(5)] == [a, b, a, b, a]
    assert ts.bottleneck(1) is a
    assert ts.bottleneck(4).latency_at(0) == 2e-3 and math.isclose(
        ts.bottleneck(4).bandwidth_at(0), 1.0
    )
