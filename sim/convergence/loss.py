"""Lost gradient entries as a gain: how the bounded-loss transport enters the convergence model.

A collective that delivers a fraction ``1 - r - q`` of its packets lost ``r`` at random on the
links (not repaired: within the bound) and dropped ``q`` unsent past its deadline, lowest
priority (layer, magnitude) first. The model sees this like compression: the kept energy of the
gradient falls, so the gain of the iteration is multiplied by

    g_loss = gain("randomk", 1 - r) * gain("topk", 1 - q / (1 - r))

read from the same gradient trace (random loss keeps energy like random-k; the priority drop keeps
the largest entries, like top-k). The product composes with the compressor's own gain as two
independent thinnings would. The model's parameters were calibrated with error feedback, so
lost entries are treated as delayed, not forgotten; real runs measure both treatments
(``realrun`` ``--loss-feedback``) and docs/bounded_loss.md states the error of this shortcut.

Pure numpy.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sim.errors import InputError

from .model import ConvergenceModel

__all__ = ["loss_gains"]

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
