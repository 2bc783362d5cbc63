"""The communication paths of :func:`realrun.hook.compression_hook`, one per kind of exchange:
the asynchronous dense allreduce (bit-for-bit DDP's default), AR-Topk, PowerSGD, and the
shared compressor with error feedback exchanged by its payload layout (allreduce, sparse or
dense allgather). Each path records its collectives as
:class:`~realrun.hook_agreement.Interval` entries of the iteration in progress.
"""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.distributed as dist

from sim.collectives import AlphaBeta, collective_terms
from sim.compress.base import Compressor, compress_with_feedback, k_for, sparse_from, values_at
from sim.compress.spec import SAME_INDEX
from sim.control.types import Decision
from sim.errors import InputError

from . import collectives as coll
from .hook_agreement import Accum, Interval, sq_norm
from .hook_state import CompressionHookState

__all__ = ["compressed_sync", "dense_async"]

#: Compressors whose payload size is exactly ``k_for(numel, density)`` on every rank, so sparse
#: exchanges need no size negotiation.
_EXACT_K = frozenset({"topk"})

#: What a synchronous path returns: (flat mean, alpha-beta terms, gain numerator, gain
#: denominator, communication start, communication end).
_PathResult = tuple[torch.Tensor, AlphaBeta, float, float, float, float]


def dense_async(
    state: CompressionHookState, cur: Accum, buf: torch.Tensor, collective: str
) -> torch.futures.Future[torch.Tensor]:
    """Divide, then allreduce asynchronously: exactly what DDP does by default, so the result
    is bit-for-bit the same. The interval's end is stamped when the future completes."""
    n = state.world_size
    terms = state._collective_terms(collective, buf.numel() * buf.element_size())
    start = state._begin_comm()
    buf.div_(n)
    launch = time.perf_counter()
    fut = dist.all_reduce(buf, group=state.process_group, async_op=True).get_future()
    interval = Interval(launch, launch, False, terms)
    cur.intervals.append(interval)

    def done(f: torch.futures.Future[list[torch.Tensor]]) -> torch.Tensor:
        out = f.value()[0]
        state._emulate(terms, start)
        interval.end = time.perf_counter()  # callback: no sync
        return out

    return fut.then(done)


def compressed_sync(
    state: CompressionHookState, cur: Accum, bucket: dist.GradBucket, d: Decision
) -> torch.Tensor:
    """Compress ``bucket`` as ``d`` decides, exchange it, write the average back into the
    bucket's buffer and return it; records time and gain terms in ``cur``."""
    buf = bucket.buffer()
    key, perm = state._key_and_perm(bucket)
    # Compressor state lives in the key's canonical layout; DDP's pre-rebuild buckets (e.g. the
    # first iteration after a restore) may order the same parameters differently.
    flat = buf if perm is None else buf.index_select(0, perm)
    comp = state._compressor(d.compressor)
    t0 = state.clock()

    if d.collective.startswith("artopk"):
        out, terms, num, den, t1, t2 = _artopk(state, cur, comp, flat, d, key)
    elif comp.layout == "lowrank":
        if d.collective not in SAME_INDEX:
            raise InputError(f"{d.compressor} needs an allreduce collective, not {d.collective!r}")
        out, terms, num, den, t1, t2 = _powersgd(state, comp, flat, d, key)
    else:
        out, terms, num, den, t1, t2 = _feedback_exchange(state, cur, comp, flat, d, key)
    cur.intervals.append(Interval(t1, t2, True, terms))
    if perm is None:
        buf.copy_(out.view_as(buf))
    else:
        buf.index_copy_(0, perm, out.reshape(-1))
    cur.compress_s += (t1 - t0) + (state.clock() - t2)
    cur.gain_num += num
    cur.gain_den += den
    return buf


def _artopk(
    state: CompressionHookState,
    cur: Accum,
    comp: Compressor,
    flat: torch.Tensor,
    d: Decision,
    key: str | int,
) -> _PathResult:
    """AR-Topk: the owner picks the indices, every rank allreduces its values at them."""
    if comp.layout != "sparse":
        raise InputError(f"{d.collective} needs a sparsifier, not {d.compressor!r}")
    assert cur.owner is not None
    n = state.world_size
    group = state.process_group
    numel = flat.numel()
    esize = flat.element_size()
    compensated = state.memory.compensate(flat, key)
    if state.rank == cur.owner:
        c = comp.compress(compensated, d.density, key=key, step=cur.iteration)
        idx = c.tensors[1].to(torch.int32)
    else:
        idx = torch.empty(0, dtype=torch.int32, device=flat.device)
    if d.compressor not in _EXACT_K:
        count = torch.tensor([idx.numel()], dtype=torch.int64, device=flat.device)
        dist.broadcast(count, src=cur.owner, group=group)
        k = int(count.item())
    else:
        k = k_for(numel, d.density)
    if state.rank != cur.owner:
        idx = torch.zeros(k, dtype=torch.int32, device=flat.device)
    t1 = state.clock()
    terms = collective_terms(d.collective, n, float(k * esize), float(k * 4))
    start = state._begin_comm()
    out, idx = coll.artopk_average(compensated.reshape(-1), idx, cur.owner, n, group)
    state._emulate(terms, start)
    t2 = state.clock()
    own = values_at(compensated, idx)
    local = sparse_from(idx, own, numel)
    state.memory.update(compensated, local.view_as(compensated), key)
    return out, terms, sq_norm(local), sq_norm(compensated), t1, t2


def _powersgd(
    state: CompressionHookState, comp: Any, buf: torch.Tensor, d: Decision, key: str | int
) -> _PathResult:
    """PowerSGD's two allreduces (P, then Q) with error feedback on the local projection."""
    n = state.world_size
    group = state.process_group
    compensated = state.memory.compensate(buf, key)
    rnd = comp.compress_p(compensated, d.density, key=key)
    t1 = state.clock()
    start = state._begin_comm()
    p = rnd.p.contiguous()
    dist.all_reduce(p, group=group)
    q = comp.compress_q(rnd, p).contiguous()
    dist.all_reduce(q, group=group)
    q.div_(n)
    esize = p.element_size()
    terms = collective_terms(d.collective, n, float(p.numel() * esize)) + collective_terms(
        d.collective, n, float(q.numel() * esize)
    )
    state._emulate(terms, start)
    t2 = state.clock()
    local = comp.local_decompress(rnd)
    state.memory.update(compensated, local, key)
    out = comp.decompress_pq(rnd, q).reshape(-1)
    num = sq_norm(local)
    den = sq_norm(compensated)
    return out, terms, num, den, t1, t2


def _feedback_exchange(
    state: CompressionHookState,
    cur: Accum,
    comp: Compressor,
    flat: torch.Tensor,
    d: Decision,
    key: str | int,
) -> _PathResult:
    """The shared compressor with error feedback, exchanged by its payload layout."""
    c, local, stats = compress_with_feedback(
        comp, state.memory, flat, d.density, key=key, step=cur.iteration
    )
    num = sq_norm(local)
    den = num / stats.gain if stats.gain > 0.0 else sq_norm(flat)
    t1 = state.clock()
    start = state._begin_comm()
    out, terms = _exchange(state, comp, c, d, flat.numel(), flat.element_size())
    state._emulate(terms, start)
    t2 = state.clock()
    return out, terms, num, den, t1, t2


def _exchange(
    state: CompressionHookState,
    comp: Compressor,
    c: Any,
    d: Decision,
    numel: int,
    esize: int,
) -> tuple[torch.Tensor, AlphaBeta]:
    """Communicate one payload by its layout; returns (flat mean, alpha-beta terms)."""
    n = state.world_size
    group = state.process_group
    layout = c.layout
    if layout in ("dense", "same-index") and d.collective in SAME_INDEX:
        payload = c.tensors[0].div(n)
        terms = collective_terms(d.collective, n, float(c.payload_bytes))
        dist.all_reduce(payload, group=group)
        return comp.decompress(c.with_tensors([payload])).reshape(-1), terms
    if layout == "sparse" and d.collective == "allgather":
        values, indices = c.tensors
        terms = collective_terms("allgather", n, float(c.payload_bytes))
        if d.compressor in _EXACT_K:
            out = coll.sparse_allgather_average(values.div(n), indices, numel, n, group)
        else:
            out = _ragged_sparse_average(values.div(n), indices, numel, n, group)
        return out, terms
    if d.collective == "allgather":
        # dense, same-index or quantized payloads: gather every rank's tensors, decompress each.
        gathered: list[list[torch.Tensor]] = []
        for t in c.tensors:
            parts = [torch.empty_like(t) for _ in range(n)]
            dist.all_gather(parts, t.contiguous(), group=group)
            gathered.append(parts)
        terms = collective_terms("allgather", n, float(c.payload_bytes))
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
