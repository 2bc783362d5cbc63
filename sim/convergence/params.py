"""The convergence model's data: calibrated parameters, a prediction, a real run's curve."""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from compctl_base.atomic_files import atomic_write_text
from sim.errors import InputError
from traces.input_limits import MAX_JSON_BYTES, check_file_size

__all__ = ["ConvergenceParams", "Prediction", "RealCurve"]


@dataclass(frozen=True)
class ConvergenceParams:
    """Calibrated parameters of one workload's convergence model (:mod:`sim.convergence.progress`).

    Attributes:
        workload: the workload (and gradient trace) they belong to.
        compressor: the compressor the calibration runs used.
        lam, mu, alpha: the model's parameters.
        phase: iterations over which the lag per unit of staleness halves;
            0 means it stays ``lam`` (see :mod:`sim.convergence.progress`).
        knee: staleness (iterations) at which a step's usefulness halves; 0 = off.
        calibrated_on: densities of the real calibration runs.
        targets: what the fit matched (e.g. ``"loss<=0.5"``).
        fit_rms_log_error: root-mean-square of log(predicted / real iterations) over the fit.
        note: free text (command, seeds).
    """

    workload: str
    compressor: str
    lam: float
    mu: float
    alpha: float
    phase: float = 0.0
    knee: float = 0.0
    calibrated_on: tuple[float, ...] = ()
    targets: tuple[str, ...] = ()
    fit_rms_log_error: float = float("nan")
    note: str = ""

    def __post_init__(self) -> None:
        for name in ("lam", "mu", "alpha", "phase", "knee"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise InputError(f"convergence parameter {name} must be finite and >= 0, got {v!r}")
        if self.mu <= 0:
            raise InputError(f"convergence parameter mu must be > 0, got {self.mu!r}")

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict."""
        d = asdict(self)
        d["calibrated_on"] = list(self.calibrated_on)
        d["targets"] = list(self.targets)
        return d

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> ConvergenceParams:
        """Read a parameters file; :class:`InputError` if missing or malformed."""
        p = Path(path)
        if not p.is_file():
            raise InputError(f"{p}: no such convergence parameters file")
        check_file_size(p, MAX_JSON_BYTES, "convergence parameters file")
        try:
            data = json.loads(p.read_text())
            return cls(
                workload=str(data["workload"]),
                compressor=str(data["compressor"]),
                lam=float(data["lam"]),
                mu=float(data["mu"]),
                alpha=float(data["alpha"]),
                phase=float(data.get("phase", 0.0)),
                knee=float(data.get("knee", 0.0)),
                calibrated_on=tuple(float(x) for x in data.get("calibrated_on", ())),
                targets=tuple(str(x) for x in data.get("targets", ())),
                fit_rms_log_error=float(data.get("fit_rms_log_error", float("nan"))),
                note=str(data.get("note", "")),
            )
        except (
            json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError,
            RecursionError,
        ) as exc:
            raise InputError(f"{p}: malformed convergence parameters ({exc})") from None

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write atomically as JSON."""
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        return atomic_write_text(p, json.dumps(self.to_json(), indent=1) + "\n")


@dataclass(frozen=True)
class Prediction:
    """A predicted run: arrays indexed by iteration ``t = 0..T`` (``t = 0`` before training).

    Attributes:
        progress: dense-iteration equivalents reached after ``t`` iterations.
        gain: whole-model gain used at iteration ``t`` (index 0 is 1.0).
        loss, accuracy: the dense curve read at ``progress``.
    """

    progress: np.ndarray
    gain: np.ndarray
    loss: np.ndarray
    accuracy: np.ndarray


@dataclass(frozen=True)
class RealCurve:
    """A real run's evaluation curve (what calibration and validation compare against)."""

    densities: tuple[float, ...]
    eval_steps: tuple[int, ...]
    eval_loss: tuple[float, ...]
    eval_accuracy: tuple[float, ...]
    label: str = ""
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
