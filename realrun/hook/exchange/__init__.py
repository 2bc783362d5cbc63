"""The communication paths of :func:`realrun.hook.compression_hook`, one module per kind of
exchange: :mod:`~.dense` (asynchronous allreduce, bit-for-bit DDP's default),
:mod:`~.artopk` (owner-chosen indices), :mod:`~.lowrank` (PowerSGD) and :mod:`~.payload` (the
shared compressor with error feedback, exchanged by its payload layout). Each records its
collectives as :class:`~realrun.hook.records.Interval` entries of the iteration in progress;
:func:`compressed_sync` picks the synchronous path for a decision.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from sim.compress.spec import SAME_INDEX
from sim.control.types import Decision
from sim.errors import InputError

from ..records import Accum, Interval
from ..state import CompressionHookState
from .artopk import artopk_exchange
from .dense import dense_async
from .lowrank import lowrank_exchange
from .payload import feedback_exchange

__all__ = ["compressed_sync", "dense_async"]


def compressed_sync(
    state: CompressionHookState, cur: Accum, bucket: dist.GradBucket, d: Decision
) -> torch.Tensor:
    """Compress ``bucket`` as ``d`` decides, exchange it, write the average back into the
    bucket's buffer and return it; records time and gain terms in ``cur``."""
    buf = bucket.buffer()
    key, perm = state.bank.key_and_perm(bucket)
    # Compressor state lives in the key's canonical layout; DDP's pre-rebuild buckets (e.g. the
    # first iteration after a restore) may order the same parameters differently.
    flat = buf if perm is None else buf.index_select(0, perm)
    comp = state.bank.compressor(d.compressor)
    t0 = state.clock()

    if d.collective.startswith("artopk"):
        out, terms, num, den, t1, t2 = artopk_exchange(state, cur, comp, flat, d, key)
    elif comp.layout == "lowrank":
        if d.collective not in SAME_INDEX:
            raise InputError(f"{d.compressor} needs an allreduce collective, not {d.collective!r}")
        out, terms, num, den, t1, t2 = lowrank_exchange(state, comp, flat, d, key)
    else:
        out, terms, num, den, t1, t2 = feedback_exchange(state, cur, comp, flat, d, key)
    cur.intervals.append(Interval(t1, t2, True, terms))
    if perm is None:
        buf.copy_(out.view_as(buf))
    else:
        buf.index_copy_(0, perm, out.reshape(-1))
    cur.compress_s += (t1 - t0) + (state.clock() - t2)
    cur.gain_num += num
    cur.gain_den += den
    return buf
