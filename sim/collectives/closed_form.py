"""Closed-form alpha-beta communication costs, and transfers over time-varying links.

These are the sums of the schedules of :mod:`sim.collectives.schedule` written in closed form
(one latency per step, the most loaded link's bytes per step); tests check both against each
other on uniform links.

Notation (REFERENCES.md section 1): ``n`` workers, ``m`` bytes per worker, alpha = per-message
latency (s), beta = 1 / bandwidth (s/byte). Every collective is expressed as
:class:`AlphaBeta` terms ``(n_alpha, n_bytes)`` so that its time on a link is
``n_alpha * alpha + n_bytes / bandwidth``; the same terms drive the simulator over a trace, so the
closed forms and the simulator cannot drift apart.

``log2(n)`` is the continuous logarithm, as in the textbook forms and the seed 003 crossover
conditions (exact for powers of two; an approximation of the integer step count otherwise).

Pure: no SimPy, torch or pandas.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Protocol

from sim.errors import InputError

__all__ = [
    "AlphaBeta",
    "point_to_point",
    "ps_allreduce",
    "ring_allreduce",
    "tree_allreduce",
    "double_tree_allreduce",
    "rhd_allreduce",
    "ring_reduce_scatter",
    "ring_allgather",
    "broadcast",
    "sparse_allgather",
    "allgather_ring",
    "allgather_direct",
    "artopk_ring",
    "artopk_tree",
    "hierarchical_allreduce_s",
    "collective_terms",
    "time_over_trace_s",
    "DENSE_COLLECTIVES",
    "SPARSE_COLLECTIVES",
]

#: Distinct argument tuples :func:`collective_terms` remembers (least recently used dropped).
_TERMS_CACHE_SIZE = 8192

#: Collectives that reduce same-index payloads (dense tensors, shared-seed random-k, PowerSGD).
DENSE_COLLECTIVES = ("ring", "tree", "rhd", "ps", "hierarchical", "double-tree")
#: Collectives for payloads whose indices differ per worker.
SPARSE_COLLECTIVES = (
    "allgather",
    "artopk-ring",
    "artopk-tree",
    "allgather-ring",
    "allgather-direct",
)


@dataclass(frozen=True)
class AlphaBeta:
    """Cost terms: ``n_alpha`` latencies plus ``n_bytes`` through the bottleneck link."""

    n_alpha: float
    n_bytes: float

    def time_s(self, alpha_s: float, bandwidth_Bps: float) -> float:
        """Time on a constant link with latency ``alpha_s`` and bandwidth ``bandwidth_Bps``."""
        return self.n_alpha * alpha_s + self.n_bytes / bandwidth_Bps

    def __add__(self, other: AlphaBeta) -> AlphaBeta:
        return AlphaBeta(self.n_alpha + other.n_alpha, self.n_bytes + other.n_bytes)


def _check(n: int, m: float) -> None:
    if n < 1 or int(n) != n:
        raise InputError(f"workers must be a positive integer, got {n!r}")
    if not (m >= 0 and math.isfinite(m)):
        raise InputError(f"bytes must be finite and >= 0, got {m!r}")


def point_to_point(m: float) -> AlphaBeta:
    """One message of ``m`` bytes: alpha + m beta."""
    _check(1, m)
    return AlphaBeta(1.0, m)


def ps_allreduce(n: int, m: float, shards: int = 1) -> AlphaBeta:
    """Parameter server on ``shards`` of the workers: 2 alpha + 2 (n-1) m / shards beta (the
    shards' links are the bottleneck: incast on push, fan-out on pull)."""
    _check(n, m)
    if shards < 1 or shards > n:
        raise InputError(f"ps shards must be in [1, workers], got {shards}")
    if n == 1:
        return AlphaBeta(0.0, 0.0)
    if shards == 1:
        return AlphaBeta(2.0, 2.0 * (n - 1) * m)
    return AlphaBeta(2.0, 2.0 * (n - 1) * m / shards)


def ring_allreduce(n: int, m: float) -> AlphaBeta:
    """Ring allreduce: 2 (n-1) alpha + 2 (n-1)/n m beta."""
    _check(n, m)
    return AlphaBeta(2.0 * (n - 1), 2.0 * (n - 1) / n * m)


def tree_allreduce(n: int, m: float) -> AlphaBeta:
    """Binary-tree allreduce (reduce + broadcast): 2 log2(n) alpha + 2 log2(n) m beta."""
    _check(n, m)
    lg = math.log2(n)
    return AlphaBeta(2.0 * lg, 2.0 * lg * m)


def _whole_levels(n: int) -> int:
    """Whole steps of a binomial tree over ``n`` ranks: ceil(log2 n)."""
    return (n - 1).bit_length()


def double_tree_allreduce(n: int, m: float) -> AlphaBeta:
    """Double binary tree (two binomial trees, the second over the ranks in reverse order, each
    carrying ``m / 2``; :func:`sim.collectives.schedule.double_binary_tree_schedule`):
    ``2 L alpha + (L + t) m beta`` with ``L = ceil(log2 n)`` whole levels.

    At level ``k`` rank ``i`` sends in the first tree when ``i = 2^k (mod 2^(k+1))`` and rank
    ``n-1-i`` in the second under the same condition, so one rank sends in both trees (its link
    carries ``m`` instead of ``m / 2``) exactly when ``2^(k+1)`` divides ``n - 1``: on the ``t``
    lowest levels, ``t`` the number of trailing zero bits of ``n - 1`` (none for even ``n``). Each level is paid once on the way up and once on the way down. Exact for every
    ``n`` (whole levels); for powers of two ``2 log2(n) alpha + log2(n) m beta``.
    """
    _check(n, m)
    if n == 1:
        return AlphaBeta(0.0, 0.0)
    levels = _whole_levels(n)
    both = ((n - 1) & -(n - 1)).bit_length() - 1  # trailing zero bits of n - 1
    return AlphaBeta(2.0 * levels, (levels + both) * m)


def rhd_allreduce(n: int, m: float) -> AlphaBeta:
    """Recursive halving/doubling (Rabenseifner): 2 log2(n) alpha + 2 (n-1)/n m beta."""
    _check(n, m)
    return AlphaBeta(2.0 * math.log2(n), 2.0 * (n - 1) / n * m)


def ring_reduce_scatter(n: int, m: float) -> AlphaBeta:
    """Ring reduce-scatter of ``m`` bytes in total: (n-1) alpha + (n-1)/n m beta."""
    _check(n, m)
    return AlphaBeta(float(n - 1), (n - 1) / n * m)


def ring_allgather(n: int, m: float) -> AlphaBeta:
    """Ring allgather producing ``m`` bytes in total: (n-1) alpha + (n-1)/n m beta."""
    _check(n, m)
    return AlphaBeta(float(n - 1), (n - 1) / n * m)


def broadcast(n: int, m: float) -> AlphaBeta:
    """Binomial-tree broadcast: log2(n) (alpha + m beta)."""
    _check(n, m)
    lg = math.log2(n)
    return AlphaBeta(lg, lg * m)


def sparse_allgather(n: int, payload_bytes: float) -> AlphaBeta:
    """Allgather of a per-worker payload (e.g. top-k values+indices, 2 m c bytes):
    log2(n) alpha + (n-1) payload beta."""
    _check(n, payload_bytes)
    return AlphaBeta(math.log2(n), (n - 1) * payload_bytes)


def allgather_ring(n: int, payload_bytes: float) -> AlphaBeta:
    """Ring allgather of a per-worker payload: (n-1) alpha + (n-1) payload beta (each of the
    n - 1 steps passes one payload on to the next rank)."""
    _check(n, payload_bytes)
    return AlphaBeta(float(n - 1), (n - 1) * payload_bytes)


def allgather_direct(n: int, payload_bytes: float) -> AlphaBeta:
    """Direct allgather of a per-worker payload: every worker sends its payload to every other
    one in a single step, alpha + (n-1) payload beta (its link carries n - 1 payloads)."""
    _check(n, payload_bytes)
    if n == 1:
        return AlphaBeta(0.0, 0.0)
    return AlphaBeta(1.0, (n - 1) * payload_bytes)


def artopk_ring(n: int, value_bytes: float, index_bytes: float | None = None) -> AlphaBeta:
    """AR-Topk over a ring: broadcast the owner's indices, ring-allreduce the values.

    alpha [2(n-1) + log2 n] + beta [log2(n) index_bytes + 2 (n-1)/n value_bytes]; with 32-bit
    values and indices (index_bytes = value_bytes = m c) this is seed 003's
    alpha [2(n-1) + log2 n] + m c beta [2 (n-1)/n + log2 n].
    """
    ib = value_bytes if index_bytes is None else index_bytes
    return broadcast(n, ib) + ring_allreduce(n, value_bytes)


def artopk_tree(n: int, value_bytes: float, index_bytes: float | None = None) -> AlphaBeta:
    """AR-Topk over a tree: broadcast of indices + tree allreduce of values
    (seed 003: 3 alpha log2 n + 3 m c beta log2 n with equal index and value bytes)."""
    ib = value_bytes if index_bytes is None else index_bytes
    return broadcast(n, ib) + tree_allreduce(n, value_bytes)


def hierarchical_allreduce_s(
    n: int,
    m: float,
    *,
    gpus_per_node: int,
    intra_alpha_s: float,
    intra_bandwidth_Bps: float,
    inter_alpha_s: float,
    inter_bandwidth_Bps: float,
) -> float:
    """Two-level allreduce: intra-node ring reduce-scatter, inter-node ring allreduce of m/G,
    intra-node ring allgather. ``n`` must be a multiple of ``gpus_per_node``."""
    _check(n, m)
    g = gpus_per_node
    if g < 1 or n % g:
        raise InputError(f"workers ({n}) must be a multiple of gpus_per_node ({g})")
    intra = ring_reduce_scatter(g, m) + ring_allgather(g, m)
    inter = ring_allreduce(n // g, m / g)
    return intra.time_s(intra_alpha_s, intra_bandwidth_Bps) + inter.time_s(
        inter_alpha_s, inter_bandwidth_Bps
    )


def collective_terms(
    collective: str, n: int, payload_bytes: float, index_bytes: float = 0.0
) -> AlphaBeta:
    """Alpha-beta terms of ``collective`` for ``n`` workers.

    ``payload_bytes`` is what each worker contributes (the whole compressed payload for the
    allgather; the value bytes for AR-Topk, whose ``index_bytes`` are broadcast). ``hierarchical``
    over one link class reduces to ring here; use :func:`hierarchical_allreduce_s` for two.

    Memoised (the terms are a pure function of the arguments, and :class:`AlphaBeta` is
    immutable): a policy that prices every bucket over every candidate collective each step asks
    for the same few hundred terms hundreds of thousands of times in a 2,000-step simulation.
    Arguments of different types are kept apart (``64`` and ``64.0``, ``float`` and numpy
    floats), so a cached answer is the very value an uncached call would give; unhashable
    arguments (a numpy array) are computed without the cache.
    """
    try:
        return _collective_terms(collective, n, payload_bytes, index_bytes)
    except TypeError:
        return _collective_terms.__wrapped__(collective, n, payload_bytes, index_bytes)


@functools.lru_cache(maxsize=_TERMS_CACHE_SIZE, typed=True)
def _collective_terms(
    collective: str, n: int, payload_bytes: float, index_bytes: float
) -> AlphaBeta:
    if collective == "ring" or collective == "hierarchical":
        return ring_allreduce(n, payload_bytes)
    if collective == "tree":
        return tree_allreduce(n, payload_bytes)
    if collective == "double-tree":
        return double_tree_allreduce(n, payload_bytes)
    if collective == "rhd":
        return rhd_allreduce(n, payload_bytes)
    if collective == "ps":
        return ps_allreduce(n, payload_bytes)
    if collective == "allgather":
        return sparse_allgather(n, payload_bytes)
    if collective == "allgather-ring":
        return allgather_ring(n, payload_bytes)
    if collective == "allgather-direct":
        return allgather_direct(n, payload_bytes)
    if collective == "artopk-ring":
        return artopk_ring(n, payload_bytes, index_bytes)
    if collective == "artopk-tree":
        return artopk_tree(n, payload_bytes, index_bytes)
    raise InputError(
        f"unknown collective {collective!r}; known: "
        f"{', '.join(DENSE_COLLECTIVES + SPARSE_COLLECTIVES)}"
    )


class _TraceLike(Protocol):
    """What :func:`time_over_trace_s` needs of a trace (``traces.PiecewiseTrace`` fits)."""

    def latency_at(self, t_s: float) -> float: ...

    def transfer_end_s(self, start_s: float, nbytes: float) -> float: ...


def time_over_trace_s(terms: AlphaBeta, trace: _TraceLike, start_s: float) -> float:
    """Duration of a collective started at ``start_s`` over a time-varying link.

    The latency terms use the latency in force at the start; the byte term is pushed through the
    bandwidth schedule, integrating over its changes. On a constant link this equals
    ``terms.time_s(alpha, bandwidth)`` up to rounding of ``start_s``.
    """
    lat = trace.latency_at(start_s)
    t0 = start_s + terms.n_alpha * lat
    return trace.transfer_end_s(t0, terms.n_bytes) - start_s
