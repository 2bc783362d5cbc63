"""Exact top-k by magnitude (torch.topk): the quality baseline of every estimator."""

from __future__ import annotations

from ..base import Key, register_compressor
from ..kernels import payloads
from ..kernels.lazy import torch
from ..kernels.payloads import SPARSE_COLLECTIVES, builtin_spec
from ..kernels.sparse import SparseCompressor

__all__ = ["TopkCompressor"]

#: The analytic spec (payload, compute model, collectives) and description.
SPEC = builtin_spec(
    "topk",
    SPARSE_COLLECTIVES,
    payloads.sparse,
    "Exact top-k by magnitude (torch.topk): values + int32 indices.",
    exact_k=True,
)


@register_compressor("topk")
class TopkCompressor(SparseCompressor):
    """The ``k = ceil(density * numel)`` largest magnitudes, exactly."""

    density_band = (1.0, 1.0)

    def select(self, flat: torch.Tensor, k: int, *, key: Key, step: int) -> torch.Tensor:
        """``torch.topk(|x|, k)`` indices (unsorted: order does not matter on the wire)."""
        return torch.topk(self.magnitudes(flat), k, sorted=False).indices
