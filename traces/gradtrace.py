"""Gradient traces: gradient statistics captured from real training, one ``.npz`` file per capture.

A gradient trace records, for a real training run (``compctl capture``), at every sampled step
and for every parameterised layer: the gradient norm and size, the cross-worker variance, and for
each compressor and candidate density the energy that compression with error feedback kept and
the density it achieved; plus the dense run's evaluation curve (loss and accuracy against
iterations). The simulator's convergence model (:mod:`sim.convergence`) reads it.

File format (``numpy.savez_compressed``; every array named below, nothing else):

=================  ===============  ==========================================================
array              shape, dtype     meaning
=================  ===============  ==========================================================
``header``         (), str          JSON object, see below
``steps``          (S,), int64      sampled training steps (1-based, strictly increasing)
``numel``          (L,), int64      elements of each layer's gradient
``grad_norm``      (S, L), float64  L2 norm of the worker-averaged gradient
``worker_var``     (S, L), float64  mean over workers of ``||g_w - mean_w g_w||^2``
``kept_sq``        (S, C, D, L)     sum over workers of ``||C(g_e)||^2`` (float64)
``comp_sq``        (S, C, D, L)     sum over workers of ``||g_e||^2``, ``g_e`` = gradient + residual
``achieved``       (S, C, D, L)     mean over workers of kept elements / numel (float64)
``train_loss``     (S,), float64    mean training loss of the workers' mini-batches at the step
``eval_steps``     (E,), int64      steps at which the model was evaluated (0 = before training)
``eval_loss``      (E,), float64    held-out loss of the dense run
``eval_accuracy``  (E,), float64    held-out accuracy of the dense run
=================  ===============  ==========================================================

``S`` sampled steps, ``L`` layers, ``C`` compressors, ``D`` candidate densities, ``E`` evaluations.
The compression gain of compressor ``c`` at density ``d`` (Tyagi and Swany's definition with
squared norms) is ``kept_sq / comp_sq``, per layer or summed over layers for the whole model.

Header keys: ``format`` (``"compctl-gradtrace"``), ``version`` (1), ``workload``, ``seed``,
``world_size``, ``batch_size``, ``steps`` (total trained), ``every``, ``layers`` (names),
``compressors``, ``densities``, ``memory`` (error-feedback memory name), ``lr``, ``note``.

Error feedback is carried along in *shadow* memories: training follows the dense trajectory,
and for every (compressor, density, worker, layer) a residual memory is updated at **every** step
(not only the sampled ones), so the recorded gains are those of a run compressed at that density
all along. :func:`read_gradtrace` validates everything and raises :class:`InputError` with one line.
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from compctl_base.atomic_files import atomic_write_bytes
from compctl_base.errors import InputError

from .npz_reader import read_npz_bounded

__all__ = [
    "FORMAT",
    "VERSION",
    "GradTrace",
    "read_gradtrace",
    "write_gradtrace",
    "GRADS_DIR",
    "bundled_gradtrace",
    "bundled_gradtrace_names",
]

FORMAT = "compctl-gradtrace"
VERSION = 1

#: Directory of the bundled gradient traces (one per built-in real workload).
GRADS_DIR = Path(__file__).resolve().parent / "data" / "grads"

_ARRAYS = (
    "header", "steps", "numel", "grad_norm", "worker_var", "kept_sq", "comp_sq", "achieved",
    "train_loss", "eval_steps", "eval_loss", "eval_accuracy",
)
_HEADER_KEYS = (
    "format", "version", "workload", "seed", "world_size", "batch_size", "steps", "every",
    "layers", "compressors", "densities", "memory",
)


@dataclass(frozen=True)
class GradTrace:
    """A validated gradient trace; arrays as documented in the module docstring."""

    header: dict[str, Any]
    steps: np.ndarray
    numel: np.ndarray
    grad_norm: np.ndarray
    worker_var: np.ndarray
    kept_sq: np.ndarray
    comp_sq: np.ndarray
    achieved: np.ndarray
    train_loss: np.ndarray
    eval_steps: np.ndarray
    eval_loss: np.ndarray
    eval_accuracy: np.ndarray

    @property
    def workload(self) -> str:
        """Name of the workload the trace was captured from."""
        return str(self.header["workload"])

    @property
    def compressors(self) -> list[str]:
        """Compressor names, in the order of axis 1 of the per-compressor arrays."""
        return list(self.header["compressors"])

    @property
    def densities(self) -> np.ndarray:
        """Candidate densities (sorted descending), axis 2 of the per-compressor arrays."""
        return np.asarray(self.header["densities"], dtype=float)

    @property
    def layers(self) -> list[str]:
        """Layer names, the last axis of the per-layer arrays."""
        return list(self.header["layers"])

    def compressor_index(self, name: str) -> int:
        """Axis-1 index of compressor ``name``; :class:`InputError` if not captured."""
        try:
            return self.compressors.index(name)
        except ValueError:
            raise InputError(
                f"gradient trace of {self.workload!r} has no compressor {name!r}; "
                f"captured: {', '.join(self.compressors)}"
            ) from None

    def model_gain(self, compressor: str) -> np.ndarray:
        """Whole-model gain per sampled step and density, shape (S, D)."""
        c = self.compressor_index(compressor)
        kept = self.kept_sq[:, c, :, :].sum(axis=-1)
        comp = self.comp_sq[:, c, :, :].sum(axis=-1)
        with np.errstate(invalid="ignore", divide="ignore"):
            gain = np.where(comp > 0, kept / np.where(comp > 0, comp, 1.0), 1.0)
        return np.clip(gain, 0.0, 1.0)

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The arrays as written to the file (header as a JSON string array)."""
        out = {name: getattr(self, name) for name in _ARRAYS if name != "header"}
        out["header"] = np.asarray(json.dumps(self.header, sort_keys=True))
        return out


def _fail(where: str, msg: str) -> InputError:
    return InputError(f"{where}: not a valid gradient trace: {msg}")


def _validate(tr: GradTrace, where: str) -> None:
    h = tr.header
    missing = [k for k in _HEADER_KEYS if k not in h]
    if missing:
        raise _fail(where, f"header lacks {', '.join(missing)}")
    if h["format"] != FORMAT:
        raise _fail(where, f"format is {h['format']!r}, expected {FORMAT!r}")
    if h["version"] != VERSION:
        raise _fail(where, f"version {h['version']!r} unsupported (this compctl reads {VERSION})")
    s, l_ = len(tr.steps), len(tr.numel)
    c, d = len(h["compressors"]), len(h["densities"])
    if s < 2:
        raise _fail(where, "needs at least two sampled steps")
    if l_ != len(h["layers"]) or l_ < 1:
        raise _fail(where, "numel and header layers disagree")
    if c < 1 or d < 1:
        raise _fail(where, "no compressors or densities")
    dens = np.asarray(h["densities"], dtype=float)
    if not np.all((dens > 0) & (dens <= 1)) or np.any(np.diff(dens) >= 0):
        raise _fail(where, "densities must lie in (0, 1] and be strictly decreasing")
    if np.any(np.diff(tr.steps) <= 0) or tr.steps[0] < 1:
        raise _fail(where, "steps must be >= 1 and strictly increasing")
    if np.any(tr.numel < 1):
        raise _fail(where, "every layer needs at least one element")
    shapes = {
        "grad_norm": (s, l_), "worker_var": (s, l_), "kept_sq": (s, c, d, l_),
        "comp_sq": (s, c, d, l_), "achieved": (s, c, d, l_), "train_loss": (s,),
    }
    for name, shape in shapes.items():
        arr = getattr(tr, name)
        if arr.shape != shape:
            raise _fail(where, f"{name} has shape {arr.shape}, expected {shape}")
        if not np.all(np.isfinite(arr)):
            raise _fail(where, f"{name} holds non-finite values")
        if name != "train_loss" and np.any(arr < 0):
            raise _fail(where, f"{name} holds negative values")
    if np.any(tr.kept_sq > tr.comp_sq * (1 + 1e-6) + 1e-30):
        raise _fail(where, "kept_sq exceeds comp_sq (a gain above 1)")
    e = len(tr.eval_steps)
    if e < 2 or tr.eval_loss.shape != (e,) or tr.eval_accuracy.shape != (e,):
        raise _fail(where, "eval_steps, eval_loss, eval_accuracy need the same length >= 2")
    if np.any(np.diff(tr.eval_steps) <= 0) or tr.eval_steps[0] < 0:
        raise _fail(where, "eval_steps must be >= 0 and strictly increasing")
    if not (np.all(np.isfinite(tr.eval_loss)) and np.all(np.isfinite(tr.eval_accuracy))):
        raise _fail(where, "the evaluation curve holds non-finite values")
    if np.any((tr.eval_accuracy < 0) | (tr.eval_accuracy > 1)):
        raise _fail(where, "eval_accuracy must lie in [0, 1]")


def _from_arrays(arrays: dict[str, np.ndarray], where: str) -> GradTrace:
    missing = [k for k in _ARRAYS if k not in arrays]
    if missing:
        raise _fail(where, f"missing array(s) {', '.join(missing)}")
    try:
        header = json.loads(str(arrays["header"]))
    except json.JSONDecodeError:
        raise _fail(where, "header is not JSON") from None
    if not isinstance(header, dict):
        raise _fail(where, "header is not a JSON object")
    ints = {"steps", "numel", "eval_steps"}
    fields: dict[str, Any] = {"header": header}
    for k in _ARRAYS[1:]:
        arr = np.asarray(arrays[k])
        if arr.dtype.kind not in "iuf":
            raise _fail(where, f"{k} is not numeric")
        fields[k] = arr.astype(np.int64 if k in ints else np.float64)
    tr = GradTrace(**fields)
    try:
        _validate(tr, where)
    except InputError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError) as exc:  # a header of the wrong shape
        raise _fail(where, f"malformed header ({exc.__class__.__name__}: {exc})") from None
    return tr


def read_gradtrace(path: str | os.PathLike[str]) -> GradTrace:
    """Read and validate a gradient trace; :class:`InputError` (one line) if missing or bad."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: no such gradient trace file")
    arrays = read_npz_bounded(p, what="gradient trace (.npz)")
    return _from_arrays(arrays, str(p))


def write_gradtrace(trace: GradTrace, path: str | os.PathLike[str]) -> Path:
    """Validate ``trace`` and write it atomically (temp file + rename) to ``path``."""
    p = Path(path)
    if p.suffix != ".npz":
        p = p.with_name(p.name + ".npz")
    _validate(trace, str(p))
    p.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    np.savez_compressed(buf, **trace.to_arrays())  # type: ignore[arg-type]
    atomic_write_bytes(p, buf.getvalue())
    return p


def bundled_gradtrace_names() -> list[str]:
    """Workloads with a bundled gradient trace."""
    return sorted(p.stem for p in GRADS_DIR.glob("*.npz"))


def bundled_gradtrace(workload: str) -> GradTrace:
    """The bundled gradient trace of a built-in workload; :class:`InputError` if none."""
    p = GRADS_DIR / f"{workload}.npz"
    if not p.is_file():
        known = ", ".join(bundled_gradtrace_names()) or "none"
        raise InputError(f"no bundled gradient trace for {workload!r}; bundled: {known}")
    return read_gradtrace(p)
