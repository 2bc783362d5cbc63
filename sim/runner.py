"""Run one simulation from a validated configuration: the simulator's public entry point.

:func:`run_simulation` returns the per-iteration records and the metadata of a
:class:`~sim.config.SimConfig`; :func:`simulate_to_dir` writes them atomically as a run directory.
(``SimConfig``, ``FIDELITIES`` and ``default_compressor`` live in :mod:`sim.config` and are
re-exported here.)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sim.errors import InputError

from .config import FIDELITIES, STEPWISE_FIDELITIES, SimConfig, default_compressor

if TYPE_CHECKING:
    import pandas as pd

    from traces.model import TraceSet

__all__ = [
    "FIDELITIES",
    "SimConfig",
    "default_compressor",
    "run_simulation",
    "simulate_to_dir",
]


def run_simulation(
    cfg: SimConfig,
    *,
    progress: bool = False,
    traces: TraceSet | None = None,
    events: str | None = None,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Simulate ``cfg``; returns (records with one row per iteration, metadata).

    ``traces``, if given, is used instead of resolving ``cfg.trace`` (which then only labels the
    run): for programs that build per-link trace sets in memory. ``progress`` shows a tqdm bar on
    a terminal. ``events`` (fidelity stepwise or events) writes the first iteration's event
    timeline there as Chrome trace JSON.

    The records hold every column of :data:`sim.schema.REQUIRED_COLUMNS` with ``source="sim"``,
    plus ``comm_s``, ``gain``, ``est_latency_s`` and ``est_bandwidth_Bps``. Same config, same
    results, bit for bit.
    """
    from .engine import simulate

    if events is not None and cfg.fidelity not in STEPWISE_FIDELITIES:
        raise InputError("an event timeline needs fidelity stepwise or events")
    records, meta = simulate(cfg, progress=progress, traces=traces, events=events)
    if cfg.convergence == "auto":
        records, meta = _add_convergence(cfg, records, meta)
    return records, meta


def _add_convergence(
    cfg: SimConfig, records: pd.DataFrame, meta: dict[str, Any]
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Statistical efficiency: progress and predicted loss/accuracy per iteration.

    Uses the bundled gradient trace of the profile's own real workload, or borrows the most
    similar one (named in ``meta["convergence"]``). A profile loaded from a file that matches no
    captured workload gets the nearest family's statistics, also recorded in the meta.
    """
    from .convergence import convergence_columns

    sync = None
    if "groups" in records:
        sync = (cfg.workers, records["groups"].tolist(), records["shuffle_every"].tolist())
    try:
        lossy = "delivered_frac" in records
        cols, conv_meta = convergence_columns(
            cfg.workload,
            records["compressor"].tolist(),
            records["density"].tolist(),
            delivered=records["delivered_frac"].tolist() if lossy else None,
            dropped=records["dropped_frac"].tolist() if lossy else None,
            loss_feedback=cfg.loss_feedback,
            sync=sync,
        )
    except InputError as exc:
        # E.g. a compressor the gradient traces hold no gains for: the run stays valid, without
        # statistical efficiency, and says why.
        meta = dict(meta)
        meta["convergence"] = {"skipped": str(exc)}
        return records, meta
    records = records.copy()
    for name in ("progress", "pred_loss", "pred_accuracy"):
        records[name] = cols[name]
    if lossy:
        # The statistical gain with the lost entries counted (the ``gain`` column is the
        # compressor's alone, what a controller observes).
        records["loss_stat_gain"] = cols["stat_gain"]
    meta = dict(meta)
    meta["convergence"] = conv_meta
    return records, meta


def simulate_to_dir(
    cfg: SimConfig,
    out: str | os.PathLike[str],
    *,
    force: bool = False,
    progress: bool = False,
) -> Path:
    """Run ``cfg`` and write ``records.parquet`` + ``meta.json`` into ``out`` atomically.

    The output directory is checked before the run starts (an existing one is an error unless
    ``force``), and nothing is left behind when the run fails.
    """
    from .rundir import check_out_dir, write_run

    check_out_dir(out, force=force)
    records, meta = run_simulation(cfg, progress=progress)
    return write_run(out, records, meta, force=force)
