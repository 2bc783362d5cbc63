"""DGC's sparsifier (Lin et al., ICLR 2018): threshold from the exact top-k of a random sample."""

from __future__ import annotations

import math

from sim.errors import InputError

from ..base import Key, generator_for, register_compressor
from ..kernels import payloads
from ..kernels.lazy import torch
from ..kernels.payloads import SPARSE_COLLECTIVES, builtin_spec
from ..kernels.sparse import ThresholdEstimator
from .randomk import random_indices

__all__ = ["DgcCompressor"]

#: The analytic spec (payload, compute model, collectives) and description.
SPEC = builtin_spec(
    "dgc",
    SPARSE_COLLECTIVES,
    payloads.sparse,
    "DGC: threshold from exact top-k of a 1% sample, then top-k of the survivors.",
)


@register_compressor("dgc")
class DgcCompressor(ThresholdEstimator):
    """Sample a fraction of |g|, take the exact top-k of the sample (same density) as the
    threshold, select above it; if more than ``k`` pass, keep the exact top-k of those.

    Pair with ``make_memory("dgc")`` for DGC's momentum correction.

    Args:
        sample_fraction: fraction of elements sampled (DGC uses 0.1% to 1%).
        min_sample: floor on the sample size, so small tensors still get a usable estimate.
    """

    density_band = (0.5, 1.0)

    def __init__(self, *, sample_fraction: float = 0.01, min_sample: int = 1000, seed: int = 0) -> None:
        super().__init__(seed=seed)
        if not (0.0 < sample_fraction <= 1.0):
            raise InputError(f"dgc sample_fraction must be in (0, 1], got {sample_fraction!r}")
        self.sample_fraction = float(sample_fraction)
        self.min_sample = int(min_sample)

    def select_nonzero(
        self, a: torch.Tensor, k: int, nnz: torch.Tensor, *, key: Key, step: int
    ) -> torch.Tensor:
        """Sampled threshold, then an exact top-k among the survivors if there are too many.

        The threshold stays on the device; only the survivor count (a size) reaches the host.
        """
        n = a.numel()
        size = min(n, max(self.min_sample, math.ceil(n * self.sample_fraction)))
        gen = generator_for(self.seed, key, step, a.device)
        sample = a.index_select(0, random_indices(n, size, gen, a.device))
        k_sample = max(1, math.ceil(size * k / n))
        threshold = torch.topk(sample, k_sample, sorted=False).values.min()
        threshold = torch.where(nnz <= k, torch.zeros_like(threshold), threshold)
        # a zero threshold (a sample of zeros, or few nonzeros) sends every nonzero
        mask = torch.where(threshold > 0, a >= threshold, a > 0)
        idx = torch.nonzero(mask).squeeze(1)
        if idx.numel() > k:
            top = torch.topk(a.index_select(0, idx), k, sorted=False).indices
            idx = idx.index_select(0, top)
        return idx
