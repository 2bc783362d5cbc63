"""RedSync's threshold search (Fang et al., 2019): bisection between the mean and the max."""

from __future__ import annotations

from sim.errors import InputError

from ..base import Key, register_compressor
from ..kernels import payloads
from ..kernels.lazy import torch
from ..kernels.payloads import SPARSE_COLLECTIVES, builtin_spec
from ..kernels.sparse import ThresholdEstimator, indices_above

__all__ = ["RedsyncCompressor"]

#: The analytic spec (payload, compute model, collectives) and description.
SPEC = builtin_spec(
    "redsync",
    SPARSE_COLLECTIVES,
    payloads.sparse,
    "RedSync: bisect mean + r (max - mean) until k < nnz < 2k.",
)


@register_compressor("redsync")
class RedsyncCompressor(ThresholdEstimator):
    """Threshold ``mean + r (max - mean)`` of the nonzero |g|, bisecting ``r`` in [0, 1] until
    ``k <= count < 2k`` or ``max_iters`` halvings were made (then the last candidate with at
    least ``k`` entries, if any, is used).

    Args:
        max_iters: most bisection steps per call.
    """

    density_band = (1.0, 2.0)

    def __init__(self, *, max_iters: int = 20, seed: int = 0) -> None:
        super().__init__(seed=seed)
        if max_iters < 1:
            raise InputError(f"redsync max_iters must be >= 1, got {max_iters!r}")
        self.max_iters = int(max_iters)

    def select_nonzero(
        self, a: torch.Tensor, k: int, nnz: torch.Tensor, *, key: Key, step: int
    ) -> torch.Tensor:
        """Bisect the ratio ``r``; larger ``r`` means a higher threshold and fewer entries.

        Mean and maximum stay on the device; the bisection uses only the sizes of the index
        tensors.
        """
        everything = nnz <= k  # then every nonzero is sent: threshold 0
        mean = torch.where(everything, 0.0, torch.sum(a, dtype=torch.float64) / nnz.clamp_min(1.0))
        top = torch.where(everything, 0.0, torch.max(a).double())
        lo, hi = 0.0, 1.0
        best: torch.Tensor | None = None
        idx = indices_above(a, mean)
        for _ in range(self.max_iters):
            r = 0.5 * (lo + hi)
            idx = indices_above(a, mean + r * (top - mean))
            count = idx.numel()
            if count >= k:
                best = idx
            if k <= count < 2 * k:
                return idx
            if count >= 2 * k:
                lo = r
            else:
                hi = r
        return best if best is not None else idx
