"""Max-min fair sharing (sim.maxmin) against a brute-force progressive filling, its invariants,
and the stepwise network's use of it for phases whose messages differ in size."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.collectives import schedule as sc
from sim.collectives.schedule import Phase, Schedule
from sim.compress.spec import Payload
from sim.maxmin import fair_makespan_s, maxmin_rates
from sim.stepwise_fair import fair_flows
from sim.stepwise_net import StepwiseNetwork
from sim.topology import flat_topology, load_topology
from sim.transports import TRANSPORTS
from traces.model import PiecewiseTrace, TraceSet


# ------------------------------------------------------------------ brute-force references
def _reference_rates(
    flows: list[list[int]], cap: list[float], rate_cap: list[float] | None = None
) -> list[float]:
    """Progressive filling, one flow and one link at a time in plain Python: raise every
    unfrozen flow by the smallest headroom left (a link's spare capacity over its unfrozen
    flows, or a flow's cap), freeze what that saturates, repeat."""
    n = len(flows)
    limit = rate_cap or [math.inf] * n
    rate = [0.0] * n
    frozen = [False] * n
    while not all(frozen):
        live = [k for k in range(n) if not frozen[k]]
        best = math.inf
        for j in range(len(cap)):
            on = [k for k in live if j in flows[k]]
            if on:
                used = sum(rate[k] for k in range(n) if j in flows[k])
                best = min(best, (cap[j] - used) / len(on))
        for k in live:
            best = min(best, limit[k] - rate[k])
        if not math.isfinite(best):
            for k in live:
                rate[k] = math.inf
            break
        for k in live:
            rate[k] += best
        for j in range(len(cap)):
            used = sum(rate[k] for k in range(n) if j in flows[k])
            if used >= cap[j] * (1 - 1e-12):
                for k in live:
                    if j in flows[k]:
                        frozen[k] = True
        for k in live:
            if rate[k] >= limit[k] * (1 - 1e-12):
                frozen[k] = True
    return rate


def _reference_makespan(
    flows: list[list[int]], sizes: list[float], cap: list[float], rate_cap: list[float] | None
) -> float:
    """Event by event: reference rates among the flows left, run to the next finish."""
    left = list(sizes)
    alive = [k for k in range(len(flows)) if left[k] > 0]
    t = 0.0
    while alive:
        r = _reference_rates([flows[k] for k in alive], cap,
                             None if rate_cap is None else [rate_cap[k] for k in alive])
        dt = min(left[k] / r[i] for i, k in enumerate(alive))
        t += dt
        nxt = []
        for i, k in enumerate(alive):
            left[k] -= r[i] * dt
            if left[k] > sizes[k] * 1e-9:
                nxt.append(k)
        alive = nxt
    return t


def _padded(flows: list[list[int]]) -> np.ndarray:
    hops = max(len(f) for f in flows)
    return np.array([f + [-1] * (hops - len(f)) for f in flows], dtype=np.int64)


@st.composite
def _instances(draw: st.DrawFn) -> tuple[list[list[int]], list[float], list[float] | None]:
    n_links = draw(st.integers(1, 6))
    n_flows = draw(st.integers(1, 8))
    flows = [
        sorted(draw(st.sets(st.integers(0, n_links - 1), min_size=1, max_size=min(3, n_links))))
        for _ in range(n_flows)
    ]
    cap = [draw(st.floats(0.1, 100.0)) for _ in range(n_links)]
    rate_cap = None
    if draw(st.booleans()):
        rate_cap = [draw(st.sampled_from([math.inf, draw(st.floats(0.05, 50.0))]))
                    for _ in range(n_flows)]
    return flows, cap, rate_cap


# ------------------------------------------------------------------ allocation
@settings(max_examples=300, deadline=None)
@given(inst=_instances())
def test_rates_equal_the_brute_force_progressive_filling(
    inst: tuple[list[list[int]], list[float], list[float] | None],
) -> None:
    flows, cap, rate_cap = inst
    got = maxmin_rates(_padded(flows), np.array(cap),
                       None if rate_cap is None else np.array(rate_cap))
    want = _reference_rates(flows, cap, rate_cap)
    assert got == pytest.approx(want, rel=1e-9)


@settings(max_examples=300, deadline=None)
@given(inst=_instances())
def test_rates_are_feasible_and_every_flow_has_a_bottleneck(
    inst: tuple[list[list[int]], list[float], list[float] | None],
) -> None:
    flows, cap, rate_cap = inst
    limit = rate_cap or [math.inf] * len(flows)
    rate = maxmin_rates(_padded(flows), np.array(cap),
                        None if rate_cap is None else np.array(rate_cap))
    load = np.zeros(len(cap))
    for k, f in enumerate(flows):
        load[f] += rate[k]
    # No link over capacity.
    assert np.all(load <= np.array(cap) * (1 + 1e-9))
    for k, f in enumerate(flows):
        if rate[k] >= limit[k] * (1 - 1e-9):
            continue  # at its own cap
        # Otherwise bottlenecked: some link of the flow is saturated and no flow on it is faster.
        assert any(
            load[j] >= cap[j] * (1 - 1e-9)
            and all(rate[i] <= rate[k] * (1 + 1e-9) for i, g in enumerate(flows) if j in g)
            for j in f
        ), (k, f, rate, load)


def test_a_flow_on_no_link_and_with_no_cap_is_unbounded() -> None:
    rate = maxmin_rates(np.array([[0], [-1]]), np.array([2.0]))
    assert rate[0] == 2.0 and math.isinf(rate[1])


# ------------------------------------------------------------------ makespan
@settings(max_examples=200, deadline=None)
@given(inst=_instances(), data=st.data())
def test_makespan_equals_the_event_by_event_reference(
    inst: tuple[list[list[int]], list[float], list[float] | None], data: st.DataObject,
) -> None:
    flows, cap, rate_cap = inst
    sizes = [data.draw(st.floats(0.01, 1e3)) for _ in flows]
    got = fair_makespan_s(_padded(flows), np.array(sizes), np.array(cap),
                          None if rate_cap is None else np.array(rate_cap))
    assert got == pytest.approx(_reference_makespan(flows, sizes, cap, rate_cap), rel=1e-7)
    # Never faster than the busiest link draining at full rate, nor a flow alone at its cap.
    load = np.zeros(len(cap))
    for k, f in enumerate(flows):
        load[f] += sizes[k]
    assert got >= float((load / np.array(cap)).max()) * (1 - 1e-9)
    if rate_cap is not None:
        assert got >= max(s / c for s, c in zip(sizes, rate_cap, strict=True)) * (1 - 1e-9)


@settings(max_examples=200, deadline=None)
@given(inst=_instances(), size=st.floats(0.01, 1e3))
def test_equal_sizes_drain_exactly_with_the_busiest_link(
    inst: tuple[list[list[int]], list[float], list[float] | None], size: float,
) -> None:
    # Why the stepwise network keeps its one-line form for equal messages: the first link to
    # saturate has the smallest fair share, its flows finish last and all together; a flow at
    # its own cap (the TCP window) runs at that cap to the end. So the makespan is the busiest
    # link's drain time or the slowest cap's, whichever is longer.
    flows, cap, rate_cap = inst
    load = np.zeros(len(cap))
    for f in flows:
        load[f] += size
    want = float((load / np.array(cap)).max())
    if rate_cap is not None:
        want = max(want, max(size / c for c in rate_cap))
    got = fair_makespan_s(_padded(flows), np.full(len(flows), size), np.array(cap),
                          None if rate_cap is None else np.array(rate_cap))
    assert got == pytest.approx(want, rel=1e-9)


# ------------------------------------------------------------------ in the stepwise network
def _unequal_phase() -> Schedule:
    """Link B (rank 1's down link) is crossed by two 1-byte flows (from ranks 0 and 2), whose
    up links also carry nine 0.05-byte flows each: while those last, the big flows get 1/10 of
    a link each and B idles at 1/5; B's 2 bytes then take 2 s more at 1 B/s."""
    src = [0, 2] + [0] * 9 + [2] * 9
    dst = [1, 1] + list(range(3, 12)) + list(range(12, 21))
    nbytes = [1.0, 1.0] + [0.05] * 18
    ph = Phase("x", np.array(src), np.array(dst), np.array(nbytes))
    return Schedule("custom", 21, (ph,))


def test_unequal_messages_share_links_max_min_fairly() -> None:
    topo = flat_topology(21, TraceSet.single(PiecewiseTrace.constant(0.0, 1.0)))
    net = StepwiseNetwork(topo, TRANSPORTS["ideal"])
    cs = net.compile(_unequal_phase())
    assert cs.phases[0].fair is not None
    # 0.5 s at 0.1 B/s each (0.05 B done), then 1.9 B through B at 1 B/s: 2.4 s; the busiest
    # link alone (2 B at 1 B/s) would say 2.0 s.
    assert net.run(cs, 0.0) == pytest.approx(2.4, rel=1e-12)


@pytest.mark.parametrize("coll", ["ring", "double-tree", "allgather-direct", "ps"])
def test_equal_messages_keep_the_busiest_link_bound_byte_for_byte(coll: str) -> None:
    # Built-in schedules send equal messages in every step: no fair-share flows are compiled
    # and the result is the busiest-link time as before; the fair share agrees with it.
    n = 24
    topo = flat_topology(n, TraceSet({f"l{i}": PiecewiseTrace.constant(1e-4, 1e8 * (1 + i % 5))
                                      for i in range(n)}))
    net = StepwiseNetwork(topo, TRANSPORTS["ideal"])
    s = sc.schedule_for(coll, n, Payload(1e6, 0.0, 0.0))
    cs = net.compile(s)
    assert all(ph.fair is None for ph in cs.phases)
    _, _, bw, _ = net.states.at(0.0)
    raw = [p for p in s.phases if p.steps]
    assert len(raw) == len(cs.phases)
    for ph, p in zip(cs.phases, raw, strict=True):
        fair = fair_flows(topo, ph.paths, p.src, p.dst)
        x = fair_makespan_s(fair.flow_links, ph.msg_bytes, bw[fair.link_ids] * fair.scale)
        assert x == pytest.approx(float((ph.load_bytes / bw[ph.links]).max()), rel=1e-9)


def test_hashed_spines_give_each_spine_its_share_of_the_uplink() -> None:
    topo = load_topology("2spine", 8, lambda s: pytest.fail(s))  # type: ignore[arg-type,return-value]
    net = StepwiseNetwork(topo, TRANSPORTS["ideal"])
    # Equal messages across racks: the fair share over per-spine links equals the hashed bound.
    s = sc.schedule_for("allgather-direct", 8, Payload(1e6, 0.0, 0.0))
    cs = net.compile(s)
    ph, raw = cs.phases[0], s.phases[0]
    _, _, bw, _ = net.states.at(0.0)
    fair = fair_flows(topo, ph.paths, raw.src, raw.dst)
    assert np.any(fair.scale < 1.0)  # uplinks split per spine
    x = fair_makespan_s(fair.flow_links, ph.msg_bytes, bw[fair.link_ids] * fair.scale)
    assert x == pytest.approx(float((ph.load_bytes / bw[ph.links]).max()), rel=1e-9)
    # Unequal messages: the exact fair share, never below that bound.
    uneven = Phase("u", raw.src, raw.dst, raw.nbytes * (1 + (raw.src % 3)))
    cu = net.compile(Schedule("custom", 8, (uneven,)))
    assert cu.phases[0].fair is not None
    bound = float((cu.phases[0].load_bytes / bw[cu.phases[0].links]).max())
    assert net.run(cu, 0.0) >= bound * (1 - 1e-12)
