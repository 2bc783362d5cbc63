"""DDP communication hook driven by a compctl controller (after torch's ``ddp_comm_hooks``).

Use::

    state = CompressionHookState(controller=make_policy("dc2-aimd"), world_size=w, rank=r)
    ddp_model.register_comm_hook(state, compression_hook)
    for x, y in data:
        loss_fn(ddp_model(x), y).backward(); opt.step(); opt.zero_grad()
        state.end_iteration(iter_s=..., wait=False)  # launch the agreement (else at next step)
    state.flush()   # collect what is pending; state.history then holds every iteration

Per iteration (steps are counted on ``bucket.is_last()``):

1. At the first bucket, the controller sees an :class:`Observation` built from the *previous*
   iteration's measurements agreed across ranks (max of timings, sum of gain terms), so every
   rank takes the same :class:`Decision`; that decision applies to every bucket of the iteration.
   The agreement is one small allreduce launched asynchronously after the optimizer step and
   collected at the next first bucket; for controllers that ignore observations
   (``agree_each_step=False``) it is deferred to :meth:`CompressionHookState.flush`, one
   collective for the whole run, and dense buckets then cost no Python beyond the launch.
   The first ``warmup_steps`` iterations use plain allreduce (DDP rebuilds its buckets after the
   first iteration, and keyed compressor state must not see the pre-rebuild buckets).
2. Per bucket: dense decisions on a same-index collective take the asynchronous fast path
   (divide, allreduce, exactly what DDP does by default, so the result is bit-for-bit the same).
   Everything else runs the shared compressor with error feedback
   (:func:`sim.compress.base.compress_with_feedback`), exchanges the payload by its layout
   (:mod:`realrun.collectives`), decompresses and returns the average, synchronously.
3. Emulated network time (``hook``/``netns`` modes) is added after each collective by a
   :class:`~realrun.emulation.HookEmulator`.

The state owns every random stream (compressor seeds; controllers are reset with the run seed)
and is checkpointable with :meth:`CompressionHookState.state_dict`.

This module is the public entry point; the pieces live in :mod:`realrun.hook_state` (the state
object, its agreement and checkpointing), :mod:`realrun.hook_exchange` (the communication paths)
and :mod:`realrun.hook_agreement` (the measurement records).
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from sim.compress.spec import SAME_INDEX

from .hook_agreement import IterationStats, sq_norm
from .hook_exchange import compressed_sync, dense_async
from .hook_state import CompressionHookState

__all__ = ["CompressionHookState", "IterationStats", "compression_hook"]


def compression_hook(
    state: CompressionHookState, bucket: dist.GradBucket
) -> torch.futures.Future[torch.Tensor]:
    """DDP comm hook: average ``bucket`` over ranks as the controller decides."""
    cur = state._begin_iteration()
    cur.last_entry = time.perf_counter()
    buf = bucket.buffer()
    nbytes = buf.numel() * buf.element_size()
    cur.grad_bytes += nbytes
    cur.bucket_bytes[bucket.index()] = nbytes
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
    state._close_bucket(bucket)
    return fut


# DDP checks the hook's annotations as objects; postponed (string) annotations would fail it.
compression_hook.__annotations__["state"] = CompressionHookState
compression_hook.__annotations__["bucket"] = dist.GradBucket
compression_hook.__annotations__["return"] = torch.futures.Future[torch.Tensor]
