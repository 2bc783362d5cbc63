"""What the simulator calls: per-step progress, run-record columns, time to a target.

A simulated run's records get ``progress``, ``pred_loss``, ``pred_accuracy`` and ``stat_gain``
columns from the bundled model of its workload profile, or of the most similar captured workload.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from sim.errors import InputError

from .loss import progress_with_loss
from .model import ConvergenceModel
from .progress import efficiency, progress_scalar

if TYPE_CHECKING:
    from sim.sync import ConsensusParams

__all__ = [
    "progress_per_step",
    "annotate_records",
    "apply_sync_efficiency",
    "trace_for_profile",
    "convergence_columns",
    "time_to_target_s",
]

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
    density the lag settles, so the increment tends to the per-step efficiency
    ``g ** alpha / (1 + s / knee)``; switching to a
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
    inc = efficiency(g, par.alpha, par.knee) - (new_lag - lag)
    return max(0.0, inc), new_lag


def annotate_records(
    model: ConvergenceModel,
    compressors: Sequence[str],
    densities: Sequence[float],
    *,
    delivered: Sequence[float] | None = None,
    dropped: Sequence[float] | None = None,
    loss_feedback: bool = False,
) -> dict[str, np.ndarray]:
    """Per-iteration columns for simulator run records: ``progress``, ``pred_loss``,
    ``pred_accuracy`` and ``stat_gain``, given each iteration's compressor and density.

    A run that mixes compressors uses, at each iteration, the gain of that iteration's
    compressor (a compressor the trace lacks raises :class:`InputError`; ``none`` is dense).
    With ``delivered`` (the bounded-loss transport's delivered fraction per iteration, and
    ``dropped``, its priority drops), the lost entries cost progress as
    :func:`sim.convergence.loss.progress_with_loss` says (``loss_feedback``: whether they are
    kept by error feedback); ``stat_gain`` is then the gain with the loss counted.
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
    if delivered is not None:
        if len(delivered) != len(densities):
            raise InputError("delivered must have one entry per iteration")
        full, gains = progress_with_loss(
            model, gains, delivered, dropped, feedback=loss_feedback
        )
        prog = full[1:]
    else:
        prog = progress_scalar(gains, par.lam, par.mu, par.alpha, par.phase, par.knee)[1:]
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


def apply_sync_efficiency(
    model: ConvergenceModel,
    cols: dict[str, np.ndarray],
    workers: int,
    groups: Sequence[int],
    shuffle_every: Sequence[int],
    params: ConsensusParams,
) -> dict[str, np.ndarray]:
    """``cols`` with DS-Sync's consensus cost applied: each iteration's progress increment is
    scaled by :func:`sim.sync.sync_efficiency` of its ``(groups, shuffle_every)`` at the
    workload's own learning rate (``params.lr``).

    When every iteration has one group (efficiency 1) ``cols`` is returned unchanged, so
    DS-Sync with one group predicts exactly what plain allreduce does.
    """
    from sim.sync import sync_efficiency

    if len(groups) != len(cols["progress"]) or len(shuffle_every) != len(groups):
        raise InputError("groups and shuffle_every need one entry per iteration")
    cache: dict[tuple[int, int], float] = {}
    eff = np.empty(len(groups))
    for i, key in enumerate(zip(groups, shuffle_every, strict=True)):
        e = cache.get(key)
        if e is None:
            e = cache[key] = sync_efficiency(workers, int(key[0]), int(key[1]), params)
        eff[i] = e
    if bool(np.all(eff == 1.0)):
        return cols
    prog = np.asarray(cols["progress"], dtype=float)
    inc = np.diff(np.concatenate([[0.0], prog]))
    new_prog = np.cumsum(inc * eff)
    out = dict(cols)
    out["progress"] = new_prog
    out["pred_loss"] = model.curve_at(new_prog, "loss")
    out["pred_accuracy"] = model.curve_at(new_prog, "accuracy")
    return out


def convergence_columns(
    profile: str,
    compressors: Sequence[str],
    densities: Sequence[float],
    *,
    delivered: Sequence[float] | None = None,
    dropped: Sequence[float] | None = None,
    loss_feedback: bool = False,
    sync: tuple[int, Sequence[int], Sequence[int]] | None = None,
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Record columns and a meta.json entry for a simulated run of workload profile ``profile``.

    Uses the bundled trace and calibrated parameters of the profile's own real workload, or of
    the most similar one (:func:`trace_for_profile`), and says which in the returned meta dict.
    ``sync`` is ``(workers, groups per iteration, shuffle_every per iteration)`` of a run that
    may use DS-Sync: progress then pays the consensus cost (:func:`apply_sync_efficiency`) with
    the workload's calibrated consensus parameters, recorded in the meta under ``consensus``.
    """
    source, borrowed, note = trace_for_profile(profile)
    model = ConvergenceModel.bundled(source)
    cols = annotate_records(
        model,
        compressors,
        densities,
        delivered=delivered,
        dropped=dropped,
        loss_feedback=loss_feedback,
    )
    meta: dict[str, Any] = {
        "gradient_trace": source,
        "borrowed": borrowed,
        "note": note,
        "params": model.params.to_json(),
    }
    if sync is not None:
        from sim.sync import load_consensus

        params, entry = load_consensus(source)
        workers, groups, shuffle_every = sync
        cols = apply_sync_efficiency(model, cols, workers, groups, shuffle_every, params)
        meta["consensus"] = {"kappa": params.kappa, "curvature": params.curvature,
                             "lr": params.lr, **{k: v for k, v in entry.items()
                                                 if k not in ("kappa", "curvature", "lr")}}
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
        raise InputError(
            f"the dense run of {model.trace.workload!r} never reaches {metric} {target}"
        )
    prog = np.asarray(progress, dtype=float)
    ends = np.asarray(iteration_end_s, dtype=float)
    if prog.shape != ends.shape:
        raise InputError("progress and iteration_end_s need one entry per iteration")
    hit = np.nonzero(prog >= p_star)[0]
    return float(ends[hit[0]]) if len(hit) else None
