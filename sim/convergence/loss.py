"""Lost gradient entries as a gain: how the bounded-loss transport enters the convergence model.

A collective that delivers a fraction ``1 - r - q`` of its packets lost ``r`` at random on the
links (not repaired: within the bound) and dropped ``q`` unsent past its deadline, lowest
priority (layer, magnitude) first. The model sees this like compression: the kept energy of the
gradient falls, so the gain of the iteration is multiplied by

    g_loss = gain("randomk", 1 - r) * gain("topk", 1 - q / (1 - r))

read from the same gradient trace (random loss keeps energy like random-k; the priority drop keeps
the largest entries, like top-k). How it enters depends on what happens to the lost entries:

- with error feedback (``feedback=True``) they are delayed, not forgotten, exactly like the
  entries a sparsifier leaves out: the gain multiplies the compressor's and goes through the
  calibrated lag recursion (:mod:`sim.convergence.progress`);
- without (``feedback=False``, the default, as in real runs without ``--loss-feedback``) they are
  gone: the step's update is the gradient with ``g_loss`` of its energy, so each iteration's
  progress increment (from the compressor's own gains) is multiplied by ``g_loss``.

Real runs measure both treatments; docs/bounded_loss.md states the error of each.

Pure numpy.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sim.errors import InputError

from .model import ConvergenceModel

__all__ = ["loss_gains", "progress_with_loss"]

_QUANT = 1e-6  # delivered fractions are quantised before lookup (one gain curve per value)


def loss_gains(
    model: ConvergenceModel, delivered: Sequence[float], dropped: Sequence[float] | None = None
) -> np.ndarray:
    """Per-iteration gain factor (shape ``(T,)``) of the delivered fractions ``delivered``,
    ``dropped`` of which were priority drops (default none: all random loss)."""
    d = np.asarray(delivered, dtype=float)
    q = np.zeros_like(d) if dropped is None else np.asarray(dropped, dtype=float)
    if d.shape != q.shape:
        raise InputError("delivered and dropped need one entry per iteration")
    if np.any(~np.isfinite(d)) or np.any((d <= 0) | (d > 1)) or np.any((q < 0) | (q >= 1)):
        raise InputError("delivered fractions must be in (0, 1] and dropped ones in [0, 1)")
    out = np.ones(len(d))
    if np.all(d >= 1.0):
        return out
    rows = model._row(np.arange(1, len(d) + 1, dtype=float))
    random_kept = np.round(np.minimum(d + q, 1.0) / _QUANT) * _QUANT
    prio_kept = np.round(np.clip(d / np.maximum(d + q, 1e-12), _QUANT, 1.0) / _QUANT) * _QUANT
    for kind, kept in (("randomk", random_kept), ("topk", prio_kept)):
        for value in np.unique(kept):
            if value >= 1.0:
                continue
            sel = kept == value
            out[sel] *= model.gain_curve(kind, float(value))[rows[sel]]
    return out


def progress_with_loss(
    model: ConvergenceModel,
    gains: np.ndarray,
    delivered: Sequence[float],
    dropped: Sequence[float] | None = None,
    *,
    feedback: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Progress (shape ``(T+1,)``) and effective gains of a run whose compressor gains are
    ``gains`` (``g_0..g_T``, ``g_0`` unused) and whose collectives delivered ``delivered``
    (module docstring: ``feedback`` chooses the treatment of the lost entries)."""
    from .progress import progress_scalar

    g_loss = loss_gains(model, delivered, dropped)
    if len(g_loss) + 1 != len(gains):
        raise InputError("delivered must have one entry per iteration")
    par = model.params
    eff = np.asarray(gains, dtype=float).copy()
    eff[1:] = eff[1:] * g_loss
    if feedback:
        prog = progress_scalar(eff, par.lam, par.mu, par.alpha, par.phase, par.knee)
        return prog, eff
    base = progress_scalar(np.asarray(gains, dtype=float), par.lam, par.mu, par.alpha,
                           par.phase, par.knee)
    prog = np.concatenate([[0.0], np.cumsum(np.diff(base) * g_loss)])
    return prog, eff
