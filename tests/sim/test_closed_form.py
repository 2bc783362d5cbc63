"""Every closed form of sim.collectives.closed_form against values computed by hand.

Reference case unless stated: n = 8 workers, m = 1e8 bytes, alpha = 1 ms, bandwidth = 1.25e9 B/s
(10 Gbit/s), so m beta = 0.08 s and log2(8) = 3.
"""

import math

import pytest

from sim.collectives import closed_form as cm
from sim.errors import InputError

A = 1e-3
BW = 1.25e9


def close(x: float, y: float) -> bool:
    return math.isclose(x, y, rel_tol=1e-12, abs_tol=1e-15)


def test_point_to_point() -> None:
    # 1 ms + 0.08 s
    assert close(cm.point_to_point(1e8).time_s(A, BW), 0.081)


def test_ps() -> None:
    # 2 alpha + 2 * 7 * 0.08 = 0.002 + 1.12
    assert close(cm.ps_allreduce(8, 1e8).time_s(A, BW), 1.122)
    assert cm.ps_allreduce(1, 1e8).time_s(A, BW) == 0.0


def test_ring() -> None:
    # 14 alpha + 2 * 7/8 * 0.08 = 0.014 + 0.14
    assert close(cm.ring_allreduce(8, 1e8).time_s(A, BW), 0.154)
    assert cm.ring_allreduce(1, 1e8).time_s(A, BW) == 0.0


def test_tree() -> None:
    # 2*3 alpha + 2*3*0.08 = 0.006 + 0.48
    assert close(cm.tree_allreduce(8, 1e8).time_s(A, BW), 0.486)


def test_rhd() -> None:
    # 6 alpha + 0.14
    assert close(cm.rhd_allreduce(8, 1e8).time_s(A, BW), 0.146)


def test_reduce_scatter_and_allgather() -> None:
    # 7 alpha + 7/8 * 0.08 = 0.007 + 0.07
    assert close(cm.ring_reduce_scatter(8, 1e8).time_s(A, BW), 0.077)
    assert close(cm.ring_allgather(8, 1e8).time_s(A, BW), 0.077)


def test_broadcast() -> None:
    # 3 (alpha + 0.08)
    assert close(cm.broadcast(8, 1e8).time_s(A, BW), 0.243)


def test_sparse_allgather() -> None:
    # payload 2e6 bytes (top-k at 1%): 3 alpha + 7 * 2e6 / 1.25e9 = 0.003 + 0.0112
    assert close(cm.sparse_allgather(8, 2e6).time_s(A, BW), 0.0142)


def test_artopk_ring_matches_seed003_form() -> None:
    # values = indices = m c = 1e6 bytes: alpha (14 + 3) + 1e6 beta (2*7/8 + 3)
    t = cm.artopk_ring(8, 1e6).time_s(A, BW)
    assert close(t, 17e-3 + 1e6 / BW * 4.75)
    assert close(t, 0.017 + 0.0038)


def test_artopk_tree_matches_seed003_form() -> None:
    # 3 alpha log2 n + 3 m c beta log2 n = 9 ms + 9 * 0.0008
    assert close(cm.artopk_tree(8, 1e6).time_s(A, BW), 0.009 + 0.0072)


def test_hierarchical() -> None:
    # n=8, G=4: intra rs + ag: 2 * (3 * 5e-6 + 3/4 * 1e8 / 1e11) = 2 * (1.5e-5 + 7.5e-4)
    # inter ring of 2 nodes on m/4 = 2.5e7: 2 alpha + 2 * 1/2 * 2.5e7 / 1.25e9 = 0.002 + 0.02
    t = cm.hierarchical_allreduce_s(
        8,
        1e8,
        gpus_per_node=4,
        intra_alpha_s=5e-6,
        intra_bandwidth_Bps=1e11,
        inter_alpha_s=A,
        inter_bandwidth_Bps=BW,
    )
    assert close(t, 2 * (1.5e-5 + 7.5e-4) + 0.022)
    with pytest.raises(InputError):
        cm.hierarchical_allreduce_s(
            6,
            1e8,
            gpus_per_node=4,
            intra_alpha_s=0,
            intra_bandwidth_Bps=1,
            inter_alpha_s=0,
            inter_bandwidth_Bps=1,
        )


def test_collective_terms_dispatch() -> None:
    for name, fn in [
        ("ring", cm.ring_allreduce),
        ("tree", cm.tree_allreduce),
        ("rhd", cm.rhd_allreduce),
        ("ps", cm.ps_allreduce),
        ("allgather", cm.sparse_allgather),
    ]:
        assert cm.collective_terms(name, 8, 1e8) == fn(8, 1e8)
    assert cm.collective_terms("artopk-ring", 8, 1e6, 2e6) == cm.artopk_ring(8, 1e6, 2e6)
    with pytest.raises(InputError):
        cm.collective_terms("butterfly", 8, 1e8)


def test_bad_inputs() -> None:
    with pytest.raises(InputError):
        cm.ring_allreduce(0, 1e8)
    with pytest.raises(InputError):
        cm.ring_allreduce(8, -1.0)
    with pytest.raises(InputError):
        cm.ring_allreduce(8, math.inf)


def test_time_over_constant_trace_equals_closed_form() -> None:
    from traces.model import PiecewiseTrace

    tr = PiecewiseTrace.constant(A, BW)
    terms = cm.ring_allreduce(8, 1e8)
    assert close(cm.time_over_trace_s(terms, tr, 0.0), 0.154)


def test_time_over_step_trace_by_hand() -> None:
    from traces.model import PiecewiseTrace

    # 1.25e9 B/s until t=0.1 s, then 0.625e9 B/s. Ring over 8: 14 alpha (14 ms), 1.75e8 bytes.
    # Start at 0: bytes start at 0.014; by 0.1 s, 0.086 * 1.25e9 = 1.075e8 sent; the remaining
    # 0.675e8 take 0.108 s at half rate: end 0.208 s.
    tr = PiecewiseTrace([0.0, 0.1], [A, A], [BW, BW / 2])
    t = cm.time_over_trace_s(cm.ring_allreduce(8, 1e8), tr, 0.0)
    assert math.isclose(t, 0.208, rel_tol=1e-12)


def test_ps_shards_must_lie_within_the_workers() -> None:
    for shards in (0, 5):
        with pytest.raises(InputError, match="shards"):
            cm.ps_allreduce(4, 1e6, shards=shards)
    assert cm.ps_allreduce(4, 1e6, shards=4) == cm.AlphaBeta(2.0, 2.0 * 3 * 1e6 / 4)


def test_payloads_below_one_byte_are_priced_not_refused() -> None:
    """A compressed payload is a density times the bytes: fractions of a byte are valid."""
    assert cm.ring_allreduce(4, 0.5) == cm.AlphaBeta(6.0, 0.75)
    assert cm.point_to_point(0.25) == cm.AlphaBeta(1.0, 0.25)
    assert cm.collective_terms("ring", 4, 0.5) == cm.AlphaBeta(6.0, 0.75)


def test_collective_terms_broadcast_no_index_bytes_unless_given() -> None:
    """``collective_terms``' AR-Topk terms carry only the values' bytes by default (its
    ``index_bytes`` is 0, not the closed forms' default of one index per value)."""
    for name, form in (("artopk-ring", cm.artopk_ring), ("artopk-tree", cm.artopk_tree)):
        assert cm.collective_terms(name, 8, 1e4) == form(8, 1e4, 0.0)
        assert cm.collective_terms(name, 8, 1e4, 3e3) == form(8, 1e4, 3e3)
        assert form(8, 1e4, 0.0).n_bytes < form(8, 1e4).n_bytes
