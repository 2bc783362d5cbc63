"""Every collective as a schedule: which rank sends how many bytes to which rank, step by step.

A :class:`Schedule` is a sequence of :class:`Phase` objects. A phase is one *step pattern*
(arrays ``src``, ``dst``, ``nbytes``: rank ``src[k]`` sends ``nbytes[k]`` bytes to ``dst[k]``)
repeated ``repeats`` times; a ring's reduce-scatter is one phase of ``n - 1`` repeats, a binomial
tree is one phase per level. Each phase names the link ``level`` it runs on: ``"net"`` (the
traced network) or ``"intra"`` (the intra-node link of the two-level collective).

On a network where every rank has its own full-duplex link to a switch (an up link and a down
link), a step's bytes are limited by the most loaded link: the up link of rank ``i`` carries the
bytes ``i`` sends, the down link the bytes it receives. :meth:`Schedule.terms` sums, over steps,
one latency and the largest per-link load: these are the alpha-beta terms of
:mod:`sim.collectives.closed_form`, which writes the same sums in closed form (exactly for powers
of two; the closed forms use the continuous ``log2`` where the schedules take whole steps). The
stepwise engine (:mod:`sim.engine_stepwise`) walks the same phases over per-link traces and
topologies; the tests check that both views agree on uniform links.

Ranks are placed node-major: rank ``r`` sits on node ``r // G`` with local index ``r % G``.

Pure numpy: no SimPy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from sim.compress.spec import Payload
from sim.errors import InputError

from .closed_form import AlphaBeta
from .shape import COUNT_BYTES, payload_parts

__all__ = [
    "Phase",
    "Schedule",
    "SCHEDULES",
    "ring_reduce_scatter_phase",
    "ring_allgather_phase",
    "ring_allreduce_schedule",
    "tree_allreduce_schedule",
    "double_binary_tree_schedule",
    "rhd_allreduce_schedule",
    "ps_schedule",
    "allgather_schedule",
    "allgather_ring_schedule",
    "allgather_direct_schedule",
    "broadcast_schedule",
    "artopk_schedule",
    "hierarchical_schedule",
    "schedule_for",
    "payload_parts",
    "COUNT_BYTES",
]


@dataclass(frozen=True, eq=False)
class Phase:
    """One step pattern, repeated ``repeats`` times; ``nbytes[k]`` from ``src[k]`` to ``dst[k]``."""

    name: str
    src: np.ndarray
    dst: np.ndarray
    nbytes: np.ndarray
    repeats: int = 1
    level: str = "net"

    @property
    def steps(self) -> int:
        """Steps this phase takes (0 when it sends nothing)."""
        return self.repeats if len(self.src) else 0

    def link_loads(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Bytes on each rank's up link and down link in one step (flat, full-duplex network)."""
        up = np.bincount(self.src, weights=self.nbytes, minlength=n)
        down = np.bincount(self.dst, weights=self.nbytes, minlength=n)
        return up, down

    def max_link_bytes(self, n: int) -> float:
        """The largest per-link load of one step: what paces the step on uniform links."""
        if not len(self.src):
            return 0.0
        up, down = self.link_loads(n)
        return float(max(up.max(), down.max()))


@dataclass(frozen=True, eq=False)
class Schedule:
    """A collective among ``n`` ranks as a sequence of phases.

    ``parts``: for an allgather whose payload is several tensors, each tensor's bytes per rank
    in the order a per-tensor sender sends them (empty: one tensor); a transport with
    ``call_per_tensor`` prices one call per part (:mod:`sim.stepwise_net`). The phases always
    carry the whole payload, so the alpha-beta terms do not depend on it.
    """

    collective: str
    n: int
    phases: tuple[Phase, ...]
    parts: tuple[float, ...] = ()

    @property
    def steps(self) -> int:
        """Total number of steps (each pays one latency)."""
        return sum(p.steps for p in self.phases)

    def terms(self, level: str | None = None) -> AlphaBeta:
        """Alpha-beta terms on uniform flat links: steps, and the bottleneck bytes summed.

        ``level`` restricts the sum to the phases on that link level (``"net"`` or ``"intra"``).
        """
        n_alpha = 0.0
        n_bytes = 0.0
        for p in self.phases:
            if level is not None and p.level != level:
                continue
            n_alpha += p.steps
            n_bytes += p.repeats * p.max_link_bytes(self.n)
        return AlphaBeta(n_alpha, n_bytes)

    def bytes_sent(self) -> np.ndarray:
        """Bytes each rank sends over the whole collective."""
        out = np.zeros(self.n)
        for p in self.phases:
            out += p.repeats * np.bincount(p.src, weights=p.nbytes, minlength=self.n)
        return out

    def bytes_received(self) -> np.ndarray:
        """Bytes each rank receives over the whole collective."""
        out = np.zeros(self.n)
        for p in self.phases:
            out += p.repeats * np.bincount(p.dst, weights=p.nbytes, minlength=self.n)
        return out


def _check(n: int, m: float) -> None:
    if n < 1 or int(n) != n:
        raise InputError(f"workers must be a positive integer, got {n!r}")
    if not (m >= 0 and math.isfinite(m)):
        raise InputError(f"bytes must be finite and >= 0, got {m!r}")


def _levels(n: int) -> int:
    """Whole steps of a binomial tree or recursive doubling over ``n`` ranks."""
    return (n - 1).bit_length()


def _phase(
    name: str, src: np.ndarray, dst: np.ndarray, nbytes: float, repeats: int = 1, level: str = "net"
) -> Phase:
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    return Phase(name, src, dst, np.full(len(src), float(nbytes)), repeats, level)


def _ring_phase(name: str, n: int, m: float, level: str, group: int = 1) -> Phase:
    """``n - 1`` steps of a ring among ranks in groups: ``group`` consecutive ranks form a node."""
    ranks = np.arange(n * group, dtype=np.int64)
    if group == 1:
        nxt = (ranks + 1) % n
    else:  # ring among the nodes' local rank j: r -> r + G (mod n G)
        nxt = (ranks + group) % (n * group)
    return _phase(name, ranks, nxt, m / n, max(n - 1, 0), level) if n > 1 else _empty(name)


def _empty(name: str) -> Phase:
    z = np.zeros(0, dtype=np.int64)
    return Phase(name, z, z, np.zeros(0), 0)


def ring_reduce_scatter_phase(n: int, m: float, level: str = "net") -> Phase:
    """Ring reduce-scatter of ``m`` bytes: ``n - 1`` steps, each rank passing ``m / n`` on."""
    _check(n, m)
    return _ring_phase("reduce-scatter", n, m, level)


def ring_allgather_phase(n: int, m: float, level: str = "net") -> Phase:
    """Ring allgather producing ``m`` bytes: ``n - 1`` steps of ``m / n`` per rank."""
    _check(n, m)
    return _ring_phase("allgather", n, m, level)


def ring_allreduce_schedule(n: int, m: float) -> Schedule:
    """Ring allreduce: reduce-scatter then allgather; 2 (n-1) steps of m/n bytes."""
    return Schedule("ring", n, (ring_reduce_scatter_phase(n, m), ring_allgather_phase(n, m)))


def _binomial_reduce(n: int, m: float, perm: np.ndarray | None = None) -> list[Phase]:
    """Binomial reduction to rank 0: at level k, ranks at odd multiples of 2^k send to r - 2^k."""
    out = []
    ranks = np.arange(n, dtype=np.int64)
    for k in range(_levels(n)):
        step = 1 << k
        senders = ranks[(ranks % (2 * step)) == step]
        src, dst = senders, senders - step
        if perm is not None:
            src, dst = perm[src], perm[dst]
        out.append(_phase(f"reduce-{k}", src, dst, m))
    return out


def _binomial_bcast(n: int, m: float, perm: np.ndarray | None = None) -> list[Phase]:
    """Binomial broadcast from rank 0: the mirror image of :func:`_binomial_reduce`."""
    out = []
    for ph in reversed(_binomial_reduce(n, m, perm)):
        out.append(Phase(ph.name.replace("reduce", "bcast"), ph.dst, ph.src, ph.nbytes))
    return out


def tree_allreduce_schedule(n: int, m: float) -> Schedule:
    """Binary-tree allreduce: binomial reduce to rank 0, then binomial broadcast; each of the
    2 ceil(log2 n) steps moves the whole ``m`` over a link."""
    _check(n, m)
    return Schedule("tree", n, tuple(_binomial_reduce(n, m) + _binomial_bcast(n, m)))


def double_binary_tree_schedule(n: int, m: float) -> Schedule:
    """NCCL-style double binary tree: two trees each carrying half of ``m``, the second one
    over the ranks in reverse order, so that a rank's links are busy in both trees at once
    only where the trees overlap. Steps of both trees run together."""
    _check(n, m)
    rev = np.arange(n, dtype=np.int64)[::-1].copy()
    a = _binomial_reduce(n, m / 2) + _binomial_bcast(n, m / 2)
    b = _binomial_reduce(n, m / 2, rev) + _binomial_bcast(n, m / 2, rev)
    phases = tuple(
        Phase(
            x.name,
            np.concatenate([x.src, y.src]),
            np.concatenate([x.dst, y.dst]),
            np.concatenate([x.nbytes, y.nbytes]),
        )
        for x, y in zip(a, b, strict=True)
    )
    return Schedule("double-tree", n, phases)


def rhd_allreduce_schedule(n: int, m: float) -> Schedule:
    """Recursive halving (reduce-scatter) then doubling (allgather), Rabenseifner's algorithm.

    Step k of the halving exchanges ``m / 2^(k+1)`` with the partner ``r XOR 2^(L-1-k)``;
    partners beyond ``n`` are skipped (exact for powers of two).
    """
    _check(n, m)
    levels = _levels(n)
    ranks = np.arange(n, dtype=np.int64)
    halving = []
    for k in range(levels):
        partner = ranks ^ (1 << (levels - 1 - k))
        ok = partner < n
        halving.append(_phase(f"halving-{k}", ranks[ok], partner[ok], m / (1 << (k + 1))))
    doubling = [
        Phase(p.name.replace("halving", "doubling"), p.src, p.dst, p.nbytes)
        for p in reversed(halving)
    ]
    return Schedule("rhd", n, tuple(halving + doubling))


def ps_schedule(n: int, m: float, shards: int = 1) -> Schedule:
    """Parameter server with ``shards`` shards on ranks ``0 .. shards-1``: every rank pushes
    ``m / shards`` to each other shard (incast on the shard's down link), then pulls it back."""
    _check(n, m)
    if shards < 1 or shards > n:
        raise InputError(f"ps shards must be in [1, workers], got {shards}")
    if n == 1:
        return Schedule("ps", n, ())
    workers = np.repeat(np.arange(n, dtype=np.int64), shards)
    servers = np.tile(np.arange(shards, dtype=np.int64), n)
    keep = workers != servers
    w, s = workers[keep], servers[keep]
    part = m / shards
    return Schedule("ps", n, (_phase("push", w, s, part), _phase("pull", s, w, part)))


def allgather_schedule(n: int, payload_bytes: float) -> Schedule:
    """Recursive-doubling allgather of a per-rank payload: step k exchanges 2^k payloads with
    ``r XOR 2^k`` (exact for powers of two)."""
    _check(n, payload_bytes)
    ranks = np.arange(n, dtype=np.int64)
    phases = []
    for k in range(_levels(n)):
        partner = ranks ^ (1 << k)
        ok = partner < n
        phases.append(_phase(f"doubling-{k}", ranks[ok], partner[ok], payload_bytes * (1 << k)))
    return Schedule("allgather", n, tuple(phases))


def allgather_ring_schedule(n: int, payload_bytes: float) -> Schedule:
    """Ring allgather of a per-rank payload: n - 1 steps, each passing one payload on."""
    _check(n, payload_bytes)
    return Schedule("allgather-ring", n, (_ring_phase("allgather", n, payload_bytes * n, "net"),))


def allgather_direct_schedule(n: int, payload_bytes: float) -> Schedule:
    """Direct allgather: one step in which every rank sends its payload to every other rank."""
    _check(n, payload_bytes)
    src = np.repeat(np.arange(n, dtype=np.int64), n)
    dst = np.tile(np.arange(n, dtype=np.int64), n)
    keep = src != dst
    return Schedule("allgather-direct", n, (_phase("direct", src[keep], dst[keep], payload_bytes),))


def broadcast_schedule(n: int, m: float) -> Schedule:
    """Binomial-tree broadcast of ``m`` bytes from rank 0: ceil(log2 n) steps of ``m``."""
    _check(n, m)
    return Schedule("broadcast", n, tuple(_binomial_bcast(n, m)))


def artopk_schedule(tree: bool, n: int, value_bytes: float, index_bytes: float) -> Schedule:
    """AR-Topk: broadcast the owner's indices, then allreduce the values (ring or tree)."""
    bcast = broadcast_schedule(n, index_bytes).phases
    reduce = (tree_allreduce_schedule if tree else ring_allreduce_schedule)(n, value_bytes)
    return Schedule("artopk-tree" if tree else "artopk-ring", n, bcast + reduce.phases)


def hierarchical_schedule(n: int, m: float, gpus_per_node: int) -> Schedule:
    """Two-level allreduce: ring reduce-scatter inside each node (``intra``), ``G`` parallel
    inter-node ring allreduces of ``m / G`` (one per local index), ring allgather inside nodes."""
    _check(n, m)
    g = gpus_per_node
    if g < 1 or n % g:
        raise InputError(f"workers ({n}) must be a multiple of gpus_per_node ({g})")
    nodes = n // g
    intra_rs = _intra_ring("intra-reduce-scatter", nodes, g, m)
    intra_ag = _intra_ring("intra-allgather", nodes, g, m)
    rs = _ring_phase("reduce-scatter", nodes, m / g, "net", g)
    ag = _ring_phase("allgather", nodes, m / g, "net", g)
    return Schedule("hierarchical", n, (intra_rs, rs, ag, intra_ag))


def _intra_ring(name: str, nodes: int, g: int, m: float) -> Phase:
    if g == 1:
        return _empty(name)
    ranks = np.arange(nodes * g, dtype=np.int64)
    nxt = (ranks // g) * g + (ranks % g + 1) % g
    return _phase(name, ranks, nxt, m / g, g - 1, "intra")


#: Names :func:`schedule_for` knows (the collectives of :mod:`sim.control.types` and variants).
SCHEDULES: tuple[str, ...] = (
    "ring",
    "tree",
    "rhd",
    "ps",
    "hierarchical",
    "allgather",
    "artopk-ring",
    "artopk-tree",
    "double-tree",
    "allgather-ring",
    "allgather-direct",
)


def schedule_for(
    collective: str,
    n: int,
    payload: Payload,
    *,
    gpus_per_node: int = 1,
    ps_shards: int = 1,
    ragged: bool = False,
) -> Schedule:
    """The schedule carrying one rank's ``payload`` over ``collective``.

    AR-Topk broadcasts the index bytes and allreduces the rest; every other collective carries
    the whole payload (as :func:`sim.collectives.shape.payload_terms`). Allgather schedules
    name the payload's tensors (:attr:`Schedule.parts`; ``ragged``: a count goes first).
    """
    if collective.startswith("allgather"):
        ag = _allgather_for(collective, n, payload.total_bytes)
        return replace(ag, parts=payload_parts(payload, ragged=ragged))
    total = payload.total_bytes
    if collective == "ring":
        return ring_allreduce_schedule(n, total)
    if collective == "tree":
        return tree_allreduce_schedule(n, total)
    if collective == "double-tree":
        return double_binary_tree_schedule(n, total)
    if collective == "rhd":
        return rhd_allreduce_schedule(n, total)
    if collective == "ps":
        return ps_schedule(n, total, ps_shards)
    if collective == "hierarchical":
        return hierarchical_schedule(n, total, gpus_per_node)
    if collective in ("artopk-ring", "artopk-tree"):
        values = payload.value_bytes + payload.other_bytes
        return artopk_schedule(collective == "artopk-tree", n, values, payload.index_bytes)
    raise InputError(f"unknown collective {collective!r}; known: {', '.join(SCHEDULES)}")


def _allgather_for(collective: str, n: int, total: float) -> Schedule:
    if collective == "allgather":
        return allgather_schedule(n, total)
    if collective == "allgather-ring":
        return allgather_ring_schedule(n, total)
    if collective == "allgather-direct":
        return allgather_direct_schedule(n, total)
    raise InputError(f"unknown collective {collective!r}; known: {', '.join(SCHEDULES)}")
