"""QSGD (Alistarh et al., 2017): unbiased stochastic quantisation to ``levels`` levels."""

from __future__ import annotations

from sim.errors import InputError

from ..base import Compressed, Compressor, Key, generator_for, k_for, register_compressor
from ..kernels import payloads
from ..kernels.lazy import torch
from ..kernels.payloads import builtin_spec
from ..spec import ALLGATHERS

__all__ = ["QsgdCompressor"]

#: The analytic spec (payload, compute model, collectives) and description.
SPEC = builtin_spec(
    "qsgd",
    ALLGATHERS,
    payloads.qsgd,
    "QSGD: stochastic quantisation to 127 levels, int8 per element + one norm.",
)


@register_compressor("qsgd")
class QsgdCompressor(Compressor):
    """``q_i = sign(x_i) * floor(|x_i| / ||x|| * s + u_i)`` with ``u_i ~ U[0, 1)``, sent as int8
    with the float32 norm; ``E[q_i ||x|| / s] = x_i``. Density is ignored.

    ``tensors == [levels (int8, numel), norm (float32, 1)]``; ranks have different norms, so
    payloads travel by allgather and are decompressed one by one.

    Args:
        levels: quantisation levels ``s`` in [1, 127] (int8 with sign).
    """

    layout = "quantized"
    density_band = (1.0, 1.0)
    targets_density = False

    def __init__(self, *, levels: int = 127, seed: int = 0) -> None:
        super().__init__(seed=seed)
        if not (1 <= levels <= 127):
            raise InputError(f"qsgd levels must be in [1, 127], got {levels!r}")
        self.levels = int(levels)

    def compress(self, x: torch.Tensor, density: float, *, key: Key = 0, step: int = 0) -> Compressed:
        """Stochastic rounding with a generator drawn from (seed, key, step)."""
        k_for(x.numel(), density)
        flat = x.reshape(-1).float()
        norm = torch.linalg.vector_norm(flat).reshape(1)
        if float(norm) == 0.0:
            q = torch.zeros(flat.numel(), dtype=torch.int8, device=flat.device)
        else:
            gen = generator_for(self.seed, key, step, flat.device)
            noise = torch.rand(flat.numel(), generator=gen, device=flat.device)
            mag = torch.floor(flat.abs() / norm * self.levels + noise).clamp_(max=self.levels)
            q = (torch.sign(flat) * mag).to(torch.int8)
        return self._wrap(x, [q, norm], {}, x.numel())

    def decompress(self, c: Compressed) -> torch.Tensor:
        """``q * norm / s`` in the original dtype and shape."""
        q, norm = c.tensors
        return (q.float() * (norm / self.levels)).to(c.dtype).reshape(c.shape)
