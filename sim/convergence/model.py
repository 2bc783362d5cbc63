"""The convergence model: a gradient trace's gains and dense curve plus calibrated parameters.

Gains: the trace holds the whole-model gain per sampled step at each captured density; the gain at
another density is interpolated linearly in (log density, log gain), clamped to be non-increasing
as density falls; below the smallest captured density it is extrapolated with the last segment's
log-log slope; density 1.0 has gain 1. The sampled step used is the one nearest to the iteration;
beyond the captured steps the last sample is used.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from sim.errors import InputError
from traces.gradtrace import GradTrace, bundled_gradtrace, read_gradtrace

from .params import ConvergenceParams, Prediction
from .progress import (
    check_metric,
    first_reach,
    iterations_to_target_curve,
    progress_grid,
    progress_scalar,
)

__all__ = ["ConvergenceModel", "PARAMS_DIR"]

#: Bundled calibrated parameters, ``<workload>.json`` (written by ``compctl convergence-calibrate``).
PARAMS_DIR = Path(__file__).resolve().parents[2] / "traces" / "data" / "grads"

_MIN_GAIN = 1e-9


class ConvergenceModel:
    """A gradient trace plus calibrated parameters: predicts progress, loss and accuracy.

    Args:
        trace: the workload's gradient trace (gains and the dense curve).
        params: calibrated parameters; their workload must match the trace's.
    """

    def __init__(self, trace: GradTrace, params: ConvergenceParams) -> None:
        if params.workload != trace.workload:
            raise InputError(
                f"convergence parameters are for {params.workload!r} but the gradient trace is "
                f"of {trace.workload!r}"
            )
        self.trace = trace
        self.params = params
        self._gain_tables: dict[str, np.ndarray] = {}

    @classmethod
    def load(
        cls, params_path: str | os.PathLike[str], trace_path: str | os.PathLike[str] | None = None
    ) -> ConvergenceModel:
        """From a parameters file and a trace file (default: the bundled trace of its workload)."""
        params = ConvergenceParams.load(params_path)
        trace = read_gradtrace(trace_path) if trace_path else bundled_gradtrace(params.workload)
        return cls(trace, params)

    @classmethod
    def bundled(cls, workload: str) -> ConvergenceModel:
        """The bundled trace and calibrated parameters of a built-in real workload."""
        p = PARAMS_DIR / f"{workload}.params.json"
        if not p.is_file():
            raise InputError(f"no calibrated convergence parameters bundled for {workload!r}")
        return cls.load(p)

    # ------------------------------------------------------------------ gains

    def _table(self, compressor: str) -> np.ndarray:
        # (S, D+1) log gains with a dense column prepended, monotone in density per row.
        if compressor not in self._gain_tables:
            g = np.clip(self.trace.model_gain(compressor), _MIN_GAIN, 1.0)
            g = np.minimum.accumulate(g, axis=1)  # densities are descending: gains must not rise
            self._gain_tables[compressor] = np.log(np.hstack([np.ones((len(g), 1)), g]))
        return self._gain_tables[compressor]

    def gain_curve(self, compressor: str, density: float) -> np.ndarray:
        """Whole-model gain at ``density`` for every sampled step of the trace, shape (S,)."""
        if not (0.0 < density <= 1.0):
            raise InputError(f"density must be in (0, 1], got {density!r}")
        if density >= 1.0 or compressor == "none":
            return np.ones(len(self.trace.steps))
        table = self._table(compressor)
        logd = np.log(np.concatenate([[1.0], self.trace.densities]))
        x = math.log(density)
        if x <= logd[-1]:
            # Below the smallest captured density: the last segment's log-log slope.
            j = len(logd) - 2
        else:
            j = int(np.searchsorted(-logd, -x, side="right")) - 1
            j = min(max(j, 0), len(logd) - 2)
        x0, x1 = logd[j], logd[j + 1]
        w = (x - x0) / (x1 - x0) if x1 != x0 else 0.0
        out = np.exp(table[:, j] + w * (table[:, j + 1] - table[:, j]))
        return np.clip(out, _MIN_GAIN, 1.0)

    def gain_at(self, compressor: str, density: float, step: float) -> float:
        """Gain at ``density`` at the sampled step nearest to iteration ``step``."""
        return float(self.gain_curve(compressor, density)[self._row(np.asarray([step]))[0]])

    def _row(self, step: np.ndarray) -> np.ndarray:
        steps = self.trace.steps.astype(float)
        idx = np.searchsorted(steps, step)
        idx = np.clip(idx, 0, len(steps) - 1)
        prev = np.clip(idx - 1, 0, len(steps) - 1)
        closer_prev = np.abs(steps[prev] - step) < np.abs(steps[idx] - step)
        return np.where(closer_prev, prev, idx)

    # ------------------------------------------------------------------ prediction

    def progress(
        self,
        densities: Sequence[float],
        compressor: str = "topk",
        *,
        lam: np.ndarray | float | None = None,
        mu: np.ndarray | float | None = None,
        alpha: np.ndarray | float | None = None,
        phase: np.ndarray | float | None = None,
        knee: np.ndarray | float | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Progress after each iteration (shape (T+1, *P)) and gains (T+1,).

        The parameters default to the calibrated values; arrays broadcast, which is how
        :func:`sim.convergence.calibrate` evaluates a whole parameter grid at once.
        """
        par = self.params
        lam_ = np.asarray(par.lam if lam is None else lam, dtype=float)
        mu_ = np.asarray(par.mu if mu is None else mu, dtype=float)
        alp_ = np.asarray(par.alpha if alpha is None else alpha, dtype=float)
        ph_ = np.asarray(par.phase if phase is None else phase, dtype=float)
        kn_ = np.asarray(par.knee if knee is None else knee, dtype=float)
        shape = np.broadcast(lam_, mu_, alp_, ph_, kn_).shape
        gains = self.gain_schedule(densities, compressor)
        if shape == ():
            prog = progress_scalar(
                gains, float(lam_), float(mu_), float(alp_), float(ph_), float(kn_)
            )
            return prog, gains
        return progress_grid(gains, lam_, mu_, alp_, ph_, kn_), gains

    def gain_schedule(self, densities: Sequence[float], compressor: str = "topk") -> np.ndarray:
        """Gain at each iteration ``t = 0..T`` (index 0 is 1.0): the sampled step nearest ``t``.

        Gains are looked up by iteration, not by progress, so they do not depend on the model's
        parameters or on earlier decisions: this keeps the model monotone in the gain.
        """
        rows = self._row(np.arange(1, len(densities) + 1, dtype=float))
        curves = {d: self.gain_curve(compressor, d) for d in set(densities)}
        out = np.ones(len(densities) + 1)
        for t, d in enumerate(densities, start=1):
            out[t] = curves[d][rows[t - 1]]
        return out

    def curve_at(self, progress: np.ndarray, metric: str) -> np.ndarray:
        """The dense run's ``metric`` read at ``progress`` (linear; held beyond the ends)."""
        check_metric(metric)
        vals = self.trace.eval_loss if metric == "loss" else self.trace.eval_accuracy
        return np.interp(progress, self.trace.eval_steps.astype(float), vals)

    def predict(self, densities: Sequence[float], compressor: str = "topk") -> Prediction:
        """Progress, gain, loss and accuracy per iteration for a per-iteration density schedule."""
        self._check_schedule(densities, compressor)
        prog, gains = self.progress(densities, compressor)
        return Prediction(prog, gains, self.curve_at(prog, "loss"), self.curve_at(prog, "accuracy"))

    def dense_iterations_to(self, target: float, metric: str) -> float | None:
        """Iterations the dense run (the trace's curve) needs to reach ``target``."""
        return iterations_to_target_curve(
            self.trace.eval_steps,
            self.trace.eval_loss if metric == "loss" else self.trace.eval_accuracy,
            target,
            metric,
        )

    def iterations_to_target(
        self,
        densities: Sequence[float],
        target: float,
        metric: str = "loss",
        compressor: str = "topk",
    ) -> float | None:
        """Predicted iterations to reach ``target`` (``None`` if not within the schedule).

        The dense curve says at which progress ``p*`` the target is reached; the answer is the
        (interpolated) iteration at which predicted progress reaches ``p*``.
        """
        p_star = self.dense_iterations_to(target, metric)
        if p_star is None:
            raise InputError(
                f"the dense run of {self.trace.workload!r} never reaches {metric} {target}; "
                "pick a target its curve reaches"
            )
        prog, _ = self.progress(densities, compressor)
        return first_reach(prog, p_star)

    def _check_schedule(self, densities: Sequence[float], compressor: str) -> None:
        if len(densities) == 0:
            raise InputError("empty density schedule")
        bad = [d for d in densities if not (0.0 < d <= 1.0)]
        if bad:
            raise InputError(f"density must be in (0, 1], got {bad[0]!r}")
        if compressor != "none":
            self.trace.compressor_index(compressor)
