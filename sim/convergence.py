"""Convergence model: compression decisions -> training progress -> predicted loss and accuracy.

Progress is counted in *dense-iteration equivalents*: after ``t`` iterations a compressed run has
made progress ``p_t`` if its loss equals the dense run's loss after ``p_t`` iterations. The dense
run's curve comes from a gradient trace (:mod:`traces.gradtrace`), so predicted loss and accuracy
are that curve read at ``p_t``; a dense schedule gives ``p_t = t`` and reproduces it exactly.

The model (docs/convergence.md derives and discusses it). With error feedback, what top-k leaves
out is not lost but delayed: the residual holds about ``1/g - 1`` iterations' worth of gradient,
``g`` being the compression gain (kept energy / compensated energy). So compression mostly adds
a *lag*, plus possibly a small loss of efficiency per step. Per iteration ``t`` at density
``d_t``::

    g_t = gain(compressor, d_t, at progress p_{t-1})     # sampled from the gradient trace
    s_t = 1/g_t - 1                                      # staleness: iterations held back
    r_t = min(1, mu * g_t)                               # the residual turns over in ~1/g steps
    L_t = L_{t-1} + r_t * (lam * s_t - L_{t-1})          # lag relaxes towards lam * s_t
    q_t = q_{t-1} + 1 / (1 + kappa * s_t)                # per-step efficiency
    p_t = max(p_{t-1}, q_t - L_t)                        # progress never goes backwards

Three parameters ``lam`` (lag per iteration of staleness), ``mu`` (turnover speed) and ``kappa``
(efficiency loss), calibrated per workload on real runs at a few fixed densities
(:func:`calibrate`). More gain never predicts less progress: ``L_t`` increases and ``q_t``
decreases with every ``s_u`` (a test checks it), and the running maximum keeps that order.

Gains: the trace holds the whole-model gain per sampled step at each captured density; the gain at
another density is interpolated linearly in (log density, log gain), clamped to be non-increasing
as density falls; below the smallest captured density it is extrapolated with the last segment's
log-log slope; density 1.0 has gain 1. The sampled step used is the one nearest to the current
progress (gradient statistics follow the training phase, not the wall clock).

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
        lam, mu, kappa: the model's parameters.
        calibrated_on: densities of the real calibration runs.
        targets: what the fit matched (e.g. ``"loss<=0.5"``).
        fit_rms_log_error: root-mean-square of log(predicted / real iterations) over the fit.
        note: free text (command, seeds).
    """

    workload: str
    compressor: str
    lam: float
    mu: float
    kappa: float
    calibrated_on: tuple[float, ...] = ()
    targets: tuple[str, ...] = ()
    fit_rms_log_error: float = float("nan")
    note: str = ""

    def __post_init__(self) -> None:
        for name in ("lam", "mu", "kappa"):
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
                kappa=float(data["kappa"]),
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

    def gain_at(self, compressor: str, density: float, progress: float) -> float:
        """Gain at ``density`` at the sampled step nearest to ``progress``."""
        return float(self.gain_curve(compressor, density)[self._row(np.asarray([progress]))[0]])

    def _row(self, progress: np.ndarray) -> np.ndarray:
        steps = self.trace.steps.astype(float)
        idx = np.searchsorted(steps, progress)
        idx = np.clip(idx, 0, len(steps) - 1)
        prev = np.clip(idx - 1, 0, len(steps) - 1)
        closer_prev = np.abs(steps[prev] - progress) < np.abs(steps[idx] - progress)
        return np.where(closer_prev, prev, idx)

    # ------------------------------------------------------------------ prediction

    def progress(
        self,
        densities: Sequence[float],
        compressor: str = "topk",
        *,
        lam: np.ndarray | float | None = None,
        mu: np.ndarray | float | None = None,
        kappa: np.ndarray | float | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Progress after each iteration (shape (T+1, *P)) and gains (T+1, *P).

        ``lam``, ``mu``, ``kappa`` default to the calibrated values; arrays broadcast, which is
        how :func:`calibrate` evaluates a whole parameter grid at once.
        """
        lam_ = np.asarray(self.params.lam if lam is None else lam, dtype=float)
        mu_ = np.asarray(self.params.mu if mu is None else mu, dtype=float)
        kap_ = np.asarray(self.params.kappa if kappa is None else kappa, dtype=float)
        shape = np.broadcast(lam_, mu_, kap_).shape
        curves = {d: self.gain_curve(compressor, d) for d in sorted(set(densities))}
        if shape == ():
            return self._progress_scalar(densities, curves, float(lam_), float(mu_), float(kap_))
        n = len(densities)
        prog = np.zeros((n + 1, *shape))
        gains = np.ones((n + 1, *shape))
        lag = np.zeros(shape)
        q = np.zeros(shape)
        p = np.zeros(shape)
        for t, d in enumerate(densities, start=1):
            g = curves[d][self._row(p)] if d < 1.0 else np.ones(shape)
            s = 1.0 / g - 1.0
            r = np.minimum(1.0, mu_ * g)
            lag = lag + r * (lam_ * s - lag)
            q = q + 1.0 / (1.0 + kap_ * s)
            p = np.maximum(p, q - lag)
            prog[t] = p
            gains[t] = g
        return prog, gains

    def _progress_scalar(
        self, densities: Sequence[float], curves: dict[float, np.ndarray], lam: float, mu: float, kappa: float
    ) -> tuple[np.ndarray, np.ndarray]:
        # The same recurrence as the vectorised path, in plain floats: ~30x faster for one
        # parameter set, which is what calibration's polish and the simulator call most.
        steps = [float(x) for x in self.trace.steps]
        lists = {d: [float(x) for x in c] for d, c in curves.items()}
        n = len(densities)
        prog = [0.0] * (n + 1)
        gains = [1.0] * (n + 1)
        lag = q = p = 0.0
        row = 0
        last = len(steps) - 1
        for t, d in enumerate(densities, start=1):
            # Progress never decreases, so the nearest sampled step only moves forward.
            while row < last and abs(steps[row + 1] - p) <= abs(steps[row] - p):
                row += 1
            g = lists[d][row] if d < 1.0 else 1.0
            s = 1.0 / g - 1.0
            lag += min(1.0, mu * g) * (lam * s - lag)
            q += 1.0 / (1.0 + kappa * s)
            if q - lag > p:
                p = q - lag
            prog[t] = p
            gains[t] = g
        return np.asarray(prog), np.asarray(gains)

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
        self, densities: Sequence[float], target: float, metric: str = "loss", compressor: str = "topk"
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
    mu: float | None = 1.0,
    note: str = "",
) -> ConvergenceParams:
    """Fit ``lam`` and ``kappa`` (and ``mu`` if ``mu`` is None) to real runs at fixed densities.

    ``mu`` defaults to 1, the residual's own turnover (a residual holding ``1/g - 1``
    iterations of gradient is renewed at rate ``g``); fitting it too tends to overfit the
    fixed-density runs at the expense of schedules that change density (docs/convergence.md).

    Minimises the sum over runs and targets of ``log(predicted / real)^2`` of the iterations to
    reach each target (a target the real run misses is skipped): a coarse log-spaced grid over
    all three parameters (vectorised), then Nelder-Mead from the best grid point.
    """
    from scipy.optimize import minimize

    if not runs:
        raise InputError("calibration needs at least one real run")
    if not targets:
        raise InputError("calibration needs at least one target")
    seed_params = ConvergenceParams(trace.workload, compressor, 1.0, 1.0, 0.0)
    model = ConvergenceModel(trace, seed_params)
    cases: list[tuple[list[float], float, float]] = []  # (densities, p_star, real iterations)
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
            cases.append((list(run.densities), p_star, real))
    if not cases:
        raise InputError("no calibration run reaches any of the targets")

    lam_g = np.concatenate([[0.0], np.logspace(-2, 1, 16)])
    mu_g = np.logspace(-1, 1.5, 11) if mu is None else np.asarray([float(mu)])
    kap_g = np.concatenate([[0.0], np.logspace(-4, -0.5, 8)])
    L, M, K = np.meshgrid(lam_g, mu_g, kap_g, indexing="ij")
    err = np.zeros(L.shape)
    cache: dict[tuple[float, ...], np.ndarray] = {}
    for dens, p_star, real in cases:
        key = tuple(dens)
        if key not in cache:
            cache[key] = model.progress(dens, compressor, lam=L, mu=M, kappa=K)[0]
        pred = _first_reach_grid(cache[key], p_star)
        # Never reaching within the run's length counts as twice the run length (penalised).
        pred = np.where(np.isnan(pred), 2.0 * len(dens), pred)
        err += np.log(np.maximum(pred, 1e-9) / real) ** 2
    best = np.unravel_index(int(np.argmin(err)), err.shape)
    x0 = np.log(np.array([L[best] + 1e-3, M[best], K[best] + 1e-5]))
    if mu is not None:
        x0 = np.delete(x0, 1)

    def unpack(x: np.ndarray) -> tuple[float, float, float]:
        v = np.exp(x)
        return (float(v[0]), float(v[1]), float(v[2])) if mu is None else (float(v[0]), float(mu), float(v[1]))

    by_schedule: dict[tuple[float, ...], list[tuple[float, float]]] = {}
    for dens, p_star, real in cases:
        by_schedule.setdefault(tuple(dens), []).append((p_star, real))

    def objective(x: np.ndarray) -> float:
        lam, mu_, kap = unpack(x)
        total = 0.0
        for dens_t, pairs in by_schedule.items():
            prog, _ = model.progress(dens_t, compressor, lam=lam, mu=mu_, kappa=kap)
            for p_star, real in pairs:
                pred = _first_reach(prog, p_star)
                total += math.log((pred if pred else 2.0 * len(dens_t)) / real) ** 2
        return total

    res = minimize(objective, x0, method="Nelder-Mead", options={"maxiter": 120, "xatol": 1e-3, "fatol": 1e-6})
    lam, mu_fit, kap = unpack(res.x)
    final = float(res.fun)
    if final > float(err[best]):  # keep the grid point if the polish did worse
        lam, mu_fit, kap, final = float(L[best]), float(M[best]), float(K[best]), float(err[best])
    return ConvergenceParams(
        workload=trace.workload,
        compressor=compressor,
        lam=lam,
        mu=mu_fit,
        kappa=kap,
        calibrated_on=tuple(sorted({d for r in runs for d in r.densities}, reverse=True)),
        targets=tuple(f"{m}{'<=' if m == 'loss' else '>='}{v:g}" for m, v in targets),
        fit_rms_log_error=math.sqrt(final / len(cases)),
        note=note,
    )


# ---------------------------------------------------------------------------- simulator hooks


def progress_per_step(
    model: ConvergenceModel,
    compressor: str,
    density: float,
    *,
    progress: float = 0.0,
    lag: float = 0.0,
) -> tuple[float, float]:
    """One iteration of the model: ``(progress increment, new lag)`` from the current state.

    A controller's reward is the increment divided by the iteration's seconds. At a fixed
    density the lag settles, so the increment tends to ``1 / (1 + kappa s)``; switching to a
    lower density pays the extra lag over the next ~``1 / (mu g)`` iterations, and switching
    back recovers it (the residual is flushed), which is what a reward must see.
    """
    p = model.params
    if not (0.0 < density <= 1.0):
        raise InputError(f"density must be in (0, 1], got {density!r}")
    g = 1.0 if density >= 1.0 or compressor == "none" else model.gain_at(compressor, density, progress)
    s = 1.0 / g - 1.0
    new_lag = lag + min(1.0, p.mu * g) * (p.lam * s - lag)
    inc = 1.0 / (1.0 + p.kappa * s) - (new_lag - lag)
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
    if len(densities) == 0:
        return {k: np.zeros(0) for k in ("progress", "pred_loss", "pred_accuracy", "stat_gain")}
    names = sorted(set(compressors) - {"none"})
    if len(names) <= 1:
        comp = names[0] if names else "none"
        dens = [1.0 if c == "none" else d for c, d in zip(compressors, densities, strict=True)]
        pred = model.predict(dens, comp)
        prog, gain = pred.progress[1:], pred.gain[1:]
    else:
        prog_l, gain_l = [], []
        par = model.params
        p_cur = lag = q = 0.0
        for c, d in zip(compressors, densities, strict=True):
            g = 1.0 if c == "none" or d >= 1.0 else model.gain_at(c, d, p_cur)
            s = 1.0 / g - 1.0
            lag += min(1.0, par.mu * g) * (par.lam * s - lag)
            q += 1.0 / (1.0 + par.kappa * s)
            p_cur = max(p_cur, q - lag)
            prog_l.append(p_cur)
            gain_l.append(g)
        prog, gain = np.asarray(prog_l), np.asarray(gain_l)
    return {
        "progress": prog,
        "pred_loss": model.curve_at(prog, "loss"),
        "pred_accuracy": model.curve_at(prog, "accuracy"),
        "stat_gain": gain,
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
