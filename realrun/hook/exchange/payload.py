"""The hook's general path: the shared compressor with error feedback
(:func:`sim.compress.base.compress_with_feedback`), its payload exchanged by layout: same-index
payloads by allreduce, sparse ones by (ragged) sparse allgather, anything else by a dense
allgather of every rank's tensors.

torch.distributed runs its own algorithm for ``all_reduce`` and ``all_gather``; the decision's
collective (``ring``, ``double-tree``, ... ; ``allgather``, ``allgather-ring``,
``allgather-direct``) is the one the exchange is *priced* as: its alpha-beta terms feed the
monitor, and the records name it."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from sim.collectives import AlphaBeta, collective_terms
from sim.compress.base import Compressor, compress_with_feedback
from sim.compress.spec import ALLGATHERS, SAME_INDEX, get_spec
from sim.control.types import Decision
from sim.errors import InputError

from ... import collectives as coll
from ..records import Accum, sq_norm
from ..state import CompressionHookState
from .common import PathResult

__all__ = ["feedback_exchange", "exchange_payload"]


def feedback_exchange(
    state: CompressionHookState,
    cur: Accum,
    comp: Compressor,
    flat: torch.Tensor,
    d: Decision,
    key: str | int,
) -> PathResult:
    """The shared compressor with error feedback, exchanged by its payload layout."""
    c, local, stats = compress_with_feedback(
        comp, state.memory, flat, d.density, key=key, step=cur.iteration
    )
    num = sq_norm(local)
    den = num / stats.gain if stats.gain > 0.0 else sq_norm(flat)
    t1 = state.clock()
    start = state.comm.begin_comm()
    out, terms = exchange_payload(state, comp, c, d, flat.numel())
    state.comm.end_comm(terms, start)
    t2 = state.clock()
    return out, terms, num, den, t1, t2


def exchange_payload(
    state: CompressionHookState, comp: Compressor, c: Any, d: Decision, numel: int
) -> tuple[torch.Tensor, AlphaBeta]:
    """Communicate one payload ``c`` by its layout; returns (flat mean, alpha-beta terms)."""
    n = state.world_size
    group = state.process_group
    layout = c.layout
    if layout in ("dense", "same-index") and d.collective in SAME_INDEX:
        payload = c.tensors[0].div(n)
        terms = collective_terms(d.collective, n, float(c.payload_bytes))
        dist.all_reduce(payload, group=group)
        return comp.decompress(c.with_tensors([payload])).reshape(-1), terms
    if layout == "sparse" and d.collective in ALLGATHERS:
        values, indices = c.tensors
        terms = collective_terms(d.collective, n, float(c.payload_bytes))
        if get_spec(d.compressor).exact_k:
            out = coll.sparse_allgather_average(values.div(n), indices, numel, n, group)
        else:
            out = _ragged_sparse_average(values.div(n), indices, numel, n, group)
        return out, terms
    if d.collective in ALLGATHERS:
        # dense, same-index or quantized payloads: gather every rank's tensors, decompress each.
        gathered: list[list[torch.Tensor]] = []
        for t in c.tensors:
            parts = [torch.empty_like(t) for _ in range(n)]
            dist.all_gather(parts, t.contiguous(), group=group)
            gathered.append(parts)
        terms = collective_terms(d.collective, n, float(c.payload_bytes))
        decoded = [comp.decompress(c.with_tensors([g[r] for g in gathered])) for r in range(n)]
        return comp.aggregate(decoded).reshape(-1), terms
    raise InputError(
        f"real runs cannot exchange a {layout!r} payload ({d.compressor}) over {d.collective!r}"
    )


def _ragged_sparse_average(
    values: torch.Tensor,
    indices: torch.Tensor,
    numel: int,
    n: int,
    group: dist.ProcessGroup | None,
) -> torch.Tensor:
    """Sparse allgather when ranks keep different counts (threshold compressors): agree the
    largest count, pad with zero values at index 0, then gather."""
    count = torch.tensor([values.numel()], dtype=torch.int64, device=values.device)
    counts = [torch.zeros_like(count) for _ in range(n)]
    dist.all_gather(counts, count, group=group)
    kmax = int(max(int(c.item()) for c in counts))
    pad = kmax - values.numel()
    if pad:
        values = torch.cat([values, values.new_zeros(pad)])
        indices = torch.cat([indices, indices.new_zeros(pad)])
    return coll.sparse_allgather_average(values, indices, numel, n, group)
