"""A token-bucket shaper's burst in the stepwise network (sim.transports ``burst_s`` /
``burst_bytes``, sim.stepwise_net ``run(idle_s=...)``): what the netns links' tbf lets through
at once after idling, and that nothing changes without it."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from realrun.netns import TBF_BURST_S, TBF_MIN_BURST_BYTES, tbf_args, with_tbf_burst
from sim.collectives import schedule as sc
from sim.compress.spec import Payload
from sim.stepwise_net import StepwiseNetwork
from sim.topology import flat_topology
from sim.transports import TRANSPORTS, Transport, load_calibration
from traces.model import PiecewiseTrace, TraceSet

BW = 6.25e6  # 50 Mbit/s
LAT = 1e-3
SPARSE = Payload(15_316.0, 15_316.0, 0.0)  # top-k 10% of digits-cnn: values + int32 indices
PLAIN = replace(TRANSPORTS["gloo"], host_copy_Bps=0.0, call_per_tensor=1,
                allgather_efficiency=0.672)


def _run(tp: Transport, n: int, payload: Payload, idle_s: float, collective: str = "allgather",
         bw: float = BW) -> float:
    topo = flat_topology(n, TraceSet.single(PiecewiseTrace.constant(LAT, bw)))
    net = StepwiseNetwork(topo, tp)
    return net.run(net.compile(sc.schedule_for(collective, n, payload)), 0.0, idle_s=idle_s)


def test_tbf_args_and_the_transport_burst_agree() -> None:
    for bw in (1.25e6, 3.125e6, 6.25e6, 25e6):
        size = max(int(bw * TBF_BURST_S), TBF_MIN_BURST_BYTES)
        args = tbf_args(bw)
        assert args[args.index("burst") + 1] == str(size)
        credit = with_tbf_burst(PLAIN).burst_credit_bytes(np.array([bw]), 1.0)
        assert credit[0] == pytest.approx(size, abs=1.0)


def test_a_full_bucket_moves_its_bytes_at_once() -> None:
    tp = with_tbf_burst(PLAIN)
    bucket = BW * TBF_BURST_S  # 6250 B at 50 Mbit/s
    plain = _run(PLAIN, 2, SPARSE, idle_s=1.0)
    burst = _run(tp, 2, SPARSE, idle_s=1.0)
    # 2 ranks: one step, the two calls back to back; the first call's bytes less the bucket
    expect = LAT + (30_632.0 - bucket) / (BW * 0.672)
    assert burst == pytest.approx(expect, rel=1e-9)
    assert plain - burst == pytest.approx(bucket / (BW * 0.672), rel=1e-9)


def test_no_idle_no_credit_and_a_short_idle_refills_in_part() -> None:
    tp = with_tbf_burst(PLAIN)
    plain = _run(PLAIN, 2, SPARSE, idle_s=0.0)
    assert _run(tp, 2, SPARSE, idle_s=0.0) == plain
    half = _run(tp, 2, SPARSE, idle_s=0.5e-3)  # half a bucket (1 ms of traffic) refilled
    assert plain - half == pytest.approx(0.5e-3 * BW / (BW * 0.672), rel=1e-9)
    # the floor: at 10 Mbit/s the bucket holds two full-size frames (3028 B), 2.4 ms of traffic
    slow = 1.25e6
    full = _run(PLAIN, 2, SPARSE, 1.0, bw=slow) - _run(tp, 2, SPARSE, 1.0, bw=slow)
    assert full == pytest.approx(TBF_MIN_BURST_BYTES / (slow * 0.672), rel=1e-9)


def test_a_large_ring_spends_the_credit_on_its_first_step() -> None:
    tp = with_tbf_burst(replace(PLAIN, bandwidth_efficiency=0.9))
    pay = Payload(153_128.0)
    for n in (2, 4):
        plain = _run(replace(PLAIN, bandwidth_efficiency=0.9), n, pay, 1.0, "ring")
        burst = _run(tp, n, pay, 1.0, "ring")
        assert plain - burst == pytest.approx(BW * TBF_BURST_S / (BW * 0.9), rel=1e-6)


@settings(max_examples=40, deadline=None)
@given(n=st.sampled_from([2, 3, 4]), v=st.floats(1.0, 1e6), idle=st.floats(0.0, 0.1),
       coll=st.sampled_from(["allgather", "ring", "tree"]))
def test_the_credit_never_slows_and_saves_at_most_one_bucket_per_link(
        n: int, v: float, idle: float, coll: str) -> None:
    pay = Payload(v, v, 0.0) if coll == "allgather" else Payload(2 * v)
    plain = _run(PLAIN, n, pay, idle, coll)
    burst = _run(with_tbf_burst(PLAIN), n, pay, idle, coll)
    assert burst <= plain + 1e-12
    most = max(BW * TBF_BURST_S, TBF_MIN_BURST_BYTES) / (BW * 0.672 if coll == "allgather"
                                                        else BW)
    topo = flat_topology(n, TraceSet.single(PiecewiseTrace.constant(LAT, BW)))
    net = StepwiseNetwork(topo, PLAIN)
    cs = net.compile(sc.schedule_for(coll, n, pay))
    links = len(set(np.concatenate([ph.links for ph in cs.phases]).tolist()))
    # every link's bucket is spent once at most (a tree's steps use different links in turn)
    assert plain - burst <= links * most * (1 + 1e-9)


def test_a_small_ring_rides_one_bucket_through_all_its_steps() -> None:
    tp = with_tbf_burst(replace(PLAIN, window_bytes=0.0))
    for n in (2, 4):
        # 2 KiB per rank: every step's 2 (n-1)/n share of it fits the 6250 B bucket
        burst = _run(tp, n, Payload(2048.0), 1.0, "ring")
        assert burst == pytest.approx(2 * (n - 1) * LAT, rel=1e-9)  # latency only
        # a drained bucket leaves the later steps nothing (the earlier behaviour)
        big = Payload(153_128.0)
        saved = _run(replace(PLAIN, window_bytes=0.0), n, big, 1.0, "ring") - _run(
            tp, n, big, 1.0, "ring")
        assert saved == pytest.approx(BW * TBF_BURST_S / BW, rel=1e-6)


def _repeated(tp: Transport, n: int, size: float, gap_s: float, lat: float = 0.0) -> float:
    topo = flat_topology(n, TraceSet.single(PiecewiseTrace.constant(lat, BW)))
    net = StepwiseNetwork(topo, tp)
    return net.run_repeated(net.compile(sc.schedule_for("ring", n, Payload(size))), gap_s)


def test_back_to_back_calls_settle_between_a_full_bucket_and_the_rate() -> None:
    ring = replace(PLAIN, call_per_tensor=0, bandwidth_efficiency=0.9, window_bytes=0.0)
    tp = with_tbf_burst(ring)
    topo = flat_topology(2, TraceSet.single(PiecewiseTrace.constant(0.0, BW)))
    big = StepwiseNetwork(topo, tp)
    cs = big.compile(sc.schedule_for("ring", 2, Payload(1e6)))
    # no shaper burst: the plain time; a large call drains the bucket: the gap's refill only
    assert StepwiseNetwork(topo, ring).run_repeated(cs, 1e-4) == StepwiseNetwork(
        topo, ring).run(cs, 0.0)
    assert big.run_repeated(cs, 1e-4) == pytest.approx(big.run(cs, 0.0, idle_s=1e-4), rel=1e-9)
    # a small call with a long gap finds the bucket full every time: latency only
    assert _repeated(tp, 2, 2048.0, 1.0, lat=1e-4) == pytest.approx(2e-4, rel=1e-9)


@settings(max_examples=40, deadline=None)
@given(n=st.sampled_from([2, 4]), size=st.floats(64.0, 1e6), gap=st.floats(0.0, 2e-3),
       lat=st.sampled_from([0.0, 5e-5]))
def test_back_to_back_calls_never_beat_the_shaped_rate(n: int, size: float, gap: float,
                                                       lat: float) -> None:
    tp = with_tbf_burst(replace(PLAIN, call_per_tensor=0, bandwidth_efficiency=1.0,
                                window_bytes=0.0))
    dur = _repeated(tp, n, size, gap, lat)
    assert dur >= 2 * (n - 1) * lat - 1e-12
    # a rank's link sends 2 (n-1)/n of the message per call; over the settled calls the
    # bucket gives back what it took, so a call and its gap last at least that at the rate
    sent = 2.0 * (n - 1) / n * size
    assert (dur + gap) * BW >= sent * (1 - 1e-6) - 1e-9


def test_burst_fields_round_trip_and_default_off(tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert "burst_s" not in TRANSPORTS["gloo"].to_dict()
    assert "burst_bytes" not in TRANSPORTS["gloo"].to_dict()
    d = with_tbf_burst(TRANSPORTS["gloo"]).to_dict()
    assert d["burst_s"] == TBF_BURST_S and d["burst_bytes"] == TBF_MIN_BURST_BYTES
    p = tmp_path / "cal.json"
    p.write_text('{"schema": "compctl-transports/1", "transports": {"gloo": '
                 '{"burst_s": 0.001, "burst_bytes": 3028}}}')
    tp = load_calibration(str(p))["gloo"]
    assert (tp.burst_s, tp.burst_bytes) == (0.001, 3028)
    assert math.isclose(float(tp.burst_credit_bytes(np.array([1e9]), 1e-6)[0]), 1000.0)
