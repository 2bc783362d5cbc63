"""Random-k with a seed shared by every rank: same indices everywhere, so allreduce works."""

from __future__ import annotations

from ..base import Compressed, Compressor, Key, generator_for, k_for, register_compressor
from ..kernels import payloads
from ..kernels.lazy import torch
from ..kernels.payloads import DENSE_COLLECTIVES, builtin_spec

__all__ = ["RandomkCompressor", "random_indices"]

#: The analytic spec (payload, compute model, collectives) and description.
SPEC = builtin_spec(
    "randomk",
    DENSE_COLLECTIVES,
    payloads.same_index,
    "Random-k with a seed shared by all ranks: same indices, values only.",
    gain_like="randomk",
)


def random_indices(numel: int, k: int, gen: torch.Generator, device: torch.device) -> torch.Tensor:
    """``k`` distinct indices in ``[0, numel)``, uniformly, sorted, from ``gen`` (on its device).

    For small ``k`` this draws with replacement, drops duplicates and keeps a random ``k`` of
    the distinct ones (a uniform k-subset by symmetry) in O(k log k) instead of an O(numel)
    permutation.
    """
    if 4 * k >= numel:
        return torch.sort(torch.randperm(numel, generator=gen, device=device)[:k]).values
    draws = k + k // 4 + 16
    while True:
        cand = torch.unique(torch.randint(numel, (draws,), generator=gen, device=device))
        if cand.numel() >= k:
            break
        draws *= 2
    keep = torch.randperm(cand.numel(), generator=gen, device=device)[:k]
    return torch.sort(cand[keep]).values


@register_compressor("randomk")
class RandomkCompressor(Compressor):
    """Keep ``k = ceil(density * numel)`` uniformly random indices drawn from (seed, key, step).

    ``tensors == [values]``; the indices stay in ``ctx["indices"]`` and are the same on every
    rank given the same seed, key and step, so ranks' values can be summed with any allreduce.
    Values are not rescaled (use error feedback; an unbiased variant would scale by 1/density).
    """

    layout = "same-index"
    density_band = (1.0, 1.0)

    def compress(self, x: torch.Tensor, density: float, *, key: Key = 0, step: int = 0) -> Compressed:
        """Draw the shared indices and send the values there."""
        flat = x.reshape(-1)
        k = k_for(flat.numel(), density)
        gen = generator_for(self.seed, key, step, flat.device)
        idx = random_indices(flat.numel(), k, gen, flat.device) if k else torch.zeros(0, dtype=torch.long, device=flat.device)
        return self._wrap(x, [flat.index_select(0, idx)], {"indices": idx}, k)

    def decompress(self, c: Compressed) -> torch.Tensor:
        """Scatter the values at the shared indices."""
        values = c.tensors[0]
        out = torch.zeros(c.numel, dtype=c.dtype, device=values.device)
        out.index_copy_(0, c.ctx["indices"], values.to(c.dtype))
        return out.reshape(c.shape)
