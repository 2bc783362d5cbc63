"""One line per collective for ``compctl list collectives``: what it does and its closed form.

The names are those of :data:`sim.control.types.COLLECTIVES` (a test checks both lists agree);
the closed forms are the ones :mod:`sim.collectives.closed_form` computes, with ``n`` workers,
``m`` bytes per worker, ``L = ceil(log2 n)`` and ``t`` the trailing zero bits of ``n - 1``.

Pure: no numpy, SimPy or torch.
"""

from __future__ import annotations

__all__ = ["COLLECTIVE_INFO"]

#: ``name -> (kind, description, closed form)``; kind is ``allreduce``, ``allgather`` or
#: ``ar-topk`` (which payloads it can carry: same-index, any, owner-indexed sparse).
COLLECTIVE_INFO: dict[str, tuple[str, str, str]] = {
    "ring": (
        "allreduce",
        "ring reduce-scatter then ring allgather",
        "2(n-1) a + 2(n-1)/n m b",
    ),
    "tree": (
        "allreduce",
        "binomial-tree reduce to rank 0, then binomial broadcast",
        "2 log2(n) a + 2 log2(n) m b",
    ),
    "rhd": (
        "allreduce",
        "recursive halving then doubling (Rabenseifner)",
        "2 log2(n) a + 2(n-1)/n m b",
    ),
    "ps": (
        "allreduce",
        "parameter server: push to the shards, pull back",
        "2 a + 2(n-1) m / shards b",
    ),
    "allgather": (
        "allgather",
        "recursive-doubling allgather of every worker's payload",
        "log2(n) a + (n-1) m b",
    ),
    "artopk-ring": (
        "ar-topk",
        "AR-Topk: broadcast the owner's indices, ring-allreduce the values",
        "[2(n-1) + log2 n] a + [log2(n) idx + 2(n-1)/n val] b",
    ),
    "artopk-tree": (
        "ar-topk",
        "AR-Topk: broadcast the owner's indices, tree-allreduce the values",
        "3 log2(n) a + [log2(n) idx + 2 log2(n) val] b",
    ),
    "hierarchical": (
        "allreduce",
        "intra-node reduce-scatter, inter-node ring allreduce of m/G, intra-node allgather",
        "intra 2(G-1) a' + 2(G-1)/G m b' + ring(n/G, m/G)",
    ),
    "double-tree": (
        "allreduce",
        "two binomial trees (the second over reversed ranks), each carrying m/2",
        "2L a + (L + t) m b",
    ),
    "allgather-ring": (
        "allgather",
        "ring allgather: n-1 steps, each passing one payload on",
        "(n-1) a + (n-1) m b",
    ),
    "allgather-direct": (
        "allgather",
        "direct allgather: one step, every worker to every other",
        "a + (n-1) m b",
    ),
}
