"""Exact top-k by magnitude (torch.topk): the quality baseline of every estimator."""

from __future__ import annotations

import torch

from .base import Key, register_compressor
from .sparse import SparseCompressor

__all__ = ["TopkCompressor"]


@register_compressor("topk")
class TopkCompressor(SparseCompressor):
    """The ``k = ceil(density * numel)`` largest magnitudes, exactly."""

    density_band = (1.0, 1.0)

    def select(self, flat: torch.Tensor, k: int, *, key: Key, step: int) -> torch.Tensor:
        """``torch.topk(|x|, k)`` indices (unsorted: order does not matter on the wire)."""
        return torch.topk(self.magnitudes(flat), k, sorted=False).indices
