"""The schedules of sim.collectives against their closed forms, and byte conservation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.collectives import closed_form as cf
from sim.collectives import schedule as sc
from sim.collectives.shape import IntraNodeLink, collective_shape, payload_terms
from sim.compress.spec import Payload, get_spec
from sim.errors import InputError

POW2 = st.integers(min_value=1, max_value=10).map(lambda k: 1 << k)
ANY_N = st.integers(min_value=2, max_value=1024)
SIZES = st.floats(min_value=1.0, max_value=4 * 2.0**30)


def _close(a: cf.AlphaBeta, b: cf.AlphaBeta) -> None:
    assert a.n_alpha == pytest.approx(b.n_alpha, rel=1e-9, abs=1e-12)
    assert a.n_bytes == pytest.approx(b.n_bytes, rel=1e-9, abs=1e-9)


@settings(max_examples=40, deadline=None)
@given(n=ANY_N, m=SIZES)
def test_ring_and_ps_schedules_equal_closed_form_for_every_n(n: int, m: float) -> None:
    _close(sc.ring_allreduce_schedule(n, m).terms(), cf.ring_allreduce(n, m))
    _close(sc.ps_schedule(n, m).terms(), cf.ps_allreduce(n, m))
    k = max(1, n // 3)
    _close(sc.ps_schedule(n, m, k).terms(), cf.ps_allreduce(n, m, k))


@settings(max_examples=30, deadline=None)
@given(n=POW2, m=SIZES, idx=SIZES)
def test_log_collectives_equal_closed_form_on_powers_of_two(n: int, m: float, idx: float) -> None:
    _close(sc.tree_allreduce_schedule(n, m).terms(), cf.tree_allreduce(n, m))
    _close(sc.rhd_allreduce_schedule(n, m).terms(), cf.rhd_allreduce(n, m))
    _close(sc.allgather_schedule(n, m).terms(), cf.sparse_allgather(n, m))
    _close(sc.broadcast_schedule(n, m).terms(), cf.broadcast(n, m))
    _close(sc.artopk_schedule(False, n, m, idx).terms(), cf.artopk_ring(n, m, idx))
    _close(sc.artopk_schedule(True, n, m, idx).terms(), cf.artopk_tree(n, m, idx))


@settings(max_examples=20, deadline=None)
@given(n=ANY_N, m=SIZES)
def test_log_collectives_take_whole_steps(n: int, m: float) -> None:
    steps = math.ceil(math.log2(n))
    assert sc.tree_allreduce_schedule(n, m).steps == 2 * steps
    assert sc.allgather_schedule(n, m).steps == steps
    assert sc.broadcast_schedule(n, m).steps == steps


@settings(max_examples=20, deadline=None)
@given(nodes=st.integers(1, 64), g=st.sampled_from([1, 2, 4, 8]), m=SIZES)
def test_hierarchical_schedule_levels_equal_closed_form(nodes: int, g: int, m: float) -> None:
    n = nodes * g
    s = sc.hierarchical_schedule(n, m, g)
    intra = IntraNodeLink(g, 3e-6, 50e9)
    alpha, bw = 2e-3, 1e9
    total = s.terms("intra").time_s(intra.latency_s, intra.bandwidth_Bps) + s.terms("net").time_s(
        alpha, bw
    )
    want = cf.hierarchical_allreduce_s(
        n,
        m,
        gpus_per_node=g,
        intra_alpha_s=intra.latency_s,
        intra_bandwidth_Bps=intra.bandwidth_Bps,
        inter_alpha_s=alpha,
        inter_bandwidth_Bps=bw,
    )
    assert total == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize("name", sc.SCHEDULES)
@pytest.mark.parametrize("n", [1, 2, 3, 7, 16, 100])
def test_every_schedule_conserves_bytes_and_stays_in_range(name: str, n: int) -> None:
    g = 1 if name != "hierarchical" or n % 4 else 4
    s = sc.schedule_for(name, n, Payload(4000.0, 1000.0, 0.0), gpus_per_node=g)
    assert s.bytes_sent().sum() == pytest.approx(s.bytes_received().sum())
    for p in s.phases:
        assert np.all((p.src >= 0) & (p.src < n) & (p.dst >= 0) & (p.dst < n))
        assert np.all(p.src != p.dst)
        assert p.level in ("net", "intra")


NEW_FORMS = {
    "double-tree": cf.double_tree_allreduce,
    "allgather-ring": cf.allgather_ring,
    "allgather-direct": cf.allgather_direct,
}


@pytest.mark.parametrize("name", sorted(NEW_FORMS))
def test_new_closed_forms_equal_their_schedules_for_every_n(name: str) -> None:
    # Exhaustive over 1..1024 ranks: whole levels, so exact for every n, not only powers of two.
    for n in range(1, 1025):
        s = sc.schedule_for(name, n, Payload(3.0, 0.0, 0.0))
        _close(s.terms(), NEW_FORMS[name](n, 3.0))
        _close(s.terms(), cf.collective_terms(name, n, 3.0))


@settings(max_examples=40, deadline=None)
@given(n=ANY_N, m=SIZES)
def test_new_closed_forms_equal_their_schedules_for_any_size(n: int, m: float) -> None:
    for name, form in NEW_FORMS.items():
        _close(sc.schedule_for(name, n, Payload(m, 0.0, 0.0)).terms(), form(n, m))


def test_double_tree_closed_form_on_powers_of_two_and_odd_counts() -> None:
    m = 1e6
    for k in range(1, 11):
        assert cf.double_tree_allreduce(1 << k, m) == cf.AlphaBeta(2 * k, k * m)
    # 9 ranks: 4 levels; n - 1 = 8 has 3 trailing zero bits: 3 levels carry m on one link.
    assert cf.double_tree_allreduce(9, m) == cf.AlphaBeta(8, 7 * m)
    # Half the tree's bytes whenever n is even.
    for n in (2, 6, 100, 1000):
        assert cf.double_tree_allreduce(n, m).n_bytes == pytest.approx(
            sc.tree_allreduce_schedule(n, m).terms().n_bytes / 2
        )


def test_every_collective_has_a_closed_form_a_schedule_and_a_listing() -> None:
    from sim.collectives.catalog import COLLECTIVE_INFO
    from sim.control.types import COLLECTIVES

    assert set(COLLECTIVES) == set(sc.SCHEDULES) == set(COLLECTIVE_INFO)
    assert set(COLLECTIVES) == set(cf.DENSE_COLLECTIVES + cf.SPARSE_COLLECTIVES)
    for name in COLLECTIVES:
        if name != "hierarchical":  # two link classes: hierarchical_allreduce_s
            cf.collective_terms(name, 8, 1e6, 1e5)


def test_allgather_variants_move_the_same_bytes_with_different_steps() -> None:
    n, p = 16, 1000.0
    ring, direct = sc.allgather_ring_schedule(n, p), sc.allgather_direct_schedule(n, p)
    assert ring.terms() == cf.AlphaBeta(n - 1, (n - 1) * p)
    assert direct.terms() == cf.AlphaBeta(1, (n - 1) * p)
    assert ring.bytes_received().tolist() == direct.bytes_received().tolist()


def test_double_tree_halves_the_per_tree_bytes() -> None:
    n, m = 16, 1e6
    s = sc.double_binary_tree_schedule(n, m)
    assert s.steps == 2 * 4
    # Each tree carries m/2; a link busy in both trees at one step carries m.
    assert m / 2 <= s.terms().n_bytes / s.steps <= m


def test_payload_schedule_matches_payload_terms_for_sparse_collectives() -> None:
    spec = get_spec("topk")
    payload = spec.payload(1 << 20, 0.01, 4)
    for coll in ("allgather", "artopk-ring", "artopk-tree"):
        _close(sc.schedule_for(coll, 64, payload).terms(), payload_terms(coll, 64, payload))


def test_collective_shape_of_hierarchical_matches_its_schedule() -> None:
    payload = Payload(8e6, 0.0, 0.0)
    intra = IntraNodeLink(8, 5e-6, 100e9)
    shape = collective_shape("hierarchical", 64, payload, intra)
    s = sc.schedule_for("hierarchical", 64, payload, gpus_per_node=8)
    _close(s.terms("net"), shape.terms)
    half = s.terms("intra").time_s(intra.latency_s, intra.bandwidth_Bps) / 2
    assert shape.fixed_before_s == pytest.approx(half)


def test_bad_inputs_are_input_errors() -> None:
    with pytest.raises(InputError):
        sc.ps_schedule(4, 1.0, shards=5)
    with pytest.raises(InputError):
        sc.hierarchical_schedule(6, 1.0, 4)
    with pytest.raises(InputError):
        sc.schedule_for("nope", 4, Payload(1.0, 0.0, 0.0))
    with pytest.raises(InputError):
        sc.ring_allreduce_schedule(4, -1.0)
