"""No compression: the dense tensor travels as it is."""

from __future__ import annotations

import torch

from .base import Compressed, Compressor, Key, k_for, register_compressor

__all__ = ["NoCompressor"]


@register_compressor("none")
class NoCompressor(Compressor):
    """Identity: ``tensors == [x.flatten()]`` (density is ignored)."""

    layout = "dense"
    density_band = (1.0, 1.0)
    targets_density = False

    def compress(self, x: torch.Tensor, density: float, *, key: Key = 0, step: int = 0) -> Compressed:
        """Send the flat tensor."""
        k_for(x.numel(), density)  # validates density
        return self._wrap(x, [x.reshape(-1)], {}, x.numel())

    def decompress(self, c: Compressed) -> torch.Tensor:
        """The tensor, in its original shape and dtype."""
        return c.tensors[0].to(c.dtype).reshape(c.shape)
