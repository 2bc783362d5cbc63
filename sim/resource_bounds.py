"""Bounds on what a simulation may allocate, checked from its configuration before it starts.

A few characters of input (``--workers 10000000 --straggler-sigma 0.1``) used to ask for tens of
gigabytes; now the size of every structure that grows with the input is estimated first and a
configuration over the budget is refused with one line (:class:`~sim.errors.InputError`).

What grows:

* per worker: a persistent slowness factor (``worker_speed_sigma > 0``) and a buffer of
  per-iteration jitter draws (``straggler_sigma > 0``) of at most :data:`DRAW_BUFFER_MAX_BYTES`,
  at least one row of ``workers`` values;
* per iteration: one record (measured at about 0.9 KiB with the optional columns; counted as
  :data:`RECORD_BYTES`).

:data:`MAX_WORKERS` is a modelling limit as much as a memory one: the largest data-parallel jobs
run on around 10^5 accelerators, and a run over 10^6 workers is almost always a typo.
"""

from __future__ import annotations

from sim.errors import InputError

__all__ = [
    "MAX_WORKERS",
    "MEMORY_BUDGET_BYTES",
    "DRAW_BUFFER_MAX_BYTES",
    "RECORD_BYTES",
    "straggler_chunk_rows",
    "estimate_sim_bytes",
    "check_sim_bounds",
]

#: Most simulated workers accepted.
MAX_WORKERS = 1_000_000
#: Most bytes a simulation's input-dependent structures may take by the estimate below.
MEMORY_BUDGET_BYTES = 2 << 30
#: Largest buffer of straggler draws (rows of ``workers`` float64 values) held at once.
DRAW_BUFFER_MAX_BYTES = 64 << 20
#: Bytes counted per iteration record (measured about 900 with every optional column).
RECORD_BYTES = 1024
_FLOAT_BYTES = 8


def straggler_chunk_rows(n_workers: int, wanted_rows: int = 256) -> int:
    """Iterations of jitter drawn at once: ``wanted_rows``, fewer when the buffer would be big.

    The draws are consumed in order whatever the chunk, so this changes memory, not results.
    """
    fit = DRAW_BUFFER_MAX_BYTES // (_FLOAT_BYTES * max(1, n_workers))
    return max(1, min(int(wanted_rows), fit))


def estimate_sim_bytes(
    *, workers: int, iterations: int, straggler_sigma: float, worker_speed_sigma: float
) -> int:
    """Bytes of the structures of one simulation that grow with its configuration."""
    per_worker = 0
    if worker_speed_sigma > 0:
        per_worker += _FLOAT_BYTES
    if straggler_sigma > 0:
        per_worker += _FLOAT_BYTES * straggler_chunk_rows(workers)
    return workers * per_worker + iterations * RECORD_BYTES


def check_sim_bounds(
    *, workers: int, iterations: int, straggler_sigma: float, worker_speed_sigma: float
) -> None:
    """:class:`InputError` (one line) when a simulation would exceed the bounds above."""
    if workers > MAX_WORKERS:
        raise InputError(
            f"workers: {workers:,} is more than the simulator models (limit {MAX_WORKERS:,})"
        )
    need = estimate_sim_bytes(
        workers=workers,
        iterations=iterations,
        straggler_sigma=straggler_sigma,
        worker_speed_sigma=worker_speed_sigma,
    )
    if need > MEMORY_BUDGET_BYTES:
        raise InputError(
            f"{workers:,} workers x {iterations:,} iterations would need about "
            f"{need / 2**30:.1f} GiB (limit {MEMORY_BUDGET_BYTES / 2**30:.0f} GiB); "
            "use fewer iterations or workers"
        )
