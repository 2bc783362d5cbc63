"""Built-in compressor specs: payload bytes and calibrated compute time, without torch.

Payload models count what the torch implementations really send (``Compressed.payload_bytes``
equals ``spec.payload(...).total_bytes`` for the density-targeting compressors; a test checks it).
Threshold-estimating sparsifiers (threshold, DGC, Gaussian-k, RedSync, SIDCo) are modelled at
their target density; their achieved density varies around it (see docs/compression.md).

Compute time (compress + decompress + error feedback, one tensor) is ``fixed_s + per_element_s *
numel`` per device, read from ``calibration.json`` beside this module. That file is data written
by ``compctl bench compressors --calibrate``; the specs use its ``"cpu"`` entry.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .lowrank_shape import matrix_shape, rank_for
from .spec import SAME_INDEX, SPARSE, CompressorSpec, Payload, register_spec

__all__ = ["CALIBRATION_PATH", "DEFAULT_DEVICE", "load_calibration", "compute_model"]

log = logging.getLogger(__name__)

#: The calibration data file (per device, per compressor: fixed_s and per_element_s).
CALIBRATION_PATH = Path(__file__).with_name("calibration.json")
#: The device whose calibration fills the registered specs.
DEFAULT_DEVICE = "cpu"

_INDEX_BYTES = 4  # int32 indices on the wire
_SCALE_BYTES = 4  # one float32 norm or scale per tensor


def load_calibration(path: Path = CALIBRATION_PATH) -> dict[str, Any]:
    """The calibration file as a dict (``{}`` with a log line if it is missing or unreadable)."""
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        log.warning("no compressor calibration (%s); compute times are 0", exc)
        return {}
    return data


def compute_model(name: str, device: str = DEFAULT_DEVICE, calibration: dict[str, Any] | None = None) -> tuple[float, float]:
    """``(fixed_s, per_element_s)`` of compressor ``name`` on ``device`` (zeros if uncalibrated)."""
    cal = load_calibration() if calibration is None else calibration
    entry = cal.get("devices", {}).get(device, {}).get(name)
    if not entry:
        return (0.0, 0.0)
    return (float(entry["fixed_s"]), float(entry["per_element_s"]))


def _k(numel: int, density: float) -> int:
    return min(numel, max(1, math.ceil(numel * density))) if numel else 0


def _dense(n: int, d: float, b: int) -> Payload:
    return Payload(float(n * b))


def _fp16(n: int, d: float, b: int) -> Payload:
    return Payload(float(n * 2))


def _sparse(n: int, d: float, b: int) -> Payload:
    k = _k(n, d)
    return Payload(float(k * b), float(k * _INDEX_BYTES))


def _same_index(n: int, d: float, b: int) -> Payload:
    return Payload(float(_k(n, d) * b))


def _qsgd(n: int, d: float, b: int) -> Payload:
    return Payload(float(n), 0.0, float(_SCALE_BYTES))  # one int8 (sign * level) per element


def _sign(n: int, d: float, b: int) -> Payload:
    return Payload(float(math.ceil(n / 8)))


def _ef_sign(n: int, d: float, b: int) -> Payload:
    return Payload(float(math.ceil(n / 8)), 0.0, float(_SCALE_BYTES))


def _powersgd(n: int, d: float, b: int) -> Payload:
    rows, cols = matrix_shape(n)
    return Payload(float((rows + cols) * rank_for(n, d) * b))


_SPARSE_COLLECTIVES = SPARSE
_DENSE_COLLECTIVES = SAME_INDEX + ("allgather",)

_BUILTIN: list[tuple[str, tuple[str, ...], Callable[[int, float, int], Payload], str]] = [
    ("none", _DENSE_COLLECTIVES, _dense, "No compression (dense tensor)."),
    ("fp16", _DENSE_COLLECTIVES, _fp16, "Cast to float16: half the bytes, every element."),
    ("topk", _SPARSE_COLLECTIVES, _sparse, "Exact top-k by magnitude (torch.topk): values + int32 indices."),
    ("randomk", _DENSE_COLLECTIVES, _same_index, "Random-k with a seed shared by all ranks: same indices, values only."),
    ("threshold", _SPARSE_COLLECTIVES, _sparse, "Keep |g| above a fixed threshold (density is not targeted)."),
    ("dgc", _SPARSE_COLLECTIVES, _sparse, "DGC: threshold from exact top-k of a 1% sample, then top-k of the survivors."),
    ("gaussiank", _SPARSE_COLLECTIVES, _sparse, "Gaussian-k: Gaussian quantile threshold, halved or x1.5 until within [2k/3, 4k/3]."),
    ("redsync", _SPARSE_COLLECTIVES, _sparse, "RedSync: bisect mean + r (max - mean) until k < nnz < 2k."),
    ("sidco-exp", _SPARSE_COLLECTIVES, _sparse, "SIDCo, multi-stage exponential threshold fit, adaptive stage count."),
    ("sidco-gp", _SPARSE_COLLECTIVES, _sparse, "SIDCo, multi-stage generalized-Pareto fit by moments, adaptive stages."),
    ("sidco-gamma", _SPARSE_COLLECTIVES, _sparse, "SIDCo, gamma (approx. MLE) first stage then generalized Pareto, adaptive stages."),
    ("qsgd", ("allgather",), _qsgd, "QSGD: stochastic quantisation to 127 levels, int8 per element + one norm."),
    ("signsgd", ("allgather",), _sign, "signSGD: one bit per element, majority-vote aggregation."),
    ("efsignsgd", ("allgather",), _ef_sign, "EF-signSGD: scaled sign (mean |g|), one bit per element + one scale."),
    ("powersgd", SAME_INDEX, _powersgd, "PowerSGD: rank-r factors P, Q of the bucket as a matrix; rank from density."),
]


def _register_builtin() -> None:
    calibration = load_calibration()
    for name, collectives, payload_fn, description in _BUILTIN:
        fixed_s, per_element_s = compute_model(name, DEFAULT_DEVICE, calibration)
        register_spec(
            CompressorSpec(
                name,
                collectives,
                payload_fn,
                compute_fixed_s=fixed_s,
                compute_per_element_s=per_element_s,
                description=description,
            )
        )


_register_builtin()
