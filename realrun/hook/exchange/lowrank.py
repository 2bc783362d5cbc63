"""The hook's low-rank path: PowerSGD's two allreduces (P, then Q) with error feedback on the
local projection."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from sim.collectives import collective_terms
from sim.control.types import Decision

from ..records import sq_norm
from ..state import CompressionHookState
from .common import PathResult

__all__ = ["lowrank_exchange"]


def lowrank_exchange(
    state: CompressionHookState, comp: Any, buf: torch.Tensor, d: Decision, key: str | int
) -> PathResult:
    """PowerSGD's two allreduces (P, then Q) with error feedback on the local projection."""
    n = state.world_size
    group = state.process_group
    compensated = state.memory.compensate(buf, key)
    rnd = comp.compress_p(compensated, d.density, key=key)
    t1 = state.clock()
    start = state.comm.begin_comm()
    p = rnd.p.contiguous()
    dist.all_reduce(p, group=group)
    q = comp.compress_q(rnd, p).contiguous()
    dist.all_reduce(q, group=group)
    q.div_(n)
    esize = p.element_size()
    terms = collective_terms(d.collective, n, float(p.numel() * esize)) + collective_terms(
        d.collective, n, float(q.numel() * esize)
    )
    state.comm.end_comm(terms, start)
    t2 = state.clock()
    local = comp.local_decompress(rnd)
    state.memory.update(compensated, local, key)
    out = comp.decompress_pq(rnd, q).reshape(-1)
    num = sq_norm(local)
    den = sq_norm(compensated)
    return out, terms, num, den, t1, t2
