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


def test_only_the_first_step_of_a_ring_gets_the_credit() -> None:
    tp = with_tbf_burst(replace(PLAIN, bandwidth_efficiency=0.9))
    pay = Payload(153_128.0)
    for n in (2, 4):
        plain = _run(replace(PLAIN, bandwidth_efficiency=0.9), n, pay, 1.0, "ring")
        burst = _run(tp, n, pay, 1.0, "ring")
        assert plain - burst == pytest.approx(BW * TBF_BURST_S / (BW * 0.9), rel=1e-6)


@settings(max_examples=40, deadline=None)
@given(n=st.sampled_from([2, 3, 4]), v=st.floats(1.0, 1e6), idle=st.floats(0.0, 0.1),
       coll=st.sampled_from(["allgather", "ring", "tree"]))
def test_the_credit_never_slows_and_saves_at_most_one_bucket(n: int, v: float, idle: float,
                                                             coll: str) -> None:
    pay = Payload(v, v, 0.0) if coll == "allgather" else Payload(2 * v)
    plain = _run(PLAIN, n, pay, idle, coll)
    burst = _run(with_tbf_burst(PLAIN), n, pay, idle, coll)
    assert burst <= plain + 1e-12
    most = max(BW * TBF_BURST_S, TBF_MIN_BURST_BYTES) / (BW * 0.672 if coll == "allgather"
                                                        else BW)
    assert plain - burst <= most * (1 + 1e-9)


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
