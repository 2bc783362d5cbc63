"""Calibration: fit the convergence model's parameters to real runs at a few fixed densities."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

import numpy as np

from sim.errors import InputError
from traces.gradtrace import GradTrace

from .model import ConvergenceModel
from .params import ConvergenceParams, RealCurve
from .progress import first_reach, first_reach_grid, iterations_to_target_curve

__all__ = ["calibrate"]

log = logging.getLogger(__name__)


def calibrate(
    trace: GradTrace,
    runs: Sequence[RealCurve],
    targets: Sequence[tuple[str, float]],
    *,
    compressor: str = "topk",
    mu: float | None = None,
    phase: float | None = None,
    knee: float | None = None,
    note: str = "",
) -> ConvergenceParams:
    """Fit ``lam``, ``alpha``, ``mu``, ``phase`` and ``knee`` to real runs.

    ``phase`` and ``knee`` are fitted unless given (0 fixes them off); ``mu`` likewise (1 = the residual's own
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
        "mu": np.logspace(-1.5, 0, 6) if mu is None else np.asarray([float(mu)]),
        "alpha": np.concatenate([[0.0], np.linspace(0.025, 0.6, 12)]),
        "phase": (
            np.concatenate([[0.0], horizon * np.logspace(-1.5, 1, 11)])
            if phase is None
            else np.asarray([float(phase)])
        ),
    }
    knees = (
        np.concatenate([[0.0], np.logspace(0.5, 3, 6)]) if knee is None else [float(knee)]
    )
    names = list(grids)
    mesh = dict(zip(names, np.meshgrid(*grids.values(), indexing="ij"), strict=True))
    # One knee value at a time keeps the (T+1, grid) progress array small.
    errs = []
    for kv in knees:
        err_k = np.zeros(mesh["lam"].shape)
        for dens, pairs in by_schedule.items():
            prog = model.progress(dens, compressor, knee=kv, **mesh)[0]
            for p_star, real in pairs:
                pred = first_reach_grid(prog, p_star)
                # Never reaching within the run's length counts as twice the run length.
                pred = np.where(np.isnan(pred), 2.0 * len(dens), pred)
                err_k += np.log(np.maximum(pred, 1e-9) / real) ** 2
        errs.append(err_k)
    err = np.stack(errs)
    best_i = np.unravel_index(int(np.argmin(err)), err.shape)
    best = {k: float(mesh[k][best_i[1:]]) for k in names}
    best["knee"] = float(knees[best_i[0]])
    names.append("knee")
    fixed = {k for k, v in (("mu", mu), ("phase", phase), ("knee", knee)) if v is not None}
    free = [k for k in names if k not in fixed]
    # Log space keeps every parameter positive; zeros from the grid start just above zero.
    # ``phase`` and ``knee`` are searched as inverses (0 = off), so "off" is near the floor.
    floor = {"lam": 1e-3, "mu": 1e-3, "alpha": 1e-3, "phase": 1e-6, "knee": 1e-6}
    inverse = ("phase", "knee")

    def to_x(k: str, v: float) -> float:
        if k in inverse:
            v = 1.0 / v if v > 0 else 0.0
        return math.log(max(v, floor[k]))

    def unpack(x: np.ndarray) -> dict[str, float]:
        out = dict(best)
        for k, v in zip(free, x, strict=True):
            out[k] = 1.0 / math.exp(v) if k in inverse else math.exp(v)
        return out

    def objective(x: np.ndarray) -> float:
        total = 0.0
        for dens_t, pairs in by_schedule.items():
            prog, _ = model.progress(dens_t, compressor, **unpack(x))
            for p_star, real in pairs:
                pred = first_reach(prog, p_star)
                total += math.log((pred if pred else 2.0 * len(dens_t)) / real) ** 2
        return total

    x0 = np.array([to_x(k, best[k]) for k in free])
    # Bounds keep the polish inside the grid's box: outside it the runs do not identify the
    # parameters (e.g. an enormous lag that decays at once mimics no lag at all).
    box = {
        "lam": (floor["lam"], 10.0),
        "mu": (floor["mu"], 1.0),
        "alpha": (floor["alpha"], 1.0),
        "phase": (floor["phase"], 1.0 / (0.03 * horizon)),
        "knee": (floor["knee"], 1.0),
    }
    bounds = [(math.log(box[k][0]), math.log(box[k][1])) for k in free]
    x0 = np.clip(x0, [b[0] for b in bounds], [b[1] for b in bounds])
    res = minimize(
        objective,
        x0,
        method="Nelder-Mead",
        bounds=bounds,
        options={"maxiter": 300, "xatol": 1e-3, "fatol": 1e-6},
    )
    fit, final = unpack(res.x), float(res.fun)
    if final > float(err[best_i]):  # keep the grid point if the polish did worse
        fit, final = best, float(err[best_i])
    # No measurable effect within the runs: report it as off.
    if phase is None and fit["phase"] > 1e3 * horizon:
        fit["phase"] = 0.0
    if knee is None and fit["knee"] > 1e5:
        fit["knee"] = 0.0
    return ConvergenceParams(
        workload=trace.workload,
        compressor=compressor,
        lam=fit["lam"],
        mu=fit["mu"],
        alpha=fit["alpha"],
        phase=fit["phase"],
        knee=fit["knee"],
        calibrated_on=tuple(sorted({d for r in runs for d in r.densities}, reverse=True)),
        targets=tuple(f"{m}{'<=' if m == 'loss' else '>='}{v:g}" for m, v in targets),
        fit_rms_log_error=math.sqrt(final / n_cases),
        note=note,
    )
