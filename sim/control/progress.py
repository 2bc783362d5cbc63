"""The controllers' view of the convergence model: the one progress model of the project.

Controllers, the oracle and the scoring of runs all go through :mod:`sim.convergence` (the model
calibrated on real runs). This module is a thin, fast view of it for per-step use:

* :meth:`ProgressModel.gain` -- the compression gain at a density at a training step, sampled
  from the workload's captured gradient trace (the value the simulator puts in
  ``Observation.gain``; real runs measure the same quantity from the gradients they compress);
* :meth:`ProgressModel.efficiency` -- steady-state progress of one step with a given gain, in
  dense-iteration equivalents (the model's ``g ** alpha / (1 + s / knee)``);
* :class:`ProgressState` and :meth:`ProgressModel.advance` -- the model's recursion one iteration
  at a time (the lag after a density switch included), identical to
  :func:`sim.convergence.progress.progress_scalar`, which scores the runs.

Compressors the gradient trace did not capture borrow a captured one: ``none`` and any decision at
density 1 have gain 1; ``randomk`` uses its own capture; every other compressor below density 1
(threshold estimators, low-rank) uses the top-k capture, an approximation the records say nothing
more about.

Pure numpy: no SimPy, torch or pandas.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sim.convergence.model import ConvergenceModel
from sim.convergence.progress import efficiency
from sim.errors import InputError

__all__ = [
    "DEFAULT_WORKLOAD",
    "ProgressModel",
    "ProgressState",
    "UsesProgressModel",
    "UsesRecalibratedModel",
    "check_calibration_name",
    "default_progress_model",
]

#: Workload whose model a controller uses when nobody told it which workload it controls.
DEFAULT_WORKLOAD = "digits-mlp"

_CACHE: dict[str, ProgressModel] = {}


@dataclass(frozen=True)
class ProgressState:
    """The convergence model's state after some iterations.

    Attributes:
        step: iterations done.
        q: summed per-step efficiency.
        lag: current lag (dense iterations held back in the error-feedback residual).
        progress: dense-iteration equivalents reached (never decreases).
    """

    step: int = 0
    q: float = 0.0
    lag: float = 0.0
    progress: float = 0.0


class ProgressModel:
    """Per-step access to a :class:`~sim.convergence.ConvergenceModel`.

    Args:
        model: the convergence model (gradient trace plus calibrated parameters).
    """

    def __init__(self, model: ConvergenceModel) -> None:
        self.model = model
        par = model.params
        self.lam, self.mu, self.alpha = par.lam, par.mu, par.alpha
        self.inv_phase = 1.0 / par.phase if par.phase > 0 else 0.0
        self.inv_knee = 1.0 / par.knee if par.knee > 0 else 0.0
        self._steps: list[float] = [float(s) for s in model.trace.steps]
        self._steps_arr = np.asarray(self._steps, dtype=float)
        self._curves: dict[tuple[str, float], list[float]] = {}
        self._by_step: dict[tuple[str, float], list[float]] = {}
        self._matrices: dict[tuple[str, tuple[float, ...]], np.ndarray] = {}
        self._captured = set(model.trace.compressors)

    @classmethod
    def for_workload(cls, workload: str) -> ProgressModel:
        """The model that scores runs of ``workload`` (its own capture or a borrowed one).

        Cached per process: the trace is read once.
        """
        from sim.convergence.simulator import trace_for_profile

        source = trace_for_profile(workload)[0]
        if source not in _CACHE:
            _CACHE[source] = cls(ConvergenceModel.bundled(source))
        return _CACHE[source]

    def recalibrated(self, name: str) -> ProgressModel:
        """The same gradient trace under the alternative calibration ``name``: the bundled
        ``<trace workload>.<name>.params.json`` (e.g. ``real2``: fitted on real 2-rank runs
        with density switches, docs/convergence.md). Cached per process;
        :class:`InputError` if ``name`` is malformed or not bundled for this trace."""
        from sim.convergence.model import PARAMS_DIR
        from sim.convergence.params import ConvergenceParams

        check_calibration_name(name)
        key = f"{self.workload}.{name}"
        if key not in _CACHE:
            path = PARAMS_DIR / f"{key}.params.json"
            if not path.is_file():
                raise InputError(
                    f"no convergence calibration {name!r} bundled for the gradient trace "
                    f"{self.workload!r} (the one this workload's progress model reads)"
                )
            _CACHE[key] = ProgressModel(
                ConvergenceModel(self.model.trace, ConvergenceParams.load(path))
            )
        return _CACHE[key]

    @property
    def workload(self) -> str:
        """Name of the gradient trace the model reads."""
        return self.model.trace.workload

    # ------------------------------------------------------------------ gains

    def _source(self, compressor: str) -> str:
        if compressor in self._captured:
            return compressor
        # The compressor's own declaration (its spec's gain_like) says whose gains stand in.
        from sim.compress.spec import get_spec

        try:
            return "randomk" if get_spec(compressor).gain_like == "randomk" else "topk"
        except InputError:
            return "topk"

    def gain(self, compressor: str, density: float, step: float) -> float:
        """Gain of ``compressor`` at ``density`` in iteration ``step`` (1-based), from the trace.

        The sampled step nearest to ``step`` is used (as :meth:`ConvergenceModel.gain_schedule`
        does); density 1 and ``none`` give 1.
        """
        if not (0.0 < density <= 1.0):
            raise InputError(f"density must be in (0, 1], got {density!r}")
        if density >= 1.0 or compressor == "none":
            return 1.0
        return self._curve(compressor, density)[self._row(float(step))]

    def gains_by_step(self, compressor: str, density: float, upto: int) -> list[float]:
        """``[gain(compressor, density, k) for k in range(n)]`` for some ``n > upto``: the
        same floats, for loops that read one density's gain step after step (the planning
        oracle replays millions of iterations). Cached; a longer call extends the list (at
        least doubling it), computing only the steps it adds."""
        if not (0.0 < density <= 1.0):
            raise InputError(f"density must be in (0, 1], got {density!r}")
        key = (compressor, float(density))
        have = self._by_step.get(key)
        if have is not None and len(have) > upto:
            return have
        have = [] if have is None else have
        n = max(upto + 1, 2 * len(have), 1024)
        if density >= 1.0 or compressor == "none":
            have.extend([1.0] * (n - len(have)))
        else:
            curve = self._curve(compressor, density)
            row = self._row
            have.extend([curve[row(float(k))] for k in range(len(have), n)])
        self._by_step[key] = have
        return have

    def _curve(self, compressor: str, density: float) -> list[float]:
        """The trace's gain curve standing in for ``compressor`` at ``density`` < 1. Cached."""
        key = (self._source(compressor), float(density))
        curve = self._curves.get(key)
        if curve is None:
            curve = self.model.gain_curve(key[0], key[1]).tolist()
            self._curves[key] = curve
        return curve

    def gain_matrix(self, compressor: str, densities: Sequence[float]) -> np.ndarray:
        """The gain curves :meth:`gain` reads for ``densities`` (one row per density, one value
        per sampled step of the trace; ones for density 1 and ``none``). Cached."""
        key = (compressor, tuple(densities))
        hit = self._matrices.get(key)
        if hit is not None:
            return hit
        rows = []
        for d in densities:
            if not (0.0 < d <= 1.0):
                raise InputError(f"density must be in (0, 1], got {d!r}")
            dense = d >= 1.0 or compressor == "none"
            rows.append([1.0] * len(self._steps) if dense else self._curve(compressor, d))
        hit = self._matrices[key] = np.array(rows, dtype=float).reshape(len(rows), -1)
        return hit

    def sample_rows(self, steps: np.ndarray) -> np.ndarray:
        """:meth:`_row` of each of ``steps`` (the sampled step nearest to each), vectorised."""
        arr = self._steps_arr
        n = len(arr)
        idx = np.minimum(np.searchsorted(arr, steps, side="left"), n - 1)
        prev = np.maximum(idx - 1, 0)
        return np.where(np.abs(arr[prev] - steps) < np.abs(arr[idx] - steps), prev, idx)

    def _row(self, step: float) -> int:
        steps = self._steps
        n = len(steps)
        idx = min(bisect_left(steps, step), n - 1)
        prev = max(idx - 1, 0)
        return prev if abs(steps[prev] - step) < abs(steps[idx] - step) else idx

    # ------------------------------------------------------------------ progress

    def efficiency(self, gain: float) -> float:
        """Steady-state progress of one step with ``gain`` (dense-iteration equivalents)."""
        if not (gain > 0.0) or math.isnan(gain):
            raise InputError(f"gain must be > 0, got {gain!r}")
        return efficiency(min(float(gain), 1.0), self.alpha, self.model.params.knee)

    def advance(self, state: ProgressState, gain: float) -> ProgressState:
        """The state after one more iteration with ``gain`` (the scoring recursion, exactly)."""
        t = state.step + 1
        g = gain
        s = 1.0 / g - 1.0
        lag = state.lag + min(1.0, self.mu * g) * (
            self.lam * s / (1.0 + t * self.inv_phase) - state.lag
        )
        q = state.q + g**self.alpha / (1.0 + s * self.inv_knee)
        p = q - lag if q - lag > state.progress else state.progress
        return ProgressState(t, q, lag, p)


def check_calibration_name(name: str) -> str:
    """``name`` if it can name an alternative calibration (letters, digits, ``_``, ``-``);
    :class:`InputError` otherwise."""
    if not name or not all(c.isascii() and (c.isalnum() or c in "_-") for c in name):
        raise InputError(
            f"calibration name must be letters, digits, '_' or '-', got {name!r}"
        )
    return name


def default_progress_model() -> ProgressModel:
    """The model of :data:`DEFAULT_WORKLOAD` (for a controller nobody bound to a workload)."""
    return ProgressModel.for_workload(DEFAULT_WORKLOAD)


class UsesProgressModel:
    """Mixin for controllers that predict progress: the simulator and the real-run hook call
    :meth:`bind_progress` with the model of the workload they run; unbound, the controller uses
    :func:`default_progress_model`. The binding belongs to the run, so ``reset`` keeps it."""

    _bound_progress: ProgressModel | None = None

    def bind_progress(self, model: ProgressModel) -> None:
        """Use ``model`` (the workload's convergence model) for every prediction."""
        self._bound_progress = model

    @property
    def progress_model(self) -> ProgressModel:
        """The bound model, else the default one."""
        if self._bound_progress is None:
            self._bound_progress = default_progress_model()
        return self._bound_progress


class UsesRecalibratedModel(UsesProgressModel):
    """A controller that may plan under an alternative calibration of its workload's model:
    ``calibration`` names one for :meth:`ProgressModel.recalibrated` (empty: the bound model
    itself, the one that scores the runs)."""

    calibration: str = ""
    #: (bound model, its recalibrated variant), looked up once per bound model.
    _variant: tuple[ProgressModel, ProgressModel] | None = None

    def _set_calibration(self, name: str) -> None:
        """Check and keep ``name`` (:class:`InputError` if malformed)."""
        self.calibration = check_calibration_name(name) if name else ""
        self._variant = None

    @property
    def progress_model(self) -> ProgressModel:
        """The bound (or default) model, under ``calibration`` when one is named."""
        base = super().progress_model
        if not self.calibration:
            return base
        hit = self._variant
        if hit is None or hit[0] is not base:
            hit = self._variant = (base, base.recalibrated(self.calibration))
        return hit[1]

    def bind_progress(self, model: ProgressModel) -> None:
        """Bind the workload's model; a named ``calibration`` missing for it fails here."""
        super().bind_progress(model)
        _ = self.progress_model
