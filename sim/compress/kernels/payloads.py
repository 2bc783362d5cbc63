"""Payload models of the built-in specs: ``(numel, density, dtype_bytes) -> Payload`` counting
what the torch implementations really send (a test checks ``Compressed.payload_bytes`` against
them), and :func:`builtin_spec`, which registers a spec with its calibrated compute model."""

from __future__ import annotations

import math
from collections.abc import Callable

from ..spec import ALLGATHERS, SAME_INDEX, SPARSE, CompressorSpec, Payload, register_spec
from .calibration import registered_compute_model
from .lowrank_shape import matrix_shape, rank_for

__all__ = [
    "DENSE_COLLECTIVES",
    "SPARSE_COLLECTIVES",
    "builtin_spec",
    "dense",
    "ef_sign",
    "fp16",
    "powersgd",
    "qsgd",
    "same_index",
    "sign",
    "sparse",
]

INDEX_BYTES = 4  # int32 indices on the wire
SCALE_BYTES = 4  # one float32 norm or scale per tensor

#: Collectives for per-worker index sets (allgather) and for AR-Topk (owner's indices).
SPARSE_COLLECTIVES = SPARSE
#: Same-index collectives, and the allgathers (which carry anything).
DENSE_COLLECTIVES = SAME_INDEX + ALLGATHERS


def _k(numel: int, density: float) -> int:
    return min(numel, max(1, math.ceil(numel * density))) if numel else 0


def dense(n: int, d: float, b: int) -> Payload:
    """Every element at full width."""
    return Payload(float(n * b))


def fp16(n: int, d: float, b: int) -> Payload:
    """Every element as float16."""
    return Payload(float(n * 2))


def sparse(n: int, d: float, b: int) -> Payload:
    """``k`` values and ``k`` int32 indices."""
    k = _k(n, d)
    return Payload(float(k * b), float(k * INDEX_BYTES))


def same_index(n: int, d: float, b: int) -> Payload:
    """``k`` values at indices every rank knows."""
    return Payload(float(_k(n, d) * b))


def qsgd(n: int, d: float, b: int) -> Payload:
    """One int8 (sign * level) per element and one norm."""
    return Payload(float(n), 0.0, float(SCALE_BYTES))


def sign(n: int, d: float, b: int) -> Payload:
    """One bit per element."""
    return Payload(float(math.ceil(n / 8)))


def ef_sign(n: int, d: float, b: int) -> Payload:
    """One bit per element and one scale."""
    return Payload(float(math.ceil(n / 8)), 0.0, float(SCALE_BYTES))


def powersgd(n: int, d: float, b: int) -> Payload:
    """The rank-r factors P and Q of the bucket as a matrix."""
    rows, cols = matrix_shape(n)
    return Payload(float((rows + cols) * rank_for(n, d) * b))


def builtin_spec(
    name: str,
    collectives: tuple[str, ...],
    payload_fn: Callable[[int, float, int], Payload],
    description: str,
    *,
    exact_k: bool = False,
    gain_like: str = "topk",
) -> CompressorSpec:
    """Register the spec of built-in compressor ``name`` with its calibrated compute model
    (``exact_k`` and ``gain_like``: see :class:`~sim.compress.spec.CompressorSpec`)."""
    fixed_s, per_element_s = registered_compute_model(name)
    return register_spec(
        CompressorSpec(
            name,
            collectives,
            payload_fn,
            compute_fixed_s=fixed_s,
            compute_per_element_s=per_element_s,
            description=description,
            exact_k=exact_k,
            gain_like=gain_like,
        )
    )
