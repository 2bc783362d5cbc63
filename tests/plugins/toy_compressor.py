"""A toy compressor in one file: its analytic spec (payload, compute model, collectives), its
metadata and its torch algorithm, registered together.

``toy-stride`` keeps every ``s``-th element, ``s = round(1 / density)``: the same indices on every
rank, so its values can be summed by any allreduce (a "same-index" payload).
A package would expose this module under the ``compctl.compressors`` entry-point group.
"""

from __future__ import annotations

import math

import torch

from sim.compress.base import Compressed, Compressor, Key, register_compressor
from sim.compress.spec import SAME_INDEX, CompressorSpec, Payload, register_spec

NAME = "toy-stride"


def kept(numel: int, density: float) -> int:
    """Elements kept of a ``numel``-element tensor at ``density``."""
    return math.ceil(numel / max(1, round(1.0 / density))) if numel else 0


SPEC = register_spec(
    CompressorSpec(
        NAME,
        SAME_INDEX + ("allgather",),
        lambda numel, density, dtype_bytes: Payload(float(kept(numel, density) * dtype_bytes)),
        compute_fixed_s=2e-5,
        compute_per_element_s=1e-10,
        description="Toy: every round(1/density)-th element (same indices on every rank).",
        gain_like="randomk",  # uniformly spread entries, like random-k
    )
)


@register_compressor(NAME)
class StrideCompressor(Compressor):
    """Every ``round(1 / density)``-th element; values only on the wire."""

    layout = "same-index"
    density_band = (0.5, 2.0)

    def compress(self, x: torch.Tensor, density: float, *, key: Key = 0, step: int = 0) -> Compressed:
        """Take the strided elements."""
        flat = x.reshape(-1)
        idx = torch.arange(0, flat.numel(), max(1, round(1.0 / density)), device=flat.device)
        return self._wrap(x, [flat.index_select(0, idx)], {"indices": idx}, idx.numel())

    def decompress(self, c: Compressed) -> torch.Tensor:
        """Scatter the values back at their indices."""
        values = c.tensors[0]
        out = torch.zeros(c.numel, dtype=c.dtype, device=values.device)
        out.index_copy_(0, c.ctx["indices"], values.to(c.dtype))
        return out.reshape(c.shape)
