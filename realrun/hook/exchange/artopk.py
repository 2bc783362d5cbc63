"""The hook's AR-Topk path: the owner rank picks the indices, every rank allreduces its values
at them (error feedback on what this rank kept)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from sim.collectives import collective_terms
from sim.compress.base import Compressor, k_for, sparse_from, values_at
from sim.compress.spec import get_spec
from sim.control.types import Decision
from sim.errors import InputError

from ... import collectives as coll
from ..records import Accum, sq_norm
from ..state import CompressionHookState
from .common import PathResult

__all__ = ["artopk_exchange"]


def artopk_exchange(
    state: CompressionHookState,
    cur: Accum,
    comp: Compressor,
    flat: torch.Tensor,
    d: Decision,
    key: str | int,
) -> PathResult:
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
    if not get_spec(d.compressor).exact_k:
        count = torch.tensor([idx.numel()], dtype=torch.int64, device=flat.device)
        dist.broadcast(count, src=cur.owner, group=group)
        k = int(count.item())
    else:
        k = k_for(numel, d.density)
    if state.rank != cur.owner:
        idx = torch.zeros(k, dtype=torch.int32, device=flat.device)
    t1 = state.clock()
    terms = collective_terms(d.collective, n, float(k * esize), float(k * 4))
    start = state.comm.begin_comm()
    out, idx = coll.artopk_average(compensated.reshape(-1), idx, cur.owner, n, group)
    state.comm.end_comm(terms, start)
    t2 = state.clock()
    own = values_at(compensated, idx)
    local = sparse_from(idx, own, numel)
    state.memory.update(compensated, local.view_as(compensated), key)
    return out, terms, sq_norm(local), sq_norm(compensated), t1, t2
