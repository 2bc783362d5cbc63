"""Half precision: every element, half the bytes."""

from __future__ import annotations

from ..base import Compressed, Compressor, Key, k_for, register_compressor
from ..kernels import payloads
from ..kernels.lazy import torch
from ..kernels.payloads import DENSE_COLLECTIVES, builtin_spec

__all__ = ["Fp16Compressor"]

#: The analytic spec (payload, compute model, collectives) and description.
SPEC = builtin_spec(
    "fp16",
    DENSE_COLLECTIVES,
    payloads.fp16,
    "Cast to float16: half the bytes, every element.",
)

_FP16_MAX = 65504.0


@register_compressor("fp16")
class Fp16Compressor(Compressor):
    """Cast to float16 (dense layout, summable by allreduce; density is ignored).

    Values beyond the float16 range are clamped rather than sent as inf; with error feedback the
    clipped part is carried to the next step.
    """

    layout = "dense"
    density_band = (1.0, 1.0)
    targets_density = False

    def compress(self, x: torch.Tensor, density: float, *, key: Key = 0, step: int = 0) -> Compressed:
        """``tensors == [x.flatten().half()]``."""
        k_for(x.numel(), density)
        half = x.reshape(-1).clamp(-_FP16_MAX, _FP16_MAX).to(torch.float16)
        return self._wrap(x, [half], {}, x.numel())

    def decompress(self, c: Compressed) -> torch.Tensor:
        """Back to the original dtype and shape."""
        return c.tensors[0].to(c.dtype).reshape(c.shape)
