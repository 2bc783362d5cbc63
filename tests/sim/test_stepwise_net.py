"""The stepwise network: schedules over links against closed forms, contention, traces."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.collectives import closed_form as cf
from sim.collectives import schedule as sc
from sim.compress.spec import Payload
from sim.errors import InputError
from sim.stepwise_cost import stepwise_collective
from sim.stepwise_net import StepwiseNetwork, pipelined_closed_form_s
from sim.topology import flat_topology, load_topology
from sim.transports import TRANSPORTS, Transport
from traces.model import PiecewiseTrace, TraceSet

DENSE = ("ring", "tree", "rhd", "ps", "allgather", "double-tree", "allgather-ring", "allgather-direct")


def _flat_net(n: int, lat: float, bw: float, transport: str = "ideal") -> StepwiseNetwork:
    topo = flat_topology(n, TraceSet.single(PiecewiseTrace.constant(lat, bw)))
    return StepwiseNetwork(topo, TRANSPORTS[transport])


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(2, 1024),
    m=st.floats(1.0, 4 * 2.0**30),
    lat=st.floats(0.0, 0.05),
    bw=st.floats(1e6, 1e11),
    coll=st.sampled_from(DENSE),
)
def test_ideal_stepwise_equals_the_schedule_closed_form(
    n: int, m: float, lat: float, bw: float, coll: str
) -> None:
    net = _flat_net(n, lat, bw)
    s = sc.schedule_for(coll, n, Payload(m, 0.0, 0.0))
    got = net.run(net.compile(s), 0.0)
    assert got == pytest.approx(s.terms().time_s(lat, bw), rel=1e-6)


NEW_FORMS = {
    "double-tree": cf.double_tree_allreduce,
    "allgather-ring": cf.allgather_ring,
    "allgather-direct": cf.allgather_direct,
}


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(2, 1024),
    m=st.floats(1.0, 4 * 2.0**30),
    lat=st.floats(0.0, 0.05),
    bw=st.floats(1e6, 1e11),
    coll=st.sampled_from(sorted(NEW_FORMS)),
)
def test_ideal_stepwise_equals_the_closed_form_of_each_new_collective(
    n: int, m: float, lat: float, bw: float, coll: str
) -> None:
    # The closed forms of sim.collectives.closed_form (whole levels: exact for every n), not
    # the schedule's own sums; and through compctl cost's own entry point.
    out = stepwise_collective(coll, n, Payload(m, 0.0, 0.0), latency_s=lat, bandwidth_Bps=bw)
    want = NEW_FORMS[coll](n, m).time_s(lat, bw)
    assert out["time_s"] == pytest.approx(want, rel=1e-6)


@pytest.mark.parametrize("name", ["nccl", "gloo"])
@pytest.mark.parametrize(
    "coll,n,m,lat",
    [
        ("allgather-ring", 4, 32 * 2**20, 1e-3),
        ("allgather-ring", 32, 8 * 2**20, 1e-2),
        ("allgather-ring", 7, 1e5, 0.0),
        ("allgather-direct", 4, 32 * 2**20, 1e-3),
        ("allgather-direct", 32, 8 * 2**20, 1e-2),
        ("double-tree", 8, 128 * 2**20, 1e-3),
        ("double-tree", 100, 256 * 2**20, 1e-2),
        ("double-tree", 6, 1e5, 0.0),
    ],
)
def test_chunked_transport_equals_its_pipelined_closed_form_for_new_collectives(
    name: str, coll: str, n: int, m: float, lat: float
) -> None:
    # Every step of these schedules is alike (double tree: even n), so the pipelined closed form
    # of S identical steps holds: X from the busiest link's bytes at the transport's efficiency
    # or one message's TCP-window bound, chunks from one message's bytes.
    bw = 5e9 / 8
    tp = TRANSPORTS[name]
    net = StepwiseNetwork(flat_topology(n, TraceSet.single(PiecewiseTrace.constant(lat, bw))), tp)
    s = sc.schedule_for(coll, n, Payload(m, 0.0, 0.0))
    cs = net.compile(s)
    per_step = s.terms()
    steps = s.steps
    link_bytes = per_step.n_bytes / steps
    msg = float(max(p.nbytes.max() for p in s.phases))
    big_x = link_bytes / (bw * tp.bandwidth_efficiency)
    if tp.window_bytes:
        big_x = max(big_x, msg * 2 * lat / tp.window_bytes)
    chunks = max(1, math.ceil(msg / tp.chunk_bytes))
    want = pipelined_closed_form_s(steps, lat + tp.hop_latency_s, big_x, 1.0, chunks, tp.slots)
    want += tp.base_latency_s
    if tp.host_copy_Bps:
        want += 2 * float(s.bytes_sent().max()) / tp.host_copy_Bps
    assert cs.chunks == chunks
    assert net.run(cs, 0.0) == pytest.approx(want, rel=1e-9)


@settings(max_examples=20, deadline=None)
@given(
    k=st.integers(1, 10),
    m=st.floats(1.0, 4 * 2.0**30),
    lat=st.floats(0.0, 0.05),
    bw=st.floats(1e6, 1e11),
)
def test_ideal_stepwise_equals_the_textbook_closed_forms_on_powers_of_two(
    k: int, m: float, lat: float, bw: float
) -> None:
    n = 1 << k
    p = Payload(m, m / 3, 0.0)
    for coll in ("ring", "tree", "rhd", "ps", "allgather", "artopk-ring", "artopk-tree"):
        out = stepwise_collective(coll, n, p, latency_s=lat, bandwidth_Bps=bw)
        want = (
            cf.collective_terms(coll, n, m, m / 3)
            if coll.startswith("artopk")
            else cf.collective_terms(coll, n, p.total_bytes)
        ).time_s(lat, bw)
        assert out["time_s"] == pytest.approx(want, rel=1e-6), coll


def test_cost_prints_stepwise_beside_analytic_for_hierarchical() -> None:
    p = Payload(1e8, 0.0, 0.0)
    out = stepwise_collective(
        "hierarchical",
        64,
        p,
        latency_s=1e-3,
        bandwidth_Bps=1e9,
        gpus_per_node=8,
        intra_latency_s=5e-6,
        intra_bandwidth_Bps=1e11,
    )
    want = cf.hierarchical_allreduce_s(
        64,
        1e8,
        gpus_per_node=8,
        intra_alpha_s=5e-6,
        intra_bandwidth_Bps=1e11,
        inter_alpha_s=1e-3,
        inter_bandwidth_Bps=1e9,
    )
    assert out["time_s"] == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize("name", ["nccl", "gloo"])
@pytest.mark.parametrize("n,m,lat", [(4, 128 * 2**20, 1e-3), (32, 256 * 2**20, 1e-2), (8, 1e5, 0)])
def test_chunked_transport_equals_its_pipelined_closed_form(
    name: str, n: int, m: float, lat: float
) -> None:
    bw = 5e9 / 8
    tp = TRANSPORTS[name]
    net = StepwiseNetwork(flat_topology(n, TraceSet.single(PiecewiseTrace.constant(lat, bw))), tp)
    cs = net.compile(sc.ring_allreduce_schedule(n, m))
    step_bytes = m / n
    d = lat + tp.hop_latency_s
    eff_bw = bw * tp.bandwidth_efficiency
    if tp.window_bytes:
        eff_bw = min(eff_bw, tp.window_bytes / (2 * lat)) if lat > 0 else eff_bw
    want = pipelined_closed_form_s(2 * (n - 1), d, step_bytes, eff_bw, cs.chunks, tp.slots)
    want += tp.base_latency_s
    if tp.host_copy_Bps:
        want += 2 * 2 * (n - 1) / n * m / tp.host_copy_Bps
    assert net.run(cs, 0.0) == pytest.approx(want, rel=1e-9)
    assert cs.chunks == max(1, math.ceil(step_bytes / tp.chunk_bytes))


def test_pipelining_hides_latency_once_chunks_cover_it() -> None:
    # Many chunks, a short delay: the pipeline fill is paid once, not once per step.
    t = pipelined_closed_form_s(62, 1e-3, 8e6, 1e9, chunks=16, slots=0)
    assert t == pytest.approx(62 * 8e-3 + 1e-3, rel=1e-9)
    # One chunk: the alpha-beta step, latency in every step.
    assert pipelined_closed_form_s(62, 1e-3, 8e6, 1e9, 1, 0) == pytest.approx(62 * 9e-3)


def test_one_slow_link_bounds_the_ring() -> None:
    n, m, lat = 256, 1e9, 1e-4
    fast, slow = 10e9, 1e9
    labels = [PiecewiseTrace.constant(lat, slow)] + [PiecewiseTrace.constant(lat, fast)] * (n - 1)
    ts = TraceSet({f"l{i}": t for i, t in enumerate(labels)})
    net = StepwiseNetwork(flat_topology(n, ts), TRANSPORTS["ideal"])
    got = net.run(net.compile(sc.ring_allreduce_schedule(n, m)), 0.0)
    assert got == pytest.approx(cf.ring_allreduce(n, m).time_s(lat, slow), rel=1e-9)
    assert got > cf.ring_allreduce(n, m).time_s(lat, fast)


@pytest.mark.parametrize(
    "coll",
    ["ring", "ps", "tree", "hierarchical", "double-tree", "allgather-ring", "allgather-direct"],
)
def test_bytes_are_conserved_on_every_link_class(coll: str) -> None:
    topo = load_topology("2racks-4to1", 64, lambda s: pytest.fail(s))  # type: ignore[arg-type,return-value]
    net = StepwiseNetwork(topo, TRANSPORTS["ideal"])
    s = sc.schedule_for(coll, 64, Payload(1e6, 0.0, 0.0), gpus_per_node=8)
    net.account(net.compile(s))
    o, lb = topo.offsets, net.link_bytes
    for up, down, count in (
        ("intra_up", "intra_down", 64),
        ("nic_up", "nic_down", 64),
        ("uplink_up", "uplink_down", 2),
    ):
        sent = lb[o[up] : o[up] + count].sum()
        assert sent == pytest.approx(lb[o[down] : o[down] + count].sum())
    total = sum(float(p.nbytes.sum()) * p.repeats for p in s.phases)
    local = lb[o["intra_up"] : o["intra_up"] + 64].sum()
    remote = lb[o["nic_up"] : o["nic_up"] + 64].sum()
    assert local + remote == pytest.approx(total)


def test_oversubscribed_uplink_slows_traffic_across_racks() -> None:
    resolve = lambda s: pytest.fail(s)  # type: ignore[return-value]  # noqa: E731
    m = Payload(1e9, 0.0, 0.0)
    racks = load_topology("2racks-4to1", 64, resolve)  # type: ignore[arg-type]
    s = sc.schedule_for("allgather-direct", 64, m)
    net = StepwiseNetwork(racks, TRANSPORTS["ideal"])
    t_racks = net.run(net.compile(s), 0.0)
    flat = flat_topology(64, TraceSet.single(PiecewiseTrace.constant(5e-6 * 2, 100e9 / 8)))
    fnet = StepwiseNetwork(flat, TRANSPORTS["ideal"])
    t_flat = fnet.run(fnet.compile(s), 0.0)
    assert t_racks > 1.5 * t_flat


def test_bandwidth_change_mid_transfer_is_integrated() -> None:
    # 1 GB at 1 GB/s, halved to 0.5 GB/s after 0.5 s: 0.5 GB done, the rest takes 1 s.
    tr = PiecewiseTrace([0.0, 0.5], [0.0, 0.0], [1e9, 0.5e9])
    net = StepwiseNetwork(flat_topology(2, TraceSet.single(tr)), TRANSPORTS["ideal"])
    got = net.run(net.compile(sc.ps_schedule(2, 1e9)), 0.0)
    # push (1 GB: 0.5 s at 1 GB/s + 1 s at 0.5 GB/s), then pull at 0.5 GB/s (2 s).
    assert got == pytest.approx(1.5 + 2.0, rel=1e-9)


def test_delay_change_mid_collective_changes_later_steps_only() -> None:
    tr = PiecewiseTrace([0.0, 0.005], [1e-3, 20e-3], [1e10, 1e10])
    n = 8
    net = StepwiseNetwork(flat_topology(n, TraceSet.single(tr)), TRANSPORTS["ideal"])
    got = net.run(net.compile(sc.ring_allreduce_schedule(n, 1e3)), 0.0)
    lo = cf.ring_allreduce(n, 1e3).time_s(1e-3, 1e10)
    hi = cf.ring_allreduce(n, 1e3).time_s(20e-3, 1e10)
    assert lo < got < hi


def test_transport_parameters_are_validated() -> None:
    with pytest.raises(InputError):
        Transport("x", bandwidth_efficiency=0.0)
    with pytest.raises(InputError):
        Transport("x", chunk_bytes=-1.0)


def test_link_states_cache_does_not_change_results() -> None:
    tr = PiecewiseTrace([0.0, 1.0], [1e-3, 2e-3], [1e9, 2e9], period_s=2.0)
    net = StepwiseNetwork(flat_topology(4, TraceSet.single(tr)), TRANSPORTS["nccl"])
    cs = net.compile(sc.ring_allreduce_schedule(4, 1e8))
    a = [net.run(cs, t) for t in np.linspace(0, 5, 11)]
    b = [net.run(cs, t) for t in np.linspace(0, 5, 11)]
    assert a == b
    assert a[0] != a[2]  # 0 s and 1 s start in different states


def test_link_states_always_move_forward_across_period_boundaries() -> None:
    period = 0.3  # not exactly representable: k * period rounds either way
    tr = PiecewiseTrace([0.0, 0.1], [1e-3, 2e-3], [1e9, 2e9], period_s=period)
    other = PiecewiseTrace([0.0, 0.2], [1e-3, 1e-3], [1e9, 1e9], period_s=period)
    topo = flat_topology(4, TraceSet({"a": tr, "b": other}))
    states = StepwiseNetwork(topo, TRANSPORTS["ideal"]).states
    for k in range(1, 2000, 7):
        for t in (k * period, k * period + 0.1, math.fsum([period] * k)):
            assert states.at(t)[3] > t


def test_the_step_cost_memo_bound_changes_no_result(monkeypatch: pytest.MonkeyPatch) -> None:
    """The memo is exact: a run whose memo can hold a single entry (it overflows at once, as the
    old bound did on large plans) gives the same records to the bit as one at the default bound."""
    import sim.stepwise_net as stepwise_net
    from sim.runner import SimConfig, run_simulation

    cfg = SimConfig(workload="resnet50", workers=8, trace="delay-highvar", policy="fixed",
                    policy_params=(("density", 0.01), ("collective", "auto")), iterations=40,
                    fidelity="stepwise", monitor="on")
    full, _ = run_simulation(cfg)
    monkeypatch.setattr(stepwise_net, "COST_CACHE_ENTRIES", 1)
    tiny, _ = run_simulation(cfg)
    assert tiny.to_csv(float_format="%.17g") == full.to_csv(float_format="%.17g")
