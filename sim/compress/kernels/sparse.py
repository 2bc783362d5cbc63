"""The shared shape of every sparsifier: pick indices, send (values, int32 indices).

Subclasses only choose indices (:meth:`SparseCompressor.select`); the payload, decompression
and the zero handling of threshold estimators live here once.
"""

from __future__ import annotations

import abc

from ..base import Compressed, Compressor, Key, k_for, sparse_from
from .lazy import torch

__all__ = ["SparseCompressor", "ThresholdEstimator", "Workspace", "indices_above"]

_BLOCK = 64  # elements per block in the blocked search of indices_above


def indices_above(a: torch.Tensor, threshold: float | torch.Tensor) -> torch.Tensor:
    """Indices (int64, ascending) of the entries of flat ``a`` strictly above ``threshold`` (a
    float or a 0-d tensor on ``a``'s device: nothing is read back to the host).

    A plain ``nonzero(a > t)`` writes a full-size mask and scans it. When few entries pass,
    it is several times cheaper to take the maximum of each 64-element block, keep the blocks
    whose maximum passes, and search only inside those; when many pass, the plain form wins.
    """
    n = a.numel()
    nb = n // _BLOCK
    if nb < 16:
        return torch.nonzero(a > threshold).squeeze(1)
    body = a[: nb * _BLOCK].view(nb, _BLOCK)
    blocks = torch.nonzero(body.amax(dim=1) > threshold).squeeze(1)
    if blocks.numel() * 4 > nb:
        return torch.nonzero(a > threshold).squeeze(1)
    hits = torch.nonzero(body.index_select(0, blocks) > threshold)
    idx = blocks.index_select(0, hits[:, 0]) * _BLOCK + hits[:, 1]
    if nb * _BLOCK < n:
        tail = torch.nonzero(a[nb * _BLOCK :] > threshold).squeeze(1) + nb * _BLOCK
        idx = torch.cat([idx, tail])
    return idx


class Workspace:
    """Reusable scratch buffers, one per (name, device, dtype), grown to the largest request.

    Fresh multi-megabyte tensors cost page faults on every call (on one CPU core an
    out-of-place ``abs`` of 10M floats takes ~7x longer than writing into a reused buffer), so
    the estimators write their temporaries here. Not shared between threads.
    """

    def __init__(self) -> None:
        self._buffers: dict[tuple[str, torch.device, torch.dtype], torch.Tensor] = {}

    def get(
        self, name: str, numel: int, like: torch.Tensor, dtype: torch.dtype | None = None
    ) -> torch.Tensor:
        """A flat buffer of ``numel`` elements on ``like``'s device (contents undefined)."""
        dt = dtype or like.dtype
        key = (name, like.device, dt)
        buf = self._buffers.get(key)
        if buf is None or buf.numel() < numel:
            buf = torch.empty(numel, dtype=dt, device=like.device)
            self._buffers[key] = buf
        return buf[:numel]

    def clear(self) -> None:
        """Free every buffer."""
        self._buffers.clear()


class SparseCompressor(Compressor):
    """A sparsifier: ``tensors == [values, indices]``, indices int32, each rank its own."""

    layout = "sparse"

    def __init__(self, *, seed: int = 0) -> None:
        super().__init__(seed=seed)
        self.workspace = Workspace()

    @abc.abstractmethod
    def select(self, flat: torch.Tensor, k: int, *, key: Key, step: int) -> torch.Tensor:
        """Indices (int64) to send, given the flat tensor and the target count ``k``."""

    def magnitudes(self, flat: torch.Tensor) -> torch.Tensor:
        """``|flat|`` in a reused workspace buffer (valid until the next call)."""
        return torch.abs(flat, out=self.workspace.get("abs", flat.numel(), flat))

    def compress(
        self, x: torch.Tensor, density: float, *, key: Key = 0, step: int = 0
    ) -> Compressed:
        """Select indices and pack ``[values, int32 indices]``."""
        flat = x.reshape(-1)
        if flat.numel() >= 2**31:
            raise ValueError(
                "sparse payloads use int32 indices: tensors must have < 2**31 elements"
            )
        k = k_for(flat.numel(), density)
        if k == 0:
            idx = torch.zeros(0, dtype=torch.long, device=x.device)
        else:
            idx = self.select(flat, k, key=key, step=step)
        values = flat.index_select(0, idx)
        return self._wrap(x, [values, idx.to(torch.int32)], {}, int(idx.numel()))

    def decompress(self, c: Compressed) -> torch.Tensor:
        """Scatter the values into zeros of the original shape."""
        values, idx = c.tensors[0], c.tensors[1]
        return sparse_from(idx, values, c.numel, dtype=c.dtype).reshape(c.shape)


class ThresholdEstimator(SparseCompressor):
    """A sparsifier that estimates a magnitude threshold instead of sorting.

    Exact zeros (common in ReLU networks) are never worth sending and would bias every fit, so
    the estimate works on the nonzero entries with the density rescaled to them; if there are no
    more than ``k`` nonzeros, all of them are sent (a threshold of 0). The count of nonzeros stays
    on the device, so subclasses fold that case into their threshold with ``torch.where``.
    """

    def select(self, flat: torch.Tensor, k: int, *, key: Key, step: int) -> torch.Tensor:
        """Count the nonzeros on the device, then defer to :meth:`select_nonzero`."""
        a = self.magnitudes(flat)
        nnz = torch.count_nonzero(a).to(torch.float64)
        return self.select_nonzero(a, k, nnz, key=key, step=step)

    @abc.abstractmethod
    def select_nonzero(
        self, a: torch.Tensor, k: int, nnz: torch.Tensor, *, key: Key, step: int
    ) -> torch.Tensor:
        """Indices for about ``k`` of the ``nnz`` (a 0-d float64 tensor) nonzero magnitudes in
        ``a``; every nonzero if ``nnz <= k``."""
