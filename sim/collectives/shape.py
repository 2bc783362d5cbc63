"""Collectives at the analytic fidelity level: one duration per collective over a link trace.

A collective is described by its alpha-beta terms (:mod:`sim.collectives.closed_form`), built here from a
compressor payload; its duration over a time-varying link takes the latency in force at its start
and pushes its bytes through the bandwidth schedule (:func:`sim.collectives.closed_form.time_over_trace_s`).
On a constant link this is the closed form, so the simulator and ``compctl cost`` agree.

``hierarchical`` is two-level: an intra-node ring reduce-scatter and ring allgather on a constant
intra-node link, around an inter-node ring allreduce of ``1/G`` of the payload over the trace.

Pure Python: no SimPy.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.compress.spec import Payload
from sim.errors import InputError

from .closed_form import (
    AlphaBeta,
    collective_terms,
    ring_allgather,
    ring_allreduce,
    ring_reduce_scatter,
)

__all__ = [
    "IntraNodeLink",
    "payload_terms",
    "CollectiveShape",
    "collective_shape",
    "COUNT_BYTES",
    "payload_parts",
]

_ARTOPK = ("artopk-ring", "artopk-tree")


@dataclass(frozen=True)
class IntraNodeLink:
    """The constant link between workers of one node (used by ``hierarchical`` only)."""

    gpus_per_node: int = 1
    latency_s: float = 5e-6
    bandwidth_Bps: float = 100e9


def payload_terms(collective: str, n: int, payload: Payload) -> AlphaBeta:
    """Alpha-beta terms of carrying one worker's ``payload`` over ``collective`` (flat links).

    AR-Topk broadcasts the index bytes and allreduces the rest; every other collective carries
    the whole payload.
    """
    if collective in _ARTOPK:
        return collective_terms(
            collective, n, payload.value_bytes + payload.other_bytes, payload.index_bytes
        )
    return collective_terms(collective, n, payload.total_bytes)


@dataclass(frozen=True)
class CollectiveShape:
    """How one bucket's collective uses the network.

    ``fixed_before_s`` and ``fixed_after_s`` are constant-link phases (intra-node, for
    ``hierarchical``); ``terms`` go over the traced link between them. For flat collectives both
    fixed phases are zero. The monitor is fed ``terms`` and the traced phase's duration.
    """

    terms: AlphaBeta
    fixed_before_s: float = 0.0
    fixed_after_s: float = 0.0


def collective_shape(
    collective: str, n: int, payload: Payload, intra: IntraNodeLink | None = None
) -> CollectiveShape:
    """The :class:`CollectiveShape` of ``collective`` over ``n`` workers for ``payload``."""
    if collective != "hierarchical":
        return CollectiveShape(payload_terms(collective, n, payload))
    link = intra or IntraNodeLink()
    g = link.gpus_per_node
    if g < 1 or n % g:
        raise InputError(f"workers ({n}) must be a multiple of gpus_per_node ({g})")
    m = payload.total_bytes
    rs = ring_reduce_scatter(g, m).time_s(link.latency_s, link.bandwidth_Bps)
    ag = ring_allgather(g, m).time_s(link.latency_s, link.bandwidth_Bps)
    return CollectiveShape(ring_allreduce(n // g, m / g), rs, ag)


#: Bytes of the count a ragged sparse exchange agrees first (one int64 per rank).
COUNT_BYTES = 8.0


def payload_parts(payload: Payload, *, ragged: bool = False) -> tuple[float, ...]:
    """Each tensor's bytes of ``payload`` as a per-tensor sender sends it over allgather: the
    count first where ``ragged`` (sparse payloads whose ranks keep different counts), then the
    values, the indices and anything else; empty when the payload is a single tensor."""
    parts = [b for b in (payload.value_bytes, payload.index_bytes, payload.other_bytes) if b > 0]
    if ragged and payload.index_bytes > 0:
        parts.insert(0, COUNT_BYTES)
    return tuple(parts) if len(parts) > 1 else ()
