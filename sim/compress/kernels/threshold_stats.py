"""Device-resident statistics of ``|x|`` for threshold estimators, one full pass each.

Every function returns tensors on ``x``'s device and never reads a value back to the host, so a
caller can chain passes (fit a threshold, count exceedances over it, fit again) without a host
synchronisation; the only host-visible size is that of the final index tensor.

Each pass is one pure function of torch ops run by :class:`sim.compress.fused.Fusable`: fused
into a single kernel by ``torch.compile`` (one read of ``x``), or, on the plain path, applied
chunk by chunk so temporaries stay cache-sized. Sums accumulate in float64 on both paths.
"""

from __future__ import annotations

import torch

from .fused import Fusable, use_fused

__all__ = [
    "BLOCK",
    "PLAIN_CHUNK",
    "tail_sums",
    "log_sums",
    "block_maxima",
    "indices_above_abs",
]

#: Elements per block of the block-maximum search in :func:`indices_above_abs`.
BLOCK = 32
#: Elements per chunk on the plain path (1 MiB of float32: stays in L2/L3).
PLAIN_CHUNK = 1 << 18

_F64 = torch.float64


def _tail_sums(x: torch.Tensor, eta: torch.Tensor) -> torch.Tensor:
    e = (x.abs() - eta).clamp_min(0.0)
    return torch.stack(
        [(e > 0).sum(dtype=_F64), e.sum(dtype=_F64), (e * e).sum(dtype=_F64)]
    )


def _log_sums(x: torch.Tensor) -> torch.Tensor:
    a = x.abs()
    # zeros -> 1 so they add log(1) = 0 to the sum over the nonzeros
    logs = torch.where(a > 0, a, torch.ones_like(a)).log()
    return torch.stack([(a > 0).sum(dtype=_F64), a.sum(dtype=_F64), logs.sum(dtype=_F64)])


def _block_maxima(body: torch.Tensor) -> torch.Tensor:
    return body.abs().amax(dim=1)


_TAIL = Fusable(_tail_sums)
_LOGS = Fusable(_log_sums)
_BMAX = Fusable(_block_maxima)


def _chunked_sum(fn: Fusable, x: torch.Tensor, *rest: torch.Tensor, fused: bool) -> torch.Tensor:
    if fused or x.numel() <= PLAIN_CHUNK:
        out: torch.Tensor = fn(x, *rest, fused=fused)
        return out
    total = fn(x[:PLAIN_CHUNK], *rest, fused=False)
    for i in range(PLAIN_CHUNK, x.numel(), PLAIN_CHUNK):
        total = total + fn(x[i : i + PLAIN_CHUNK], *rest, fused=False)
    return total


def tail_sums(x: torch.Tensor, eta: torch.Tensor, *, fused: bool | None = None) -> torch.Tensor:
    """``[count, sum, sum of squares]`` (float64) of ``|x| - eta`` over entries with ``|x| > eta``.

    With ``eta = 0`` these are the count of nonzeros and the sums of ``|x|`` and ``x^2``.
    ``eta`` is a 0-d tensor on ``x``'s device; ``fused=None`` picks the backend by size
    (:func:`sim.compress.fused.use_fused`).
    """
    f = use_fused(x) if fused is None else fused
    return _chunked_sum(_TAIL, x, eta.to(x.dtype), fused=f)


def log_sums(x: torch.Tensor, *, fused: bool | None = None) -> torch.Tensor:
    """``[nnz, sum |x|, sum ln|x|]`` (float64) over the nonzero entries of ``x``."""
    f = use_fused(x) if fused is None else fused
    return _chunked_sum(_LOGS, x, fused=f)


def block_maxima(x: torch.Tensor, *, fused: bool | None = None) -> torch.Tensor:
    """Maximum of ``|x|`` over each complete :data:`BLOCK`-element block (a trailing partial block
    is left out)."""
    f = use_fused(x) if fused is None else fused
    nb = x.numel() // BLOCK
    body = x[: nb * BLOCK].view(nb, BLOCK)
    rows = PLAIN_CHUNK // BLOCK
    if f or nb <= rows:
        out: torch.Tensor = _BMAX(body, fused=f)
        return out
    return torch.cat([_BMAX(body[r : r + rows], fused=False) for r in range(0, nb, rows)])


def _dense_indices(x: torch.Tensor, eta: torch.Tensor) -> torch.Tensor:
    n = x.numel()
    mask = torch.empty(n, dtype=torch.bool, device=x.device)
    step = n if x.device.type != "cpu" else PLAIN_CHUNK
    for i in range(0, n, step):
        part = x[i : i + step]
        torch.gt(part.abs(), eta, out=mask[i : i + part.numel()])
    return torch.nonzero(mask).squeeze(1)


def indices_above_abs(
    x: torch.Tensor, eta: torch.Tensor | float, *, fused: bool | None = None
) -> torch.Tensor:
    """Indices (int64, ascending) of the entries of flat ``x`` with ``|x| > eta``.

    One pass takes the maximum of each :data:`BLOCK`-element block; only blocks whose maximum
    passes are searched (a gather of a small fraction of ``x`` at sparse densities). When more
    than half the blocks pass, one masked scan is cheaper. ``eta`` may be a float or a 0-d
    tensor; nothing is read back to the host except the sizes of the index tensors.
    """
    t = torch.as_tensor(eta, dtype=x.dtype, device=x.device)
    n = x.numel()
    nb = n // BLOCK
    if nb < 16:
        return torch.nonzero(x.abs() > t).squeeze(1)
    maxima = block_maxima(x, fused=fused)
    blocks = torch.nonzero(maxima > t).squeeze(1)
    if blocks.numel() * 2 > nb:
        return _dense_indices(x, t)
    body = x[: nb * BLOCK].view(nb, BLOCK)
    hits = torch.nonzero(body.index_select(0, blocks).abs() > t)
    idx = blocks.index_select(0, hits[:, 0]) * BLOCK + hits[:, 1]
    if nb * BLOCK < n:
        tail = torch.nonzero(x[nb * BLOCK :].abs() > t).squeeze(1) + nb * BLOCK
        idx = torch.cat([idx, tail])
    return idx
