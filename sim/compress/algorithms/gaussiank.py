"""Gaussian-k (Shi et al., GaussianKSGD): Gaussian quantile threshold with a few corrections."""

from __future__ import annotations

import math

from sim.errors import InputError

from ..base import Key, register_compressor
from ..kernels import payloads
from ..kernels.lazy import torch
from ..kernels.payloads import SPARSE_COLLECTIVES, builtin_spec
from ..kernels.sparse import ThresholdEstimator, indices_above

__all__ = ["GaussiankCompressor"]

#: The analytic spec (payload, compute model, collectives) and description.
SPEC = builtin_spec(
    "gaussiank",
    SPARSE_COLLECTIVES,
    payloads.sparse,
    "Gaussian-k: Gaussian quantile threshold, halved or x1.5 until within [2k/3, 4k/3].",
)


@register_compressor("gaussiank")
class GaussiankCompressor(ThresholdEstimator):
    """Assume zero-mean Gaussian gradients: threshold ``sigma * sqrt(2) * erfinv(1 - d)`` on |g|
    (``d`` the density among nonzeros), then halve it (too few) or multiply by 1.5 (too many)
    until the count is within ``[2k/3, 4k/3]`` or ``max_iters`` corrections were made.

    Args:
        max_iters: most threshold corrections per call.
    """

    density_band = (2.0 / 3.0, 4.0 / 3.0)

    def __init__(self, *, max_iters: int = 10, seed: int = 0) -> None:
        super().__init__(seed=seed)
        if max_iters < 0:
            raise InputError(f"gaussiank max_iters must be >= 0, got {max_iters!r}")
        self.max_iters = int(max_iters)

    def select_nonzero(
        self, a: torch.Tensor, k: int, nnz: torch.Tensor, *, key: Key, step: int
    ) -> torch.Tensor:
        """Quantile threshold, corrected multiplicatively (the threshold stays on the device;
        the corrections use only the sizes of the index tensors)."""
        count_nz = nnz.clamp_min(1.0)
        sigma = torch.sqrt(torch.sum(a.double() ** 2) / count_nz)
        d = (k / count_nz).clamp_max(1.0)
        quantile = sigma * math.sqrt(2.0) * torch.erfinv(1.0 - d)
        threshold = torch.where(nnz <= k, torch.zeros_like(quantile), quantile)
        lo, hi = 2.0 * k / 3.0, 4.0 * k / 3.0
        idx = indices_above(a, threshold)
        for _ in range(self.max_iters):
            count = idx.numel()
            if lo <= count <= hi:
                break
            threshold = threshold * (0.5 if count < lo else 1.5)
            idx = indices_above(a, threshold)
        return idx
