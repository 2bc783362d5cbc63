"""Per-run metrics and comparisons between policies in the same scenario.

A *scenario* is everything about a run except what the policy under test chose (trace, workers,
workload, seed, ...; see :data:`analysis.load.CHOICE_KEYS`). Within a scenario every run is
compared with the ``dense`` run and with the best ``fixed`` run on one basis:

* time-to-accuracy when every run has a progress curve (``accuracy`` from real runs, else
  ``pred_accuracy`` or cumulative ``progress`` from the convergence model). The target is the
  ``tta_target`` report hint, or else the lowest final value any run of the scenario reached, so
  every run reaches it and the comparison ranks how fast they get there;
* otherwise the mean iteration time (throughput alone: it always favours compressing more, which
  is why the report says which basis it used).

Speed-ups are ``baseline / run`` on that basis: above 1 means faster than the baseline. The
``iter_speedup_*`` columns always compare mean iteration times (throughput alone), and
``tta_target`` holds the target each run's ``tta_s`` was measured against.
"""

from __future__ import annotations

import logging
import math

import numpy as np
import pandas as pd

from .load import Results

__all__ = [
    "PROGRESS_COLUMNS",
    "run_metrics", "summary_table", "best_choice", "time_to_accuracy_s", "METRIC_UNITS"]

log = logging.getLogger(__name__)

#: Metric column -> (readable name, unit) for tables.
METRIC_UNITS: dict[str, tuple[str, str]] = {
    "iterations": ("iterations", ""),
    "mean_iter_s": ("iteration time", "s"),
    "mean_compute_s": ("compute", "s"),
    "mean_exposed_comm_s": ("exposed communication", "s"),
    "mean_compress_s": ("compression overhead", "s"),
    "bytes_per_iter": ("bytes sent per iteration", "B"),
    "total_bytes": ("bytes sent", "B"),
    "total_time_s": ("run time", "s"),
    "mean_density": ("mean density", ""),
    "tta_target": ("target", ""),
    "tta_s": ("time to accuracy", "s"),
    "speedup_vs_dense": ("speed-up vs dense", "x"),
    "speedup_vs_best_fixed": ("speed-up vs best fixed", "x"),
    "iter_speedup_vs_dense": ("per-iteration speed-up vs dense", "x"),
    "iter_speedup_vs_best_fixed": ("per-iteration speed-up vs best fixed", "x"),
}


#: Columns that measure training progress, best first: a real run's accuracy, the convergence
#: model's predicted accuracy, then its cumulative progress (dense-iteration equivalents).
PROGRESS_COLUMNS: tuple[str, ...] = ("accuracy", "pred_accuracy", "progress")


def _accuracy_column(records: pd.DataFrame) -> str | None:
    for col in PROGRESS_COLUMNS:
        if col in records.columns and records[col].notna().any():
            return col
    return None


def time_to_accuracy_s(run: pd.DataFrame, column: str, target: float) -> float:
    """Seconds from the run's start until the end of the first iteration reaching ``target``.

    NaN when the run never reaches it.
    """
    acc = run[column].to_numpy(dtype=float)
    hit = np.flatnonzero(acc >= target)
    if hit.size == 0:
        return math.nan
    i = int(hit[0])
    start = run["start_s"].to_numpy(dtype=float)
    iters = run["iter_s"].to_numpy(dtype=float)
    return float(start[i] + iters[i] - start[0])


def run_metrics(results: Results) -> pd.DataFrame:
    """One row per run: its configuration columns, throughput metrics and speed-ups."""
    rec = results.records
    if rec.empty:
        return pd.DataFrame()
    g = rec.groupby("run_id", sort=False)
    m = pd.DataFrame(
        {
            "iterations": g["iteration"].count(),
            "mean_iter_s": g["iter_s"].mean(),
            "mean_compute_s": g["compute_s"].mean(),
            "mean_exposed_comm_s": g["exposed_comm_s"].mean(),
            "mean_compress_s": g["compress_s"].mean(),
            "bytes_per_iter": g["bytes_sent"].mean(),
            "total_bytes": g["bytes_sent"].sum(),
            "total_time_s": g["iter_s"].sum(),
            "mean_density": g["density"].mean(),
            "mean_latency_s": g["latency_s"].mean(),
            "mean_bandwidth_Bps": g["bandwidth_Bps"].mean(),
        }
    ).reset_index()
    # The configured ``iterations`` (and any other name clash) yields to the measured value: a
    # merge would otherwise rename both to ``iterations_x`` / ``iterations_y``.
    clash = [c for c in m.columns if c != "run_id" and c in results.runs.columns]
    runs = results.runs.drop(columns=clash)
    m = runs.merge(m, on="run_id", how="inner")
    scen = results.scenario_columns
    acc_col = _accuracy_column(rec)
    basis = "mean_iter_s"
    if acc_col is not None:
        runs_with_acc = rec.groupby("run_id")[acc_col].apply(lambda s: s.notna().any())
        if bool(runs_with_acc.all()):
            basis = "tta_s"
            m["tta_target"], m["tta_s"] = _tta_per_run(
                rec, m, scen, acc_col, results.hints.get("tta_target"))
    m["speedup_basis"] = f"time to target {acc_col}" if basis == "tta_s" else "iteration time"
    # The baselines run over the plain transport (a bounded-loss dense run is a choice of its
    # own, not the dense baseline).
    plain = m["loss_bound"].isna() if "loss_bound" in m.columns else True
    dense = (m.get("policy") == "dense") & plain
    fixed = (m.get("policy") == "fixed") & plain
    m["speedup_vs_dense"] = _relative(m, scen, basis, dense)
    m["speedup_vs_best_fixed"] = _relative(m, scen, basis, fixed)
    # Throughput alone, whatever the basis above: what a run gains per iteration.
    m["iter_speedup_vs_dense"] = _relative(m, scen, "mean_iter_s", dense)
    m["iter_speedup_vs_best_fixed"] = _relative(m, scen, "mean_iter_s", fixed)
    return m


def _groups(m: pd.DataFrame, scen: list[str]) -> list[np.ndarray]:
    if not scen:
        return [np.arange(len(m))]
    keys = m[scen].astype(str).agg("\x1f".join, axis=1)
    return [np.flatnonzero((keys == k).to_numpy()) for k in pd.unique(keys)]


def _tta_per_run(
    rec: pd.DataFrame, m: pd.DataFrame, scen: list[str], col: str, target: float | None
) -> tuple[pd.Series, pd.Series]:
    """(target used, seconds to reach it) per run."""
    by_run = dict(tuple(rec.groupby("run_id", sort=False)))
    out = pd.Series(np.nan, index=m.index, dtype=float)
    targets = pd.Series(np.nan, index=m.index, dtype=float)
    for idx in _groups(m, scen):
        ids = m["run_id"].iloc[idx]
        if target is None:
            tgt = min(float(by_run[r][col].max()) for r in ids)
        else:
            tgt = float(target)
        for i, r in zip(idx, ids, strict=True):
            out.iloc[i] = time_to_accuracy_s(by_run[r], col, tgt)
            targets.iloc[i] = tgt
    return targets, out


def _relative(m: pd.DataFrame, scen: list[str], basis: str, is_base: object) -> pd.Series:
    out = pd.Series(np.nan, index=m.index, dtype=float)
    if not isinstance(is_base, pd.Series) or not is_base.any():
        return out
    values = m[basis].to_numpy(dtype=float)
    base_mask = is_base.to_numpy(dtype=bool)
    for idx in _groups(m, scen):
        base = values[idx][base_mask[idx]]
        base = base[np.isfinite(base)]
        if base.size == 0:
            continue
        # dense: one run per scenario; fixed: the best (lowest time) of the fixed densities
        ref = float(base.min())
        with np.errstate(divide="ignore", invalid="ignore"):
            out.iloc[idx] = ref / values[idx]
    return out


def summary_table(metrics: pd.DataFrame, scenario: list[str]) -> pd.DataFrame:
    """Metrics averaged over seeds: one row per (scenario without seed, policy label)."""
    if metrics.empty:
        return metrics
    keys = [c for c in scenario if c != "seed"] + ["policy_label"]
    cols = [c for c in METRIC_UNITS if c in metrics.columns and c not in ("iterations",)]
    table = metrics.groupby(keys, dropna=False, sort=True)[cols].mean().reset_index()
    table.insert(len(keys), "runs", metrics.groupby(keys, dropna=False, sort=True).size().values)
    return table


def best_choice(
    metrics: pd.DataFrame,
    x: str,
    y: str,
    basis: str | None = None,
    choice: str = "policy_label",
) -> pd.DataFrame:
    """For every (x, y) cell, the ``choice`` value with the lowest mean time (over seeds, etc.).

    Returns columns ``x, y, <choice>, value`` with one row per cell.
    """
    if basis is None:
        basis = "tta_s" if "tta_s" in metrics.columns else "mean_iter_s"
    mean = metrics.groupby([x, y, choice], sort=True)[basis].mean().reset_index()
    mean = mean.dropna(subset=[basis])
    best = mean.loc[mean.groupby([x, y], sort=True)[basis].idxmin()]
    return best.rename(columns={basis: "value"}).reset_index(drop=True)
