"""No compression: the dense tensor travels as it is."""

from __future__ import annotations

from ..base import Compressed, Compressor, Key, k_for, register_compressor
from ..kernels import payloads
from ..kernels.lazy import torch
from ..kernels.payloads import DENSE_COLLECTIVES, builtin_spec

__all__ = ["NoCompressor"]

#: The analytic spec (payload, compute model, collectives) and description.
SPEC = builtin_spec(
    "none",
    DENSE_COLLECTIVES,
    payloads.dense,
    "No compression (dense tensor).",
)


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
