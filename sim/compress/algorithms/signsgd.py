"""signSGD (majority vote) and EF-signSGD (scaled sign with error feedback): one bit per element."""

from __future__ import annotations

from collections.abc import Sequence

from ..base import Compressed, Compressor, Key, k_for, register_compressor
from ..kernels import payloads
from ..kernels.lazy import torch
from ..kernels.payloads import builtin_spec
from ..spec import ALLGATHERS

__all__ = ["SignsgdCompressor", "EfSignsgdCompressor", "pack_signs", "unpack_signs"]

#: The analytic spec (payload, compute model, collectives) and description of each variant.
SPEC_SIGNSGD = builtin_spec(
    "signsgd",
    ALLGATHERS,
    payloads.sign,
    "signSGD: one bit per element, majority-vote aggregation.",
)
SPEC_EFSIGNSGD = builtin_spec(
    "efsignsgd",
    ALLGATHERS,
    payloads.ef_sign,
    "EF-signSGD: scaled sign (mean |g|), one bit per element + one scale.",
)

_WEIGHTS = (128, 64, 32, 16, 8, 4, 2, 1)


def pack_signs(flat: torch.Tensor) -> torch.Tensor:
    """uint8 tensor of ``ceil(n / 8)`` bytes; bit set where ``flat >= 0`` (most significant first)."""
    n = flat.numel()
    bits = (flat >= 0).to(torch.uint8)
    pad = (-n) % 8
    if pad:
        bits = torch.cat([bits, torch.zeros(pad, dtype=torch.uint8, device=flat.device)])
    w = torch.tensor(_WEIGHTS, dtype=torch.uint8, device=flat.device)
    return (bits.view(-1, 8) * w).sum(dim=1).to(torch.uint8)


def unpack_signs(packed: torch.Tensor, numel: int, dtype: torch.dtype) -> torch.Tensor:
    """``+1``/``-1`` tensor of ``numel`` elements from :func:`pack_signs`' bytes."""
    w = torch.tensor(_WEIGHTS, dtype=torch.uint8, device=packed.device)
    bits = (packed.unsqueeze(1) & w) != 0
    return bits.reshape(-1)[:numel].to(dtype) * 2 - 1


@register_compressor("signsgd")
class SignsgdCompressor(Compressor):
    """Send ``sign(x)`` as packed bits; aggregate by majority vote (sign of the sum).

    ``tensors == [packed (uint8, ceil(n/8))]``. Density is ignored. Without a scale, the
    decompressed tensor has unit magnitude: use it with a small learning rate (Bernstein et al.).
    """

    layout = "quantized"
    density_band = (1.0, 1.0)
    targets_density = False

    def compress(self, x: torch.Tensor, density: float, *, key: Key = 0, step: int = 0) -> Compressed:
        """Pack the signs."""
        k_for(x.numel(), density)
        return self._wrap(x, [pack_signs(x.reshape(-1))], {}, x.numel())

    def decompress(self, c: Compressed) -> torch.Tensor:
        """``+1``/``-1`` in the original shape and dtype."""
        return unpack_signs(c.tensors[0], c.numel, c.dtype).reshape(c.shape)

    def aggregate(self, tensors: Sequence[torch.Tensor]) -> torch.Tensor:
        """Majority vote: the sign of the sum (0 on a tie)."""
        if not tensors:
            raise ValueError("aggregate needs at least one tensor")
        return torch.sign(torch.stack(list(tensors)).sum(dim=0))


@register_compressor("efsignsgd")
class EfSignsgdCompressor(Compressor):
    """Scaled sign (Karimireddy et al., 2019): ``(||x||_1 / n) * sign(x)``; pair with
    ``make_memory("residual")``. ``tensors == [packed (uint8), scale (float32, 1)]``;
    aggregated by the mean."""

    layout = "quantized"
    density_band = (1.0, 1.0)
    targets_density = False

    def compress(self, x: torch.Tensor, density: float, *, key: Key = 0, step: int = 0) -> Compressed:
        """Pack the signs and the mean magnitude."""
        k_for(x.numel(), density)
        flat = x.reshape(-1)
        n = max(1, flat.numel())
        scale = (torch.linalg.vector_norm(flat.float(), 1) / n).reshape(1)
        return self._wrap(x, [pack_signs(flat), scale], {}, x.numel())

    def decompress(self, c: Compressed) -> torch.Tensor:
        """``scale * sign`` in the original shape and dtype."""
        packed, scale = c.tensors
        return (unpack_signs(packed, c.numel, torch.float32) * scale).to(c.dtype).reshape(c.shape)
