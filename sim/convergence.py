"""Convergence model: compression decisions -> training progress -> predicted loss and accuracy.

Progress is counted in *dense-iteration equivalents*: after ``t`` iterations a compressed run has
made progress ``p_t`` if its loss equals the dense run's loss after ``p_t`` iterations. The dense
run's curve comes from a gradient trace (:mod:`traces.gradtrace`), so predicted loss and accuracy
are that curve read at ``p_t``; a dense schedule gives ``p_t = t`` and reproduces it exactly.

The model (docs/convergence.md derives and discusses it). With error feedback, what top-k leaves
out is not lost but delayed: the residual holds about ``1/g - 1`` iterations' worth of gradient,
``g`` being the compression gain (kept energy / compensated energy). So compression adds a
*lag*; and where stale or missing coordinates also make each step less useful (measured on
char-lstm with momentum SGD), a loss of efficiency per step. Per iteration ``t`` at density
``d_t``::

    g_t = gain(compressor, d_t, at iteration t)          # sampled from the gradient trace
    s_t = 1/g_t - 1                                      # staleness: iterations held back
    r_t = min(1, mu * g_t)                               # the residual turns over in ~1/g steps
    L_t = L_{t-1} + r_t * (lam * s_t / (1 + t/phase) - L_{t-1})         # lag
    q_t = q_{t-1} + g_t ** alpha                         # per-step efficiency
    p_t = max(p_{t-1}, q_t - L_t)                        # progress never goes backwards

Parameters: ``lam`` (lag per iteration of staleness), ``alpha`` (per-step efficiency ``g ** alpha``),
``phase`` (later in training a given staleness costs less lag: halved after ``phase``
iterations; 0 turns this off) and ``mu`` (how fast the lag follows a density change; 1 = the
residual's own turnover). All four are calibrated per workload on real runs at a few fixed
densities (:func:`calibrate`). More gain never predicts
less progress: gains are looked up by iteration (not by progress), ``L_t`` increases and ``q_t``
decreases with every ``s_u``, and the running maximum keeps that order; a
Hypothesis test checks it.

Gains: the trace holds the whole-model gain per sampled step at each captured density; the gain at
another density is interpolated linearly in (log density, log gain), clamped to be non-increasing
as density falls; below the smallest captured density it is extrapolated with the last segment's
log-log slope; density 1.0 has gain 1. The sampled step used is the one nearest to the iteration;
beyond the captured steps the last sample is used.

Pure numpy/scipy: no SimPy, torch or pandas.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from sim.errors import InputError
from traces.gradtrace import GradTrace, bundled_gradtrace, read_gradtrace

__all__ = [
    "ConvergenceParams",
    "ConvergenceModel",
    "Prediction",
    "RealCurve",
    "calibrate",
    "iterations_to_target_curve",
    "progress_per_step",
    "annotate_records",
    "trace_for_profile",
    "convergence_columns",
    "time_to_target_s",
    "PARAMS_DIR",
]

log = logging.getLogger(__name__)

#: Bundled calibrated parameters, ``<workload>.json`` (written by ``compctl convergence-calibrate``).
PARAMS_DIR = Path(__file__).resolve().parent.parent / "traces" / "data" / "grads"

_MIN_GAIN = 1e-9

#: Which captured trace a simulator profile borrows gradient statistics from (by architecture
#: family): convolutional nets -> digits-cnn, recurrent and attention language models ->
#: char-lstm, anything else -> digits-mlp.
_BORROW = {
    "resnet50": "digits-cnn",
    "vgg16": "digits-cnn",
    "lstm-ptb": "char-lstm",
    "bert-base": "char-lstm",
    "gpt2-small": "char-lstm",
}


@dataclass(frozen=True)
class ConvergenceParams:
    """Calibrated parameters of one workload's convergence model (see module docstring).

    Attributes:
        workload: the workload (and gradient trace) they belong to.
        compressor: the compressor the calibration runs used.
        lam, mu, alpha: the model's parameters.
        phase: iterations over which the lag per unit of staleness halves;
            0 means it stays ``lam`` (see module docstring).
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
    calibrated_on: tuple[float, ...] = ()
    targets: tuple[str, ...] = ()
    fit_rms_log_error: float = float("nan")
    note: str = ""

    def __post_init__(self) -> None:
        for name in ("lam", "mu", "alpha", "phase"):
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
        try:
            data = json.loads(p.read_text())
            return cls(
                workload=str(data["workload"]),
                compressor=str(data["compressor"]),
                lam=float(data["lam"]),
                mu=float(data["mu"]),
                alpha=float(data["alpha"]),
                phase=float(data.get("phase", 0.0)),
                calibrated_on=tuple(float(x) for x in data.get("calibrated_on", ())),
                targets=tuple(str(x) for x in data.get("targets", ())),
                fit_rms_log_error=float(data.get("fit_rms_log_error", float("nan"))),
                note=str(data.get("note", "")),
            )
        except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError) as exc:
            raise InputError(f"{p}: malformed convergence parameters ({exc})") from None

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write atomically as JSON."""
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(f".{p.name}.tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=1) + "\n")
        tmp.replace(p)
        return p


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


def _metric_pair(metric: str) -> str:
    if metric not in ("loss", "accuracy"):
        raise InputError(f"target metric must be 'loss' or 'accuracy', got {metric!r}")
    return metric


def iterations_to_target_curve(
    steps: ArrayLike, values: ArrayLike, target: float, metric: str
) -> float | None:
    """First (linearly interpolated) iteration at which a curve reaches ``target``.

    ``metric`` ``"loss"`` means ``value <= target``, ``"accuracy"`` means ``value >= target``.
    ``None`` if the curve never reaches it.
    """
    _metric_pair(metric)
    x = np.asarray(steps, dtype=float)
    v = np.asarray(values, dtype=float)
    sign = 1.0 if metric == "loss" else -1.0
    over = sign * (v - target)  # <= 0 once reached
    hit = np.nonzero(over <= 0)[0]
    if len(hit) == 0:
        return None
    i = int(hit[0])
    if i == 0:
        return float(x[0])
    a, b = over[i - 1], over[i]
    frac = a / (a - b) if a != b else 1.0
    return float(x[i - 1] + frac * (x[i] - x[i - 1]))


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
    ) -> tuple[np.ndarray, np.ndarray]:
        """Progress after each iteration (shape (T+1, *P)) and gains (T+1,).

        The parameters default to the calibrated values; arrays broadcast, which is how
        :func:`calibrate` evaluates a whole parameter grid at once.
        """
        par = self.params
        lam_ = np.asarray(par.lam if lam is None else lam, dtype=float)
        mu_ = np.asarray(par.mu if mu is None else mu, dtype=float)
        alp_ = np.asarray(par.alpha if alpha is None else alpha, dtype=float)
        ph_ = np.asarray(par.phase if phase is None else phase, dtype=float)
        shape = np.broadcast(lam_, mu_, alp_, ph_).shape
        gains = self.gain_schedule(densities, compressor)
        if shape == ():
            prog = self._progress_scalar(gains, float(lam_), float(mu_), float(alp_), float(ph_))
            return prog, gains
        inv_ph = np.where(ph_ > 0, 1.0 / np.where(ph_ > 0, ph_, 1.0), 0.0)
        prog = np.zeros((len(densities) + 1, *shape))
        lag = np.zeros(shape)
        q = np.zeros(shape)
        p = np.zeros(shape)
        for t in range(1, len(densities) + 1):
            g = gains[t]
            s = 1.0 / g - 1.0
            lag = lag + np.minimum(1.0, mu_ * g) * (lam_ * s / (1.0 + t * inv_ph) - lag)
            q = q + g**alp_
            p = np.maximum(p, q - lag)
            prog[t] = p
        return prog, gains

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

    @staticmethod
    def _progress_scalar(
        gains: np.ndarray, lam: float, mu: float, alpha: float, phase: float
    ) -> np.ndarray:
        # The same recurrence as the vectorised path in plain floats: much faster for one
        # parameter set, which is what calibration's polish and the simulator call most.
        inv_ph = 1.0 / phase if phase > 0 else 0.0
        g_list = gains.tolist()
        prog = [0.0] * len(g_list)
        lag = q = p = 0.0
        for t in range(1, len(g_list)):
            g = g_list[t]
            s = 1.0 / g - 1.0
            lag += min(1.0, mu * g) * (lam * s / (1.0 + t * inv_ph) - lag)
            q += g**alpha
            if q - lag > p:
                p = q - lag
            prog[t] = p
        return np.asarray(prog)

    def curve_at(self, progress: np.ndarray, metric: str) -> np.ndarray:
        """The dense run's ``metric`` read at ``progress`` (linear; held beyond the ends)."""
        _metric_pair(metric)
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
        return _first_reach(prog, p_star)

    def _check_schedule(self, densities: Sequence[float], compressor: str) -> None:
        if len(densities) == 0:
            raise InputError("empty density schedule")
        bad = [d for d in densities if not (0.0 < d <= 1.0)]
        if bad:
            raise InputError(f"density must be in (0, 1], got {bad[0]!r}")
        if compressor != "none":
            self.trace.compressor_index(compressor)


def _first_reach(prog: np.ndarray, p_star: float) -> float | None:
    hit = np.nonzero(prog >= p_star)[0]
    if len(hit) == 0:
        return None
    i = int(hit[0])
    if i == 0:
        return 0.0
    a, b = prog[i - 1], prog[i]
    return float(i - 1 + (p_star - a) / (b - a)) if b > a else float(i)


def _first_reach_grid(prog: np.ndarray, p_star: float) -> np.ndarray:
    # Vectorised _first_reach over trailing parameter axes; NaN where never reached.
    reached = prog >= p_star
    any_hit = reached.any(axis=0)
    i = np.argmax(reached, axis=0)
    i_prev = np.maximum(i - 1, 0)
    a = np.take_along_axis(prog, i_prev[None], axis=0)[0]
    b = np.take_along_axis(prog, i[None], axis=0)[0]
    with np.errstate(invalid="ignore", divide="ignore"):
        frac = np.where(b > a, (p_star - a) / (b - a), 1.0)
    out = np.where(i == 0, 0.0, i_prev + frac)
    return np.where(any_hit, out, np.nan)


def calibrate(
    trace: GradTrace,
    runs: Sequence[RealCurve],
    targets: Sequence[tuple[str, float]],
    *,
    compressor: str = "topk",
    mu: float | None = None,
    phase: float | None = None,
    note: str = "",
) -> ConvergenceParams:
    """Fit ``lam``, ``alpha``, ``mu`` and ``phase`` to real runs (``mu``/``phase`` if not given).

    ``phase`` is fitted unless given (0 fixes it off); ``mu`` likewise (1 = the residual's own
    turnover: a residual holding ``1/g - 1`` iterations of gradient is renewed at rate ``g``).
    Fitting ``mu`` on fixed densities alone is what predicts density *switches* best on
    digits-mlp and digits-cnn (the lag follows a switch at about a quarter to a half of the
    residual's turnover; docs/benchmarks/convergence.md); pass ``mu=1.0`` for the older fit.

    Minimises the sum over runs and targets of ``log(predicted / real)^2`` of the iterations to
    reach each target (a target the real run misses is skipped): a coarse grid over the free
    parameters (vectorised), then Nelder-Mead (in log space) from the best grid point.
    """
    from scipy.optimize import minimize

    if not runs:
        raise InputError("calibration needs at least one real run")
    if not targets:
        raise InputError("calibration needs at least one target")
    model = ConvergenceModel(trace, ConvergenceParams(trace.workload, compressor, 1.0, 1.0, 0.0))
    by_schedule: dict[tuple[float, ...], list[tuple[float, float]]] = {}
    n_cases = 0
    for run in runs:
        for metric, value in targets:
            real = iterations_to_target_curve(
                run.eval_steps,
                run.eval_loss if metric == "loss" else run.eval_accuracy,
                value,
                metric,
            )
            p_star = model.dense_iterations_to(value, metric)
            if real is None or p_star is None or real <= 0:
                log.info("target %s %s skipped for run %s", metric, value, run.label)
                continue
            by_schedule.setdefault(tuple(run.densities), []).append((p_star, real))
            n_cases += 1
    if not n_cases:
        raise InputError("no calibration run reaches any of the targets")

    horizon = max(len(k) for k in by_schedule)
    grids = {
        "lam": np.concatenate([[0.0], np.logspace(-2, 1, 13)]),
        "mu": np.logspace(-1, 1.5, 6) if mu is None else np.asarray([float(mu)]),
        "alpha": np.concatenate([[0.0], np.linspace(0.025, 0.6, 12)]),
        "phase": (
            np.concatenate([[0.0], horizon * np.logspace(-1.5, 1, 11)])
            if phase is None
            else np.asarray([float(phase)])
        ),
    }
    names = list(grids)
    mesh = dict(zip(names, np.meshgrid(*grids.values(), indexing="ij"), strict=True))
    err = np.zeros(mesh["lam"].shape)
    for dens, pairs in by_schedule.items():
        prog = model.progress(dens, compressor, **mesh)[0]
        for p_star, real in pairs:
            pred = _first_reach_grid(prog, p_star)
            # Never reaching within the run's length counts as twice the run length.
            pred = np.where(np.isnan(pred), 2.0 * len(dens), pred)
            err += np.log(np.maximum(pred, 1e-9) / real) ** 2
    best_i = np.unravel_index(int(np.argmin(err)), err.shape)
    best = {k: float(mesh[k][best_i]) for k in names}
    fixed = {k for k, v in (("mu", mu), ("phase", phase)) if v is not None}
    free = [k for k in names if k not in fixed]
    # Log space keeps every parameter positive; zeros from the grid start just above zero.
    # ``phase`` is searched as its inverse (0 = off), so "off" is near the floor, not at 1.
    floor = {"lam": 1e-3, "mu": 1e-3, "alpha": 1e-3, "phase": 1e-6}

    def to_x(k: str, v: float) -> float:
        if k == "phase":
            v = 1.0 / v if v > 0 else 0.0
        return math.log(max(v, floor[k]))

    def unpack(x: np.ndarray) -> dict[str, float]:
        out = dict(best)
        for k, v in zip(free, x, strict=True):
            out[k] = 1.0 / math.exp(v) if k == "phase" else math.exp(v)
        return out

    def objective(x: np.ndarray) -> float:
        total = 0.0
        for dens_t, pairs in by_schedule.items():
            prog, _ = model.progress(dens_t, compressor, **unpack(x))
            for p_star, real in pairs:
                pred = _first_reach(prog, p_star)
                total += math.log((pred if pred else 2.0 * len(dens_t)) / real) ** 2
        return total

    x0 = np.array([to_x(k, best[k]) for k in free])
    # Bounds keep the polish inside the grid's box: outside it the runs do not identify the
    # parameters (e.g. an enormous lag that decays at once mimics no lag at all).
    box = {
        "lam": (floor["lam"], 10.0),
        "mu": (floor["mu"], 30.0),
        "alpha": (floor["alpha"], 1.0),
        "phase": (floor["phase"], 1.0 / (0.03 * horizon)),
    }
    bounds = [(math.log(box[k][0]), math.log(box[k][1])) for k in free]
    x0 = np.clip(x0, [b[0] for b in bounds], [b[1] for b in bounds])
    res = minimize(
        objective,
        x0,
        method="Nelder-Mead",
        bounds=bounds,
        options={"maxiter": 150, "xatol": 1e-3, "fatol": 1e-6},
    )
    fit, final = unpack(res.x), float(res.fun)
    if final > float(err[best_i]):  # keep the grid point if the polish did worse
        fit, final = best, float(err[best_i])
    if phase is None and fit["phase"] > 1e3 * horizon:  # no measurable effect within the runs: report it as off
        fit["phase"] = 0.0
    return ConvergenceParams(
        workload=trace.workload,
        compressor=compressor,
        lam=fit["lam"],
        mu=fit["mu"],
        alpha=fit["alpha"],
        phase=fit["phase"],
        calibrated_on=tuple(sorted({d for r in runs for d in r.densities}, reverse=True)),
        targets=tuple(f"{m}{'<=' if m == 'loss' else '>='}{v:g}" for m, v in targets),
        fit_rms_log_error=math.sqrt(final / n_cases),
        note=note,
    )


# ---------------------------------------------------------------------------- simulator hooks


def progress_per_step(
    model: ConvergenceModel,
    compressor: str,
    density: float,
    *,
    step: int,
    progress: float = 0.0,
    lag: float = 0.0,
) -> tuple[float, float]:
    """One iteration of the model: ``(progress increment, new lag)`` at iteration ``step``.

    A controller's reward is the increment divided by the iteration's seconds. At a fixed
    density the lag settles, so the increment tends to ``g ** alpha``; switching to a
    lower density pays the extra lag over the next ~``1 / (mu g)`` iterations, and switching
    back recovers it (the residual is flushed), which is what a reward must see. The increment
    is clipped at 0 (progress never goes backwards), as in :meth:`ConvergenceModel.predict`.
    """
    par = model.params
    if not (0.0 < density <= 1.0):
        raise InputError(f"density must be in (0, 1], got {density!r}")
    g = (
        1.0
        if density >= 1.0 or compressor == "none"
        else model.gain_at(compressor, density, float(step))
    )
    s = 1.0 / g - 1.0
    damp = 1.0 + (step / par.phase if par.phase > 0 else 0.0)
    new_lag = lag + min(1.0, par.mu * g) * (par.lam * s / damp - lag)
    inc = g**par.alpha - (new_lag - lag)
    return max(0.0, inc), new_lag


def annotate_records(
    model: ConvergenceModel,
    compressors: Sequence[str],
    densities: Sequence[float],
) -> dict[str, np.ndarray]:
    """Per-iteration columns for simulator run records: ``progress``, ``pred_loss``,
    ``pred_accuracy`` and ``stat_gain``, given each iteration's compressor and density.

    A run that mixes compressors uses, at each iteration, the gain of that iteration's
    compressor (a compressor the trace lacks raises :class:`InputError`; ``none`` is dense).
    """
    if len(compressors) != len(densities):
        raise InputError("compressors and densities must have one entry per iteration")
    gains = np.ones(len(densities) + 1)
    for comp in sorted(set(compressors)):
        mask = [c == comp for c in compressors]
        if comp == "none":
            continue
        sub = [d if m else 1.0 for d, m in zip(densities, mask, strict=True)]
        g = model.gain_schedule(sub, comp)
        idx = np.nonzero(np.concatenate([[False], np.asarray(mask, dtype=bool)]))[0]
        gains[idx] = g[idx]
    par = model.params
    prog = model._progress_scalar(gains, par.lam, par.mu, par.alpha, par.phase)[1:]
    return {
        "progress": prog,
        "pred_loss": model.curve_at(prog, "loss"),
        "pred_accuracy": model.curve_at(prog, "accuracy"),
        "stat_gain": gains[1:],
    }


def trace_for_profile(profile: str) -> tuple[str, bool, str]:
    """Which gradient trace a simulator profile uses: ``(workload, borrowed, note)``.

    The built-in real workloads use their own trace; large-model profiles borrow the most
    similar captured trace (by architecture family); the note is for the run's meta.json.
    """
    own = {"digits-mlp", "digits-cnn", "char-lstm"}
    if profile in own:
        return profile, False, f"gradient statistics captured from {profile}"
    src = _BORROW.get(profile, "digits-mlp")
    return (
        src,
        True,
        f"gradient statistics borrowed from the captured {src} trace (no capture of {profile}); "
        "progress is in that workload's dense-iteration equivalents",
    )


def convergence_columns(
    profile: str, compressors: Sequence[str], densities: Sequence[float]
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Record columns and a meta.json entry for a simulated run of workload profile ``profile``.

    Uses the bundled trace and calibrated parameters of the profile's own real workload, or of
    the most similar one (:func:`trace_for_profile`), and says which in the returned meta dict.
    """
    source, borrowed, note = trace_for_profile(profile)
    model = ConvergenceModel.bundled(source)
    cols = annotate_records(model, compressors, densities)
    meta = {
        "gradient_trace": source,
        "borrowed": borrowed,
        "note": note,
        "params": model.params.to_json(),
    }
    return cols, meta


def time_to_target_s(
    model: ConvergenceModel,
    progress: ArrayLike,
    iteration_end_s: ArrayLike,
    target: float,
    metric: str = "loss",
) -> float | None:
    """Seconds until a run reaches ``target``: the end time of the first iteration whose
    progress reaches the dense run's iterations-to-target (``None`` if never)."""
    p_star = model.dense_iterations_to(target, metric)
    if p_star is None:
        raise InputError(f"the dense run of {model.trace.workload!r} never reaches {metric} {target}")
    prog = np.asarray(progress, dtype=float)
    ends = np.asarray(iteration_end_s, dtype=float)
    if prog.shape != ends.shape:
        raise InputError("progress and iteration_end_s need one entry per iteration")
    hit = np.nonzero(prog >= p_star)[0]
    return float(ends[hit[0]]) if len(hit) else None

