"""Decision replay for ``compctl validate --replay-decisions``.

The closed-loop comparison runs the real run's policy in the simulator: the simulated controller
sees simulated observations and may take another path (other densities, other collectives), so
its error mixes the pricing and network model's error with the controller's divergence. Replaying
the real run's decisions (:mod:`sim.control.policies.replay`) prices the simulated iterations on
exactly the real choices: what remains is the model's error alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sim.errors import InputError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["replay_schedule"]


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
