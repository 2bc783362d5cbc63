"""The hook's dense path: divide, then allreduce asynchronously, exactly what DDP does by default
(so the result is bit-for-bit the same)."""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from ..records import Accum, Interval
from ..state import CompressionHookState

__all__ = ["dense_async"]


def dense_async(
    state: CompressionHookState, cur: Accum, buf: torch.Tensor, collective: str
) -> torch.futures.Future[torch.Tensor]:
    """Divide, then allreduce asynchronously: exactly what DDP does by default, so the result
    is bit-for-bit the same. The interval's end is stamped when the future completes."""
    n = state.world_size
    terms = state.dense_terms(collective, buf.numel() * buf.element_size())
    start = state.comm.begin_comm()
    buf.div_(n)
    launch = time.perf_counter()
    fut = dist.all_reduce(buf, group=state.process_group, async_op=True).get_future()
    interval = Interval(launch, launch, False, terms)
    cur.intervals.append(interval)

    def done(f: torch.futures.Future[list[torch.Tensor]]) -> torch.Tensor:
        out = f.value()[0]
        state.comm.end_comm(terms, start)
        interval.end = time.perf_counter()  # callback: no sync
        return out

    return fut.then(done)
