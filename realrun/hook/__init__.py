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

The package's parts, each with a public interface:

- :mod:`.state`: :class:`CompressionHookState`, the decision of each iteration and checkpointing,
  composed of :mod:`.buckets` (compressors, error-feedback memory, bucket keys), :mod:`.clock`
  (timestamps and emulated network time) and :mod:`.agreement` (cross-rank agreement of
  measurements, link monitor, VAR owner, history);
- :mod:`.records`: the per-rank measurement row and the agreed :class:`IterationStats`;
- :mod:`.exchange`: one communication path per payload kind;
- :mod:`.comm_hook`: :func:`compression_hook`, the function DDP calls per bucket.
"""

from __future__ import annotations

from .comm_hook import compression_hook
from .records import IterationStats
from .state import CompressionHookState

__all__ = ["CompressionHookState", "IterationStats", "compression_hook"]
