"""Built-in compressor specs (payload models). Compute-time constants are placeholders until
the compressor benchmark calibrates them."""

from __future__ import annotations

import math

from .spec import SAME_INDEX, SPARSE, CompressorSpec, Payload, register_spec

__all__: list[str] = []


def _k(numel: int, density: float) -> int:
    return max(1, math.ceil(numel * density)) if numel else 0


register_spec(
    CompressorSpec(
        "none",
        SAME_INDEX + ("allgather",),
        lambda n, d, b: Payload(float(n * b)),
        description="No compression (dense tensor).",
    )
)
register_spec(
    CompressorSpec(
        "topk",
        SPARSE,
        lambda n, d, b: Payload(float(_k(n, d) * b), float(_k(n, d) * 4)),
        description="Exact top-k by magnitude: values + 32-bit indices.",
    )
)
register_spec(
    CompressorSpec(
        "randomk",
        SAME_INDEX + ("allgather",),
        lambda n, d, b: Payload(float(_k(n, d) * b)),
        description="Random-k with a seed shared by all ranks: same indices, values only.",
    )
)
