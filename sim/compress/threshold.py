"""Fixed-threshold sparsification: send every |g| above a constant (density is not targeted)."""

from __future__ import annotations

import torch

from sim.errors import InputError

from .base import Key, register_compressor
from .sparse import SparseCompressor
from .threshold_stats import indices_above_abs

__all__ = ["ThresholdCompressor"]


@register_compressor("threshold")
class ThresholdCompressor(SparseCompressor):
    """Keep ``|x| > threshold``; the density argument is only validated.

    Args:
        threshold: magnitude threshold (> 0), in gradient units.
    """

    density_band = None
    targets_density = False

    def __init__(self, *, threshold: float = 1e-3, seed: int = 0) -> None:
        super().__init__(seed=seed)
        if not threshold > 0.0:
            raise InputError(f"threshold must be > 0, got {threshold!r}")
        self.threshold = float(threshold)

    def select(self, flat: torch.Tensor, k: int, *, key: Key, step: int) -> torch.Tensor:
        """Every index above the threshold."""
        return indices_above_abs(flat, self.threshold)
