"""Workload profiles: layer gradient sizes and compute times, and their DDP-style buckets.

A profile is data (``sim/profiles/<name>.json``; format in docs/simulator.md): the layers in
forward order with their parameter counts and a relative backward-compute weight, plus forward,
backward and optimizer seconds per iteration on a stated reference device and batch, and the kind
of that device (``"device"``: ``"cpu"`` or ``"gpu"``), which picks the compression costs.
:func:`load_profile` validates a profile; :meth:`WorkloadProfile.buckets` groups the gradients as
torch DDP does (reverse layer order, a bucket closes once it holds ``bucket_bytes``) and says when
in the backward pass each bucket becomes ready.

Pure Python: no SimPy, torch or pandas.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.errors import InputError

#: Largest JSON workload profile read (the bundled ones are a few kB).
_PROFILE_MAX_BYTES = 16 << 20

__all__ = ["Bucket", "WorkloadProfile", "PROFILE_DIR", "profile_names", "load_profile"]

#: Kinds of device a profile's compute times may describe (``"device"`` in the JSON; default
#: ``"cpu"``). Compression is charged at the cost of the same kind (sim.compress.cost_source).
_DEVICES = ("cpu", "gpu")

#: Directory of the built-in JSON profiles.
PROFILE_DIR = Path(__file__).with_name("profiles")


@dataclass(frozen=True)
class Bucket:
    """One gradient bucket.

    Attributes:
        numel: gradient elements in the bucket.
        ready_frac: fraction of the backward pass done when the bucket's last gradient is ready.
        layers: names of the layers it holds, in the order backward produces them.
    """

    numel: int
    ready_frac: float
    layers: tuple[str, ...]


@dataclass(frozen=True)
class WorkloadProfile:
    """A training workload as the simulator sees it; times in seconds per iteration per worker."""

    name: str
    layer_names: tuple[str, ...]
    layer_params: tuple[int, ...]
    layer_weights: tuple[float, ...]
    forward_s: float
    backward_s: float
    optimizer_s: float
    description: str = ""
    reference: str = ""
    device: str = "cpu"

    @property
    def total_params(self) -> int:
        """Number of trainable parameters (= gradient elements)."""
        return sum(self.layer_params)

    def grad_bytes(self, dtype_bytes: int = 4) -> int:
        """Dense gradient bytes per worker per iteration."""
        return self.total_params * dtype_bytes

    def buckets(self, bucket_bytes: float, dtype_bytes: int = 4) -> list[Bucket]:
        """DDP-style buckets in the order they become ready (reverse layer order).

        Layers are appended from the last one backwards; a bucket is closed as soon as it holds at
        least ``bucket_bytes`` dense bytes (so a layer larger than the cap gets a bucket of its
        own), as in torch DDP. A bucket is ready when the backward of its last-added layer ends;
        backward time is spread over layers in proportion to their weights.
        """
        if not (bucket_bytes > 0 and math.isfinite(bucket_bytes)):
            raise InputError(f"bucket_bytes must be finite and > 0, got {bucket_bytes!r}")
        total_w = sum(self.layer_weights)
        n_layers = len(self.layer_names)
        out: list[Bucket] = []
        numel = 0
        names: list[str] = []
        done_w = 0.0
        for idx in range(n_layers - 1, -1, -1):
            numel += self.layer_params[idx]
            names.append(self.layer_names[idx])
            done_w += self.layer_weights[idx]
            if numel * dtype_bytes >= bucket_bytes or idx == 0:
                frac = 1.0 if idx == 0 else (done_w / total_w if total_w > 0 else 1.0)
                out.append(Bucket(numel, min(frac, 1.0), tuple(names)))
                numel = 0
                names = []
        return out

    def summary(self) -> dict[str, Any]:
        """Small JSON-ready description for run metadata."""
        return {
            "name": self.name,
            "params": self.total_params,
            "layers": len(self.layer_names),
            "forward_s": self.forward_s,
            "backward_s": self.backward_s,
            "optimizer_s": self.optimizer_s,
            "reference": self.reference,
            "device": self.device,
        }


def profile_names() -> list[str]:
    """Sorted names of the built-in profiles."""
    return sorted(p.stem for p in PROFILE_DIR.glob("*.json"))


def _num(where: str, key: str, value: Any, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InputError(f"{where}: {key} must be a finite number, got {value!r}")
    if value < 0 or (positive and value == 0):
        raise InputError(f"{where}: {key} must be {'> 0' if positive else '>= 0'}, got {value!r}")
    return float(value)


def _parse(data: Any, where: str, default_name: str) -> WorkloadProfile:
    if not isinstance(data, dict):
        raise InputError(f"{where}: a profile must be a JSON object")
    for key in ("layers", "forward_s", "backward_s"):
        if key not in data:
            raise InputError(f"{where}: missing field {key!r}")
    layers = data["layers"]
    if not isinstance(layers, list) or not layers:
        raise InputError(f"{where}: layers must be a non-empty list")
    names: list[str] = []
    params: list[int] = []
    weights: list[float] = []
    for i, layer in enumerate(layers):
        lw = f"{where}: layers[{i}]"
        if not isinstance(layer, dict) or "name" not in layer or "params" not in layer:
            raise InputError(f"{lw} must be an object with name and params")
        p = layer["params"]
        if isinstance(p, bool) or not isinstance(p, int) or p < 0:
            raise InputError(f"{lw}: params must be an integer >= 0, got {p!r}")
        names.append(str(layer["name"]))
        params.append(p)
        weights.append(_num(lw, "compute_weight", layer.get("compute_weight", float(p))))
    if sum(params) == 0:
        raise InputError(f"{where}: the profile has no parameters")
    device = data.get("device", "cpu")
    if device not in _DEVICES:
        raise InputError(f"{where}: device must be one of {', '.join(_DEVICES)}, got {device!r}")
    ref = data.get("reference", "")
    if isinstance(ref, dict):
        ref = "; ".join(f"{k}: {v}" for k, v in ref.items())
    return WorkloadProfile(
        name=str(data.get("name", default_name)),
        layer_names=tuple(names),
        layer_params=tuple(params),
        layer_weights=tuple(weights),
        forward_s=_num(where, "forward_s", data["forward_s"]),
        backward_s=_num(where, "backward_s", data["backward_s"]),
        optimizer_s=_num(where, "optimizer_s", data.get("optimizer_s", 0.0)),
        description=str(data.get("description", "")),
        reference=str(ref),
        device=str(device),
    )


def load_profile(name_or_path: str | os.PathLike[str]) -> WorkloadProfile:
    """A built-in profile by name, or a JSON profile file by path; :class:`InputError` if bad."""
    s = os.fspath(name_or_path)
    builtin = PROFILE_DIR / f"{s}.json"
    if os.sep not in s and "/" not in s and not s.endswith(".json"):
        if not os.path.isfile(builtin):  # False for a name too long for a file
            raise InputError(
                f"unknown workload {s!r}; known: {', '.join(profile_names())} "
                "(or give a path to a JSON profile)"
            )
        path = builtin
    else:
        path = Path(s)
        if not os.path.isfile(path):
            raise InputError(f"{path}: no such workload profile file")
    if path.stat().st_size > _PROFILE_MAX_BYTES:
        raise InputError(f"{path}: larger than {_PROFILE_MAX_BYTES >> 20} MiB; not a profile")
    try:
        data = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise InputError(f"{path}: not a valid JSON profile ({exc.__class__.__name__})") from None
    return _parse(data, str(path), path.stem)
