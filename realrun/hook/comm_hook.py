"""The function DDP calls per gradient bucket: :func:`compression_hook` (see :mod:`realrun.hook`)."""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from sim.compress.spec import SAME_INDEX

from .exchange import compressed_sync, dense_async
from .records import sq_norm
from .state import CompressionHookState

__all__ = ["compression_hook"]


def compression_hook(
    state: CompressionHookState, bucket: dist.GradBucket
) -> torch.futures.Future[torch.Tensor]:
    """DDP comm hook: average ``bucket`` over ranks as the controller decides."""
    cur = state.begin_iteration()
    cur.last_entry = time.perf_counter()
    buf = bucket.buffer()
    nbytes = buf.numel() * buf.element_size()
    cur.grad_bytes += nbytes
    cur.bucket_bytes[bucket.index()] = nbytes
    if state.loss is not None and not cur.warmup:
        # Bounded-loss transport: this rank's lost packets are zeroed before any exchange.
        state.loss.apply(buf, bucket.index(), bucket.parameters(), cur.iteration)
    # With per-bucket collective choices ("auto"), this bucket's own collective.
    d = cur.decision.for_bucket(bucket.index())
    if cur.warmup or (d.compressor == "none" and d.collective in SAME_INDEX):
        # Dense: nothing is left out, so the gain is exactly 1 (no gain terms needed). The
        # norm is only for observations and the VAR owner; without per-step agreement nobody
        # reads it, so it is not computed (-1 marks it unknown).
        if state.agree_each_step:
            cur.norm_sq += sq_norm(buf)
        else:
            cur.norm_sq = -1.0
        fut = dense_async(state, cur, buf, d.collective)
    else:
        cur.norm_sq += sq_norm(buf)
        result = compressed_sync(state, cur, bucket, d)
        fut = torch.futures.Future()
        fut.set_result(result)
    state.close_bucket(bucket)
    return fut


# DDP checks the hook's annotations as objects; postponed (string) annotations would fail it.
compression_hook.__annotations__["state"] = CompressionHookState
compression_hook.__annotations__["bucket"] = dist.GradBucket
compression_hook.__annotations__["return"] = torch.futures.Future[torch.Tensor]
