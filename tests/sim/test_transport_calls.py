"""Per-tensor collective calls and the size-dependent allgather efficiency (sim.transports,
sim.stepwise_net): how the real hook's sparse exchange (one allgather of the values, one of
the indices, a count first where ranks keep different counts) is priced."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from transport_points import shaped_points

from sim.collectives import schedule as sc
from sim.compress.spec import Payload
from sim.errors import InputError
from sim.stepwise_net import StepwiseNetwork
from sim.topology import flat_topology
from sim.transport_fit import (
    FitResult,
    Measurement,
    calibration_document,
    fit_transport,
    predict_s,
)
from sim.transports import OPTIONAL_DEFAULTS, TRANSPORTS, Transport, load_calibration
from traces.model import PiecewiseTrace, TraceSet


def _time(tp: Transport, n: int, sched: sc.Schedule, lat: float, bw: float) -> float:
    topo = flat_topology(n, TraceSet.single(PiecewiseTrace.constant(lat, bw)))
    net = StepwiseNetwork(topo, tp)
    return net.run(net.compile(sched), 0.0)


SPARSE = Payload(15_000.0, 15_000.0, 0.0)  # top-k 10% of ~38k floats: values + int32 indices


def test_parts_name_the_tensors_in_send_order() -> None:
    assert sc.payload_parts(SPARSE) == (15_000.0, 15_000.0)
    assert sc.payload_parts(SPARSE, ragged=True) == (sc.COUNT_BYTES, 15_000.0, 15_000.0)
    assert sc.payload_parts(Payload(4096.0)) == ()
    assert sc.payload_parts(Payload(4096.0), ragged=True) == ()  # dense: no count
    assert sc.payload_parts(Payload(100.0, 0.0, 8.0)) == (100.0, 8.0)  # values + scales
    s = sc.schedule_for("allgather", 4, SPARSE)
    assert s.parts == (15_000.0, 15_000.0)
    # the alpha-beta terms (what the analytic level and the hook's emulation use) are the
    # whole payload's, with or without parts
    assert s.terms() == sc.schedule_for("allgather", 4, Payload(30_000.0)).terms()
    assert sc.schedule_for("ring", 4, SPARSE).parts == ()


@settings(max_examples=30, deadline=None)
@given(
    n=st.sampled_from([2, 3, 4, 8]),
    v=st.floats(1.0, 1e7),
    i=st.floats(0.0, 1e7),
    lat=st.floats(0.0, 0.01),
    bw=st.floats(1e5, 1e10),
    coll=st.sampled_from(["allgather", "allgather-ring", "allgather-direct"]),
    name=st.sampled_from(["ideal", "nccl", "gloo"]),
)
def test_defaults_price_one_call_exactly_as_before(
    n: int, v: float, i: float, lat: float, bw: float, coll: str, name: str
) -> None:
    """Without ``call_per_tensor`` and a size slope, naming the parts changes nothing: the
    same float as the single-tensor schedule of the same bytes."""
    tp = replace(TRANSPORTS[name], allgather_efficiency=0.7)
    with_parts = sc.schedule_for(coll, n, Payload(v, i, 0.0), ragged=True)
    one = sc.schedule_for(coll, n, Payload(v + i, 0.0, 0.0))
    assert _time(tp, n, with_parts, lat, bw) == _time(tp, n, one, lat, bw)


def test_each_call_pays_base_latency_hop_latency_and_floor() -> None:
    """2 ranks, one doubling step: calls x (base + per-hop latency), each call's bytes at least
    the hop floor, the step's link latency once."""
    base, hop, floor, lat, bw, eff = 3e-4, 2e-4, 1.5e-3, 1e-3, 2.5e6, 0.8
    tp = Transport("t", base_latency_s=base, hop_latency_s=hop, hop_floor_s=floor,
                   bandwidth_efficiency=0.9, allgather_efficiency=eff, call_per_tensor=1)
    s = sc.schedule_for("allgather", 2, SPARSE)
    want = 2 * base + lat + 2 * hop + 2 * max(floor, 15_000.0 / (bw * eff))
    assert _time(tp, 2, s, lat, bw) == pytest.approx(want, rel=1e-12)
    # ragged (threshold compressors): the 8-byte count is a third call, paced by the floor
    r = sc.schedule_for("allgather", 2, SPARSE, ragged=True)
    assert _time(tp, 2, r, lat, bw) == pytest.approx(want + base + hop + floor, rel=1e-12)
    # one call: one base, one hop, the floor only once
    one = replace(tp, call_per_tensor=0)
    assert _time(one, 2, s, lat, bw) == pytest.approx(
        base + lat + hop + max(floor, 30_000.0 / (bw * eff)), rel=1e-12)


@settings(max_examples=30, deadline=None)
@given(
    k=st.integers(1, 4),
    base=st.floats(0.0, 1e-3),
    hop=st.floats(0.0, 1e-3),
    lat=st.floats(0.0, 1e-2),
    ragged=st.booleans(),
)
def test_extra_calls_add_their_latency_terms(
    k: int, base: float, hop: float, lat: float, ragged: bool
) -> None:
    """On a link so fast the bytes cost nothing, splitting adds exactly (calls - 1) base
    latencies and (calls - 1) per-hop latencies per step."""
    n = 1 << k
    tp = Transport("t", base_latency_s=base, hop_latency_s=hop, call_per_tensor=1)
    s = sc.schedule_for("allgather", n, SPARSE, ragged=ragged)
    calls = len(s.parts)
    split = _time(tp, n, s, lat, 1e30)
    one = _time(replace(tp, call_per_tensor=0), n, s, lat, 1e30)
    assert split - one == pytest.approx((calls - 1) * (base + s.steps * hop), abs=1e-15)


def test_allgather_efficiency_by_transfer_time() -> None:
    tp = Transport("t", bandwidth_efficiency=0.9, allgather_efficiency=0.8,
                   allgather_efficiency_per_doubling=-0.05, allgather_reference_s=0.065536)
    assert tp.allgather_efficiency_at(0.065536) == pytest.approx(0.8)
    assert tp.allgather_efficiency_at(4 * 0.065536) == pytest.approx(0.7)
    assert tp.allgather_efficiency_at(0.065536 / 2) == pytest.approx(0.85)
    assert tp.allgather_efficiency_at(1e-6) == 1.0  # clamped to 1
    assert tp.allgather_efficiency_at(1e12) == 0.02  # and to the floor
    # slope 0: the constant efficiency, whatever the time
    flat = replace(tp, allgather_efficiency_per_doubling=0.0)
    assert flat.allgather_efficiency_at(1e9) == 0.8
    # base 0 with a slope: around the transport's own efficiency
    assert replace(tp, allgather_efficiency=0.0).allgather_efficiency_at(0.065536) == 0.9
    # a longer transfer is slower per byte: 4x the bytes take 4 x 0.8 / 0.7 the time...
    t1 = predict_s(tp, 2, 65536, latency_s=0.0, bandwidth_Bps=1e6, collective="allgather")
    t4 = predict_s(tp, 2, 4 * 65536, latency_s=0.0, bandwidth_Bps=1e6, collective="allgather")
    assert t4 / t1 == pytest.approx(4 * 0.8 / 0.7)
    # ... and the same bytes on a 4x faster link run at the 4x shorter transfer's efficiency
    fast = predict_s(tp, 2, 4 * 65536, latency_s=0.0, bandwidth_Bps=4e6, collective="allgather")
    assert fast == pytest.approx(t1)
    # allreduce schedules keep the transport's efficiency
    ring = predict_s(tp, 2, 65536, latency_s=0.0, bandwidth_Bps=1e6)
    assert ring == pytest.approx(predict_s(flat, 2, 65536, latency_s=0.0, bandwidth_Bps=1e6))


@pytest.mark.parametrize(
    ("field", "value", "msg"),
    [
        ("call_per_tensor", 2, "call_per_tensor must be 0 or 1"),
        ("allgather_efficiency_per_doubling", 1.5, "per_doubling must be in"),
        ("allgather_efficiency_per_doubling", -1.5, "per_doubling must be in"),
        ("allgather_reference_s", 0.0, "allgather_reference_s must be > 0"),
    ],
)
def test_bad_fields_are_input_errors(
    tmp_path: Path, field: str, value: float, msg: str
) -> None:
    with pytest.raises(InputError, match=msg):
        Transport("t", **{field: value})  # type: ignore[arg-type]
    path = tmp_path / "cal.json"
    path.write_text(json.dumps({"schema": "compctl-transports/1",
                                "transports": {"gloo": {field: value}}}))
    with pytest.raises(InputError, match=msg):
        load_calibration(str(path))


def test_new_fields_are_written_only_when_set(tmp_path: Path) -> None:
    """Run metadata and calibration files keep their old bytes at the defaults; set fields
    round-trip through a calibration file."""
    plain = TRANSPORTS["gloo"]
    assert not set(OPTIONAL_DEFAULTS) & set(plain.to_dict())
    fit = FitResult(plain, 1e9, 0.0, 1e9, True, [])
    params = calibration_document(fit, source="s")["transports"]["gloo"]
    assert not set(OPTIONAL_DEFAULTS) & set(params)
    set_ = replace(plain, call_per_tensor=1, allgather_efficiency_per_doubling=-0.03)
    assert set_.to_dict()["call_per_tensor"] == 1
    doc = calibration_document(replace(fit, transport=set_), source="s")
    assert "one collective call per payload tensor" in doc["note"]
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(doc))
    assert load_calibration(str(path))["gloo"] == set_


def test_fit_recovers_an_allgather_efficiency_by_transfer_time() -> None:
    truth = replace(TRANSPORTS["gloo"], host_copy_Bps=0.0, hop_floor_s=2e-4,
                    bandwidth_efficiency=0.9, allgather_efficiency=0.7,
                    allgather_efficiency_per_doubling=-0.04, allgather_reference_s=0.01)
    pts = []
    times = []
    for mbit in (25, 100):
        bw = mbit * 1e6 / 8
        for size in (4096, 16384, 65536, 262144, 2**20):
            times.append(size / bw)
            for op, coll in (("allreduce", "ring"), ("allgather", "allgather")):
                t = predict_s(truth, 2, size, latency_s=0.0, bandwidth_Bps=bw, collective=coll)
                pts.append(Measurement(2, float(size), t, bw, op))
    base = replace(TRANSPORTS["gloo"], host_copy_Bps=0.0)
    fit = fit_transport(pts, base, allgather_by_size=True, call_per_tensor=True)
    tp = fit.transport
    mean_log2 = sum(math.log2(t) for t in set(times)) / len(set(times))
    assert tp.allgather_reference_s == 2.0 ** round(mean_log2)
    assert tp.allgather_efficiency_per_doubling == pytest.approx(-0.04, rel=1e-3)
    for t in times:
        assert tp.allgather_efficiency_at(t) == pytest.approx(
            truth.allgather_efficiency_at(t), rel=1e-3)
    assert tp.call_per_tensor == 1
    assert max(abs(p["rel_error"]) for p in fit.points) < 1e-3
    # the constant model cannot fit the same points
    flat = fit_transport(pts, base)
    assert flat.transport.allgather_efficiency_per_doubling == 0.0
    assert flat.transport.call_per_tensor == 0
    assert max(abs(p["rel_error"]) for p in flat.points) > 0.05


def test_calibrate_cli_fits_one_efficiency_unless_asked_for_one_by_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from sim.entry import main
    from sim.transport_fit import write_csv

    truth = replace(TRANSPORTS["gloo"], host_copy_Bps=0.0, hop_floor_s=2e-4,
                    bandwidth_efficiency=0.9, allgather_efficiency=0.7,
                    allgather_efficiency_per_doubling=-0.04, allgather_reference_s=0.01)
    pts = shaped_points(truth)
    csv_path = tmp_path / "pts.csv"
    write_csv(str(csv_path), pts)
    by_time, const = tmp_path / "t.json", tmp_path / "c.json"
    assert main(["calibrate", "--csv", str(csv_path), "--host-copy-gbytes", "0",
                 "--allgather-by-time", "--out", str(by_time)]) == 0
    assert main(["calibrate", "--csv", str(csv_path), "--host-copy-gbytes", "0",
                 "--out", str(const)]) == 0
    capsys.readouterr()
    got = json.loads(by_time.read_text())["transports"]["gloo"]
    assert got["allgather_efficiency_per_doubling"] == pytest.approx(-0.04, rel=1e-3)
    assert "call_per_tensor" not in got  # from --csv: one call carries the payload
    flat = json.loads(const.read_text())["transports"]["gloo"]
    assert "allgather_efficiency_per_doubling" not in flat
    assert "allgather_reference_s" not in flat
