"""Cache-friendly reductions over |x| for threshold estimators (no full-size temporaries).

On a CPU every full-length pass over a 10M-element gradient streams 40 MB through memory, and
every fresh full-length temporary costs page faults. The estimators need several statistics of
``|x|`` (count of nonzeros, sums, exceedances over a threshold, block maxima); computing them
chunk by chunk, with ``|x|`` of one chunk in a reused cache-resident buffer, reads ``x`` once per
set of statistics and never writes a full-size temporary. On CUDA a single chunk is used.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = [
    "BLOCK",
    "CHUNK",
    "AbsMoments",
    "abs_moments",
    "block_maxima_buffer",
    "exceedance_moments",
    "indices_above_abs",
]

#: Elements per chunk on CPU: 4 MiB of float32, cache-resident (L3) yet few enough chunks
#: that per-op dispatch (~10 us x 7 ops per chunk) stays small.
CHUNK = 1 << 20
#: Block size of the block-maximum search in :func:`indices_above_abs`.
BLOCK = 64


def _chunk(x: torch.Tensor) -> int:
    return max(1, x.numel()) if x.device.type != "cpu" else CHUNK


@dataclass(frozen=True)
class AbsMoments:
    """Moments of the nonzero ``|x|``: count, sum, sum of squares and sum of logs."""

    nnz: int
    total: float
    total_sq: float
    total_log: float


def abs_moments(x: torch.Tensor, *, squares: bool = False, logs: bool = False) -> AbsMoments:
    """Count and sums of ``|x|`` over its nonzero entries (squares and logs only if asked).

    Chunk sums are float32 (pairwise-summed by torch) and accumulate in Python floats.
    """
    step = _chunk(x)
    buf = torch.empty(min(step, x.numel()), dtype=x.dtype, device=x.device)
    nnz, total, total_sq, total_log = 0, 0.0, 0.0, 0.0
    for i in range(0, x.numel(), step):
        a = torch.abs(x[i : i + step], out=buf[: min(step, x.numel() - i)])
        nnz += int(torch.count_nonzero(a))
        total += float(a.sum())
        if squares:
            total_sq += float(torch.dot(a, a))
        if logs:
            # zeros -> 1 so they add log(1) = 0 to the sum over nonzeros
            total_log += float(a.masked_fill_(a == 0, 1.0).log_().sum())  # a is scratch
    return AbsMoments(nnz, total, total_sq, total_log)


def block_maxima_buffer(x: torch.Tensor) -> torch.Tensor:
    """An uninitialised buffer for the maxima of ``|x|`` over its complete 64-element blocks."""
    return torch.empty(x.numel() // BLOCK, dtype=x.dtype, device=x.device)


def exceedance_moments(
    x: torch.Tensor, threshold: float, *, squares: bool = False, maxima: torch.Tensor | None = None
) -> tuple[int, float, float]:
    """``(count, sum, sum of squares)`` of ``|x| - threshold`` over entries with ``|x| > threshold``.

    If ``maxima`` (from :func:`block_maxima_buffer`) is given, the block maxima of ``|x|`` are
    written into it on the way, while each chunk is in cache, so a later
    :func:`indices_above_abs` need not read ``x`` again.
    """
    step = _chunk(x)
    if step % BLOCK:
        step = x.numel()  # one chunk (non-CPU devices): block boundaries are trivially aligned
    buf = torch.empty(min(step, x.numel()), dtype=x.dtype, device=x.device)
    count, total, total_sq = 0.0, 0.0, 0.0
    for i in range(0, x.numel(), step):
        e = torch.abs(x[i : i + step], out=buf[: min(step, x.numel() - i)])
        if maxima is not None:
            full = e.numel() // BLOCK
            if full:
                torch.amax(
                    e[: full * BLOCK].view(full, BLOCK),
                    dim=1,
                    out=maxima[i // BLOCK : i // BLOCK + full],
                )
        e.sub_(threshold).relu_()
        total += float(e.sum())
        if squares:
            total_sq += float(torch.dot(e, e))
        count += float(e.sign_().sum())
    return int(count), total, total_sq


def indices_above_abs(
    x: torch.Tensor, threshold: float, maxima: torch.Tensor | None = None
) -> torch.Tensor:
    """Indices (int64, ascending) with ``|x| > threshold``, searching only 64-element blocks
    whose maximum passes (falls back to a plain scan when many blocks pass).

    ``maxima``: block maxima already computed by :func:`exceedance_moments`, if any.
    """
    n = x.numel()
    nb = n // BLOCK
    if nb < 16:
        return torch.nonzero(x.abs() > threshold).squeeze(1)
    body = x[: nb * BLOCK].view(nb, BLOCK)
    if maxima is None:
        rows = max(1, _chunk(x) // BLOCK)
        maxima = torch.empty(nb, dtype=x.dtype, device=x.device)
        buf = torch.empty(min(rows, nb), BLOCK, dtype=x.dtype, device=x.device)
        for r in range(0, nb, rows):
            part = torch.abs(body[r : r + rows], out=buf[: min(rows, nb - r)])
            torch.amax(part, dim=1, out=maxima[r : r + rows])
    blocks = torch.nonzero(maxima > threshold).squeeze(1)
    if blocks.numel() * 4 > nb:
        return torch.nonzero(x.abs() > threshold).squeeze(1)
    hits = torch.nonzero(body.index_select(0, blocks).abs() > threshold)
    idx = blocks.index_select(0, hits[:, 0]) * BLOCK + hits[:, 1]
    if nb * BLOCK < n:
        tail = torch.nonzero(x[nb * BLOCK :].abs() > threshold).squeeze(1) + nb * BLOCK
        idx = torch.cat([idx, tail])
    return idx
