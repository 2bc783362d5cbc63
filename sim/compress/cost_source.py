"""Compression compute costs per device: which numbers the simulator charges, and where they came from.

A workload profile says which kind of device its compute times describe (``"device"`` in the
profile JSON: ``"cpu"`` or ``"gpu"``); the engines charge compression at the cost of that same
kind of device, so a GPU training step is never paired with CPU compression times.

Sources (each cost is ``fixed_s + per_element_s * numel`` for one tensor, compress + decompress +
error feedback):

* ``cpu``: ``calibration.json`` beside this module, written by ``compctl bench compressors
  --calibrate`` on the project's CPU machine (the registered specs' own numbers).
* ``gpu``: ``gpu_reference.json`` beside this module, a documented reference, not measured by this
  code. Source: REFERENCES.md section 9, measured 2026-11-22 on one NVIDIA H100 (torch 2.11, CUDA
  13) with ``compctl bench compressors --device cuda`` at density 0.001, float32, minimum times.

  - ``topk``, ``sidco-exp``, ``sidco-gp``: the straight line through the published times at 10 M
    and 100 M elements (midpoint where a range was published).
  - ``sidco-gamma``: no GPU measurement; taken equal to ``sidco-gp`` (same later stages).
  - every other compressor: no GPU measurement; a memory-traffic estimate, ``passes`` full reads
    or writes of the float32 tensor at about 3 TB/s (REFERENCES.md section 9), plus the per-call
    overhead fitted for ``topk`` (kernel launches of the bench's compress + decompress + error
    feedback). The pass counts, one per compressor in the JSON, are our estimate, not a
    measurement; ``none`` costs nothing. These are optimistic (a kernel that reaches the memory
    bound).

The GPU numbers are for an H100, while the bundled GPU profiles' compute is V100-class; the
report's assumptions box says so through :attr:`CostSource.label`.

Pure Python: no torch.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.errors import InputError

from .spec import get_spec

__all__ = ["DEVICES", "GPU_REFERENCE_PATH", "CostSource", "cost_source", "gpu_models"]

#: The device kinds a profile may name.
DEVICES: tuple[str, ...] = ("cpu", "gpu")
#: The GPU reference data (published points and memory-pass estimates).
GPU_REFERENCE_PATH = Path(__file__).with_name("gpu_reference.json")
#: Label recorded in run metadata for the CPU calibration.
CPU_LABEL = "cpu-measured (calibration.json)"


@dataclass(frozen=True)
class CostSource:
    """Compression costs on one kind of device.

    Attributes:
        device: ``"cpu"`` or ``"gpu"``.
        label: what run metadata records as ``compress_cost_source``.
        models: compressor name -> ``(fixed_s, per_element_s)``; empty means "the registered
            specs' own (CPU-calibrated) costs".
    """

    device: str
    label: str
    models: tuple[tuple[str, float, float], ...] = ()

    def compute_s(self, compressor: str, numel: int, density: float) -> float:
        """Modelled compress + decompress time of one ``numel``-element tensor, seconds."""
        if not self.models:
            return get_spec(compressor).compute_s(numel, density)
        for name, fixed_s, per_element_s in self.models:
            if name == compressor:
                if fixed_s == 0.0 and per_element_s == 0.0:
                    return 0.0
                return fixed_s + per_element_s * numel
        raise InputError(f"no {self.device} compression cost for compressor {compressor!r}")


def _line(points: Any, where: str) -> tuple[float, float]:
    (n1, t1), (n2, t2) = ((float(n), float(t)) for n, t in points)
    if not n2 > n1:
        raise ValueError(f"{where}: points must be in increasing size")
    per_element_s = (t2 - t1) / (n2 - n1)
    return (t1 - per_element_s * n1, per_element_s)


def gpu_models(data: dict[str, Any]) -> dict[str, tuple[float, float]]:
    """``(fixed_s, per_element_s)`` per compressor from the GPU reference document ``data``."""
    out = {name: _line(pts, name) for name, pts in data["measured_s"].items()}
    for name, other in data.get("same_as", {}).items():
        out[name] = out[other]
    mp = data["memory_pass"]
    fixed_s = out[mp["fixed_from"]][0]
    pass_s = float(mp["bytes_per_element"]) / float(mp["bandwidth_Bps"])
    for name, passes in mp["passes"].items():
        out[name] = (fixed_s, passes * pass_s) if passes else (0.0, 0.0)
    return out


@functools.cache
def cost_source(device: str) -> CostSource:
    """The compression cost source for profiles on ``device``; :class:`InputError` if unknown."""
    if device == "cpu":
        return CostSource("cpu", CPU_LABEL)
    if device == "gpu":
        data = json.loads(GPU_REFERENCE_PATH.read_text())
        models = tuple((n, f, p) for n, (f, p) in sorted(gpu_models(data).items()))
        return CostSource("gpu", str(data["label"]), models)
    raise InputError(f"unknown profile device {device!r}; known: {', '.join(DEVICES)}")
