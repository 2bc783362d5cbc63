"""Fixed-threshold sparsification: send every |g| above a constant (density is not targeted)."""

from __future__ import annotations

from typing import Any

from sim.errors import InputError

from ..base import Key, register_compressor
from ..kernels import payloads
from ..kernels.lazy import LazyModule, torch
from ..kernels.payloads import SPARSE_COLLECTIVES, builtin_spec
from ..kernels.sparse import SparseCompressor

# Imported on first use (it imports torch; loading the spec must not).
_stats: Any = LazyModule("sim.compress.kernels.threshold_stats")

__all__ = ["ThresholdCompressor"]

#: The analytic spec (payload, compute model, collectives) and description.
SPEC = builtin_spec(
    "threshold",
    SPARSE_COLLECTIVES,
    payloads.sparse,
    "Keep |g| above a fixed threshold (density is not targeted).",
)


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
        return _stats.indices_above_abs(flat, self.threshold)
