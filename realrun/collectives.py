"""The exchanges the hook runs for each kind of payload, on ``torch.distributed``.

Each function takes this rank's (already compensated and divided) contribution and returns the
average over ranks as a dense tensor, identical on every rank: every rank adds the gathered parts
in rank order, so floating-point rounding is the same everywhere.

* :func:`sparse_allgather_average`: each rank's own (values, indices); allgather, scatter-add.
* :func:`artopk_average`: the owner's indices are broadcast; every rank allreduces its values at
  those indices (seed 003's AR-Topk; STAR/VAR pick the owner).
* :func:`same_index_allreduce`: values at indices every rank already agrees on (random-k with a
  shared seed): one allreduce of the values.

Gloo does not let the caller pick ring or tree for an allreduce, so the ``*-ring`` and
``*-tree`` variants run the same transport; the collective's name still decides the alpha-beta
terms the emulation and the monitor use.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

__all__ = ["sparse_allgather_average", "artopk_average", "same_index_allreduce", "dense_allgather_average"]


def sparse_allgather_average(
    values: torch.Tensor,
    indices: torch.Tensor,
    numel: int,
    world_size: int,
    group: dist.ProcessGroup | None = None,
) -> torch.Tensor:
    """Average of every rank's sparse ``(values, indices)`` as a dense tensor of ``numel``.

    ``values`` should already be divided by ``world_size`` (divide before summing). Every rank
    must send the same number of elements (same density, same tensor size), which holds because
    all ranks take the same decision.
    """
    vals = [torch.empty_like(values) for _ in range(world_size)]
    idxs = [torch.empty_like(indices) for _ in range(world_size)]
    dist.all_gather(vals, values.contiguous(), group=group)
    dist.all_gather(idxs, indices.contiguous(), group=group)
    out = torch.zeros(numel, dtype=values.dtype, device=values.device)
    for v, i in zip(vals, idxs, strict=True):
        out.index_add_(0, i.long(), v)
    return out


def artopk_average(
    compensated: torch.Tensor,
    owner_indices: torch.Tensor,
    owner: int,
    world_size: int,
    group: dist.ProcessGroup | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """AR-Topk: broadcast the owner's indices, allreduce everyone's values at them.

    Args:
        compensated: this rank's error-compensated gradient (flat, not divided).
        owner_indices: on the owner, its chosen indices; elsewhere a tensor of the same shape and
            dtype (overwritten by the broadcast).
        owner: the rank whose indices are used.

    Returns:
        ``(average, indices)``: the dense average (zeros off the indices) and the indices used.
    """
    idx = owner_indices.contiguous()
    dist.broadcast(idx, src=owner, group=group)
    long_idx = idx.long()
    vals = compensated.index_select(0, long_idx).div_(world_size)
    dist.all_reduce(vals, group=group)
    out = torch.zeros_like(compensated)
    out.index_copy_(0, long_idx, vals)
    return out, idx


def same_index_allreduce(
    values: torch.Tensor,
    indices: torch.Tensor,
    numel: int,
    group: dist.ProcessGroup | None = None,
) -> torch.Tensor:
    """Allreduce ``values`` (already divided) that sit at ``indices`` shared by all ranks."""
    vals = values.contiguous()
    dist.all_reduce(vals, group=group)
    out = torch.zeros(numel, dtype=values.dtype, device=values.device)
    out.index_copy_(0, indices.long(), vals)
    return out


def dense_allgather_average(
    divided: torch.Tensor, world_size: int, group: dist.ProcessGroup | None = None
) -> torch.Tensor:
    """Dense gradients through an allgather (the ``none`` compressor on ``allgather``)."""
    parts = [torch.empty_like(divided) for _ in range(world_size)]
    dist.all_gather(parts, divided.contiguous(), group=group)
    out = parts[0].clone()
    for p in parts[1:]:
        out.add_(p)
    return out
