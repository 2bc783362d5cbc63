"""Decision replay for ``compctl validate --replay-decisions``.

The closed-loop comparison runs the real run's policy in the simulator: the simulated controller
sees simulated observations and may take another path (other densities, other collectives), so
its error mixes the pricing and network model's error with the controller's divergence. Replaying
the real run's decisions (:mod:`sim.control.policies.replay`) prices the simulated iterations on
exactly the real choices: what remains is the model's error alone.

:func:`constant_floor_mape` is the other yardstick: on a constant trace a static policy's
simulated iterations all take the same time, so no calibration can bring its MAPE below the
best constant prediction's, which is the run's own iteration-to-iteration noise.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from sim.errors import InputError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["replay_schedule", "constant_floor_mape"]


def replay_schedule(real: pd.DataFrame, steps: int | None = None) -> str:
    """The ``replay`` policy's schedule (:mod:`sim.control.policies.replay`) of a real run's
    records: each iteration's compressor, density and collective label, in iteration order
    (``steps`` iterations; a missing iteration repeats the one before it)."""
    from sim.control.policies.replay import encode_schedule

    need = {"iteration", "compressor", "density", "collective"}
    if not need <= set(real.columns):
        missing = sorted(need - set(real.columns))
        raise InputError(f"cannot replay decisions: the records lack {missing}")
    rows = real.drop_duplicates("iteration").set_index("iteration").sort_index()
    if rows.empty:
        raise InputError("cannot replay decisions: the real run has no records")
    n = int(rows.index.max()) + 1 if steps is None else int(steps)
    rows = rows.reindex(range(n)).ffill().bfill()
    return encode_schedule(zip(rows["compressor"].astype(str), rows["density"].astype(float),
                               rows["collective"].astype(str), strict=True))


def constant_floor_mape(real_iter_s: np.ndarray) -> float:
    """The least MAPE any constant prediction reaches on these per-iteration times: the noise
    floor of a run on a constant trace under a static policy, where a deterministic simulator
    predicts the same time every iteration. The best constant is the median weighted by
    ``1 / time`` (the minimiser of the mean relative absolute error)."""
    x = np.asarray(real_iter_s, dtype=float)
    x = x[np.isfinite(x) & (x > 0)]
    if x.size == 0:
        return math.nan
    order = np.argsort(x)
    weights = 1.0 / x[order]
    best = x[order][int(np.searchsorted(np.cumsum(weights) / weights.sum(), 0.5))]
    return float(np.mean(np.abs(best - x) / x))
