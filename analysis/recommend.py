"""The report's answer first: which policy to use on which network, and what was assumed.

:func:`recommendations` groups the runs by network class (every scenario column but the seed:
the trace, the scale, ...), averages each choice over seeds and names the one that reached the
target first (or, without an accuracy curve, the one with the shortest iteration), by how much
it beat the runner-up and whether the seeds' spread could undo that. :func:`assumptions` lists
what the numbers rest on that was not measured in these runs (read from each run's meta).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from .load import Results

__all__ = ["recommendations", "assumptions"]


def _choice_details(results: Results) -> pd.DataFrame:
    """Per run: the compressor and collective it used most (what the policy actually chose)."""
    rec = results.records
    cols = [c for c in ("compressor", "collective") if c in rec.columns]
    if rec.empty or not cols:
        return pd.DataFrame({"run_id": []})
    modal = rec.groupby("run_id", sort=False)[cols].agg(
        lambda s: s.astype(str).value_counts().index[0] if len(s) else ""
    )
    return modal.reset_index()


def _network_label(row: pd.Series, keys: list[str]) -> str:
    if not keys:
        return "all runs"
    return ", ".join(f"{k}={row[k]}" for k in keys) if len(keys) > 1 else str(row[keys[0]])


def _scheme(metrics: pd.DataFrame) -> pd.Series | None:
    """Each run's transport family when both appear: ``plain transport`` (compression control
    over a lossless or TCP-like transport) or ``bounded-loss transport``; else ``None``."""
    if "loss_bound" not in metrics.columns:
        return None
    bounded = metrics["loss_bound"].notna()
    if bounded.all() or not bounded.any():
        return None
    return bounded.map({True: "bounded-loss transport", False: "plain transport"})


def recommendations(results: Results, metrics: pd.DataFrame) -> pd.DataFrame:
    """One row per network class: the best choice, its time, the margin and the seeds' spread.

    When the runs hold both transports (some with a loss bound, some without), every network
    class gets one row per transport family (``scheme``), each with its own best choice, and
    ``best on this network`` marks the faster of the two.
    """
    if metrics.empty:
        return pd.DataFrame()
    basis = "tta_s" if "tta_s" in metrics.columns else "mean_iter_s"
    what = "time to target" if basis == "tta_s" else "mean iteration time"
    keys = [c for c in results.scenario_columns if c != "seed" and c in metrics.columns]
    m = metrics.merge(_choice_details(results), on="run_id", how="left", suffixes=("", "_used"))
    scheme = _scheme(m)
    if scheme is not None:
        m = m.assign(scheme=scheme.to_numpy())
    group_keys = keys + (["scheme"] if scheme is not None else [])
    rows: list[dict[str, Any]] = []
    groups = m.groupby(group_keys, sort=True, dropna=False) if group_keys else [((), m)]
    for _, part in groups:
        stats = []
        for label, runs in part.groupby("policy_label", sort=True):
            vals = runs[basis].to_numpy(dtype=float)
            ok = vals[np.isfinite(vals)]
            if ok.size == 0:
                continue
            # A choice that missed the target in some seeds is ranked on the seeds that hit it,
            # and says so.
            stats.append((float(ok.mean()), str(label), ok, len(vals), runs))
        if not stats:
            continue
        stats.sort(key=lambda t: t[0])
        best_mean, label, vals, n, runs = stats[0]
        first = runs.iloc[0]
        used_parts = []
        for base in ("compressor", "collective"):
            col = f"{base}_used" if f"{base}_used" in runs.columns else base
            if col in runs.columns and isinstance(first[col], str):
                used_parts.append(first[col])
        used = " / ".join(used_parts)
        row: dict[str, Any] = {
            "network": _network_label(part.iloc[0], keys),
            **({"scheme": part["scheme"].iloc[0]} if scheme is not None else {}),
            "recommended": label,
            "compressor / collective": used,
            what + " (s, mean)": best_mean,
            "seeds": f"{vals.size}/{n} reached" if vals.size < n else str(n),
            "seed spread (s)": float(vals.max() - vals.min()) if vals.size > 1 else math.nan,
        }
        if len(stats) > 1:
            second_mean, second, svals, _, _ = stats[1]
            row["runner-up"] = second
            row["margin"] = f"{(second_mean / best_mean - 1) * 100:.1f}% faster"
            overlap = vals.size > 1 and svals.size > 1 and vals.max() >= svals.min()
            row["how sure"] = (
                "within seed noise (seed ranges overlap)" if overlap
                else "single seed" if vals.size < 2
                else "clear (seed ranges do not overlap)"
            )
        else:
            row["runner-up"], row["margin"], row["how sure"] = "", "only choice", ""
        rows.append(row)
    out = pd.DataFrame(rows)
    if scheme is not None and not out.empty:
        col = what + " (s, mean)"
        fastest = out.groupby("network", sort=False)[col].transform("min")
        out["best on this network"] = (out[col] == fastest).map({True: "yes", False: ""})
    return out


#: What each compression cost source (``meta["compress_cost_source"]``, first word) rests on.
_COST_NOTES = {
    "cpu-measured": ": measured on the CPU that ran `compctl bench compressors --calibrate`.",
    "h100-reference": (
        ": published H100 times of top-k and SIDCo, memory-pass estimates at 3 TB/s for the "
        "other compressors (sim/compress/cost_source.py); not measured on the profile's GPU."
    ),
}


def assumptions(results: Results) -> list[str]:
    """Every assumption the loaded runs rest on that they did not measure, one sentence each."""
    out: dict[str, None] = {}

    def table(meta: dict[str, Any], key: str) -> dict[str, Any]:
        value = meta.get(key)
        return value if isinstance(value, dict) else {}

    for meta in results.metas.values():
        cfg = table(meta, "config")
        conv = meta.get("convergence")
        if isinstance(conv, dict):
            if conv.get("borrowed"):
                wl = table(meta, "workload").get("name", "?")
                out[
                    f"Gradient statistics of {wl} are borrowed from the captured "
                    f"{conv.get('gradient_trace', '?')} trace (no capture of {wl}): its "
                    "time-to-accuracy is that model's convergence replayed at this model's speed."
                ] = None
            if conv.get("skipped"):
                out[f"No convergence model for some runs: {conv['skipped']}"] = None
        scale = cfg.get("compress_scale")
        if isinstance(scale, (int, float)) and scale != 1:
            out[
                f"Compression times are scaled by compress_scale = {scale:g}: a what-if set in "
                "the spec on top of the profile device's costs, not a measurement."
            ] = None
        if meta.get("source", "sim") == "sim":
            ref = table(meta, "workload").get("reference")
            if isinstance(ref, str) and ref:
                out[
                    "Compute times are modelled, not measured: "
                    + ref.split(";")[0].removeprefix("device: ")
                    + "."
                ] = None
            source = meta.get("compress_cost_source")
            if isinstance(source, str) and source:
                note = _COST_NOTES.get(source.split(" ")[0], ".")
                out[f"Compression costs: {source}{note}"] = None
            else:
                out[
                    "Compression costs: source not recorded (a run from before costs followed "
                    "the profile's device, so CPU-calibrated)."
                ] = None
            out[
                f"The network is simulated ({meta.get('fidelity', 'analytic')} fidelity) from "
                "replayed traces; no packet was sent."
            ] = None
        loss = table(meta, "loss")
        if loss:
            out[
                "Packet loss is modelled, not measured: independent per-packet losses "
                f"({loss.get('mtu_bytes', 1500)}-byte packets); the plain transport repairs a "
                "loss with one round trip, or a retransmission timeout of "
                f"{1e3 * float(loss.get('rto_s', 0.005)):g} ms for a tail loss; the bounded-loss "
                "transport's lost entries cost convergence as the gradient trace's random-k "
                "(link loss) and top-k (deadline drops) gains say (sim/convergence/loss.py)."
            ] = None
        emulation = meta.get("emulation")
        if emulation:
            mode = emulation.get("mode") if isinstance(emulation, dict) else emulation
            out[
                f"Real run with an emulated network ({mode}): delay and bandwidth follow the "
                "trace through the emulator, not a real wide-area link."
            ] = None
    return list(out)
