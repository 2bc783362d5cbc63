"""Compute time of the analytic specs: ``fixed_s + per_element_s * numel`` per compressor and
device, read from ``calibration.json`` in :mod:`sim.compress` (data written by
``compctl bench compressors --calibrate``); the registered specs use its ``"cpu"`` entry.
"""

from __future__ import annotations

import functools
import json
import logging
from pathlib import Path
from typing import Any

__all__ = ["CALIBRATION_PATH", "DEFAULT_DEVICE", "compute_model", "load_calibration",
           "registered_compute_model"]

log = logging.getLogger(__name__)

#: The calibration data file (per device, per compressor: fixed_s and per_element_s).
CALIBRATION_PATH = Path(__file__).resolve().parent.parent / "calibration.json"
#: The device whose calibration fills the registered specs.
DEFAULT_DEVICE = "cpu"


def load_calibration(path: Path = CALIBRATION_PATH) -> dict[str, Any]:
    """The calibration file as a dict (``{}`` with a log line if it is missing or unreadable)."""
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        log.warning("no compressor calibration (%s); compute times are 0", exc)
        return {}
    return data


def compute_model(
    name: str, device: str = DEFAULT_DEVICE, calibration: dict[str, Any] | None = None
) -> tuple[float, float]:
    """``(fixed_s, per_element_s)`` of compressor ``name`` on ``device`` (zeros if uncalibrated)."""
    cal = load_calibration() if calibration is None else calibration
    entry = cal.get("devices", {}).get(device, {}).get(name)
    if not entry:
        return (0.0, 0.0)
    return (float(entry["fixed_s"]), float(entry["per_element_s"]))


@functools.lru_cache(maxsize=1)
def _registration_calibration() -> dict[str, Any]:
    return load_calibration()


def registered_compute_model(name: str) -> tuple[float, float]:
    """The compute model a built-in spec registers with (the file is read once per process)."""
    return compute_model(name, DEFAULT_DEVICE, _registration_calibration())
