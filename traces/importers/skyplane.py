"""Skyplane inter-cloud matrices (``latency.csv`` + ``throughput.csv``) -> one link per region.

The matrices are one-shot pairwise measurements (ping RTTs in ms; iperf3 throughput with 64
connections in bit/s), not time series. For a chosen group of regions ``G`` this importer gives
every region ``r`` in ``G`` one constant link that stands for *r's link to the rest of the group*:

* latency (one-way) = mean over the other regions ``s`` in ``G`` of ``RTT(r, s) / 2``, with
  ``RTT`` the ``avg_rtt`` column (``rtt="min"``: ``min_rtt``) averaged over the rows of both
  directions (a round trip is the same path either way);
* bandwidth = mean over ``s`` of ``throughput_received(r -> s) / 8`` bytes/s
  (``bandwidth="min"``: the minimum over ``s``, the pessimistic choice for a ring that crosses
  r's slowest path).

Throughput is directional: a pair whose ``r -> s`` direction was not measured uses ``s -> r``. Several rows for one pair
(different instance classes) are averaged. Rows are restricted to network tier ``tier`` at both
ends (``"PREMIUM"`` by default; ``"any"`` keeps every row). The links are ordered as the regions
are given, so worker ``i`` runs in region ``regions[i % len(regions)]``.
"""

from __future__ import annotations

import csv
import math
import os
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from compctl_base.errors import InputError

from ..input_limits import MAX_TEXT_BYTES, check_file_size
from ..model import PiecewiseTrace, TraceSet

__all__ = ["import_skyplane", "skyplane_pairs", "skyplane_regions"]

_LAT_COLS = ("src_region", "src_tier", "dst_region", "dst_tier", "min_rtt", "avg_rtt")
_TPUT_COLS = ("src_region", "src_tier", "dst_region", "dst_tier", "throughput_received")


def _files(path: str | os.PathLike[str]) -> tuple[Path, Path]:
    p = Path(path)
    if p.is_file():
        p = p.parent
    if not p.is_dir():
        raise InputError(f"{p}: no such directory (expected latency.csv and throughput.csv)")
    lat, tput = p / "latency.csv", p / "throughput.csv"
    for f in (lat, tput):
        if not f.is_file():
            raise InputError(
                f"{f}: missing (a skyplane directory holds latency.csv, throughput.csv)"
            )
        check_file_size(f, MAX_TEXT_BYTES, "skyplane CSV")
    return lat, tput


def _read(
    path: Path, cols: Sequence[str], value_cols: Sequence[str], tier: str
) -> dict[tuple[str, str], list[list[float]]]:
    """(src, dst) -> list of rows of the value columns, tier-filtered and validated."""
    out: dict[tuple[str, str], list[list[float]]] = defaultdict(list)
    with path.open(newline="") as fh:
        reader = csv.DictReader(fh)
        header = reader.fieldnames or []
        missing = [c for c in cols if c not in header]
        if missing:
            raise InputError(f"{path}:1: missing column(s) {', '.join(missing)}")
        n = 0
        for row in reader:
            n += 1
            lineno = reader.line_num
            if tier != "any" and (row["src_tier"] != tier or row["dst_tier"] != tier):
                continue
            vals = []
            for c in value_cols:
                try:
                    v = float(row[c])
                except (TypeError, ValueError):
                    raise InputError(f"{path}:{lineno}: {c} {row[c]!r} is not a number") from None
                if not math.isfinite(v) or v <= 0:
                    raise InputError(f"{path}:{lineno}: {c} must be > 0, got {row[c]!r}")
                vals.append(v)
            out[(row["src_region"], row["dst_region"])].append(vals)
        if n == 0:
            raise InputError(f"{path}: no rows")
    return out


def skyplane_regions(path: str | os.PathLike[str]) -> list[str]:
    """Regions present in both matrices of the skyplane directory ``path``."""
    lat_f, tput_f = _files(path)
    lat = _read(lat_f, _LAT_COLS, ("avg_rtt",), "any")
    tput = _read(tput_f, _TPUT_COLS, ("throughput_received",), "any")
    a = {r for pair in lat for r in pair}
    b = {r for pair in tput for r in pair}
    return sorted(a & b)


def _pair_mean(
    table: dict[tuple[str, str], list[list[float]]], r: str, s: str, col: int, *, both: bool
) -> float | None:
    """Mean of column ``col`` over the rows of pair (r, s).

    ``both``: pool the rows of both directions (RTTs are round trips, so either direction
    measures the same path); otherwise use r -> s, falling back to s -> r when unmeasured.
    """
    if both:
        rows = table.get((r, s), []) + table.get((s, r), [])
    else:
        rows = table.get((r, s)) or table.get((s, r)) or []
    if not rows:
        return None
    return sum(x[col] for x in rows) / len(rows)


def import_skyplane(
    path: str | os.PathLike[str],
    *,
    regions: Sequence[str],
    rtt: str = "avg",
    bandwidth: str = "mean",
    tier: str = "PREMIUM",
    name: str | None = None,
) -> TraceSet:
    """One constant link per region of ``regions`` (see the module docstring for the rule)."""
    if rtt not in ("avg", "min"):
        raise InputError(f"option rtt must be avg or min, got {rtt!r}")
    if bandwidth not in ("mean", "min"):
        raise InputError(f"option bandwidth must be mean or min, got {bandwidth!r}")
    if tier not in ("PREMIUM", "STANDARD", "any"):
        raise InputError(f"option tier must be PREMIUM, STANDARD or any, got {tier!r}")
    regions = list(dict.fromkeys(r.strip() for r in regions if r.strip()))
    if len(regions) < 2:
        raise InputError("skyplane import needs at least two distinct regions")
    lat_f, tput_f = _files(path)
    lat = _read(lat_f, _LAT_COLS, ("min_rtt", "avg_rtt"), tier)
    tput = _read(tput_f, _TPUT_COLS, ("throughput_received",), tier)
    known = {r for pair in lat for r in pair} & {r for pair in tput for r in pair}
    unknown = [r for r in regions if r not in known]
    if unknown:
        sample = ", ".join(sorted(known)[:6])
        raise InputError(
            f"unknown skyplane region {unknown[0]!r} (tier {tier}); {len(known)} known, "
            f"e.g. {sample}; see `compctl trace import skyplane --list-regions`"
        )
    col = 1 if rtt == "avg" else 0
    links: dict[str, PiecewiseTrace] = {}
    for r in regions:
        rtts_s, bws_Bps = [], []
        for s in regions:
            if s == r:
                continue
            rt = _pair_mean(lat, r, s, col, both=True)
            bw = _pair_mean(tput, r, s, 0, both=False)
            if rt is None or bw is None:
                what = "latency" if rt is None else "throughput"
                raise InputError(
                    f"skyplane: no {what} measurement between {r} and {s} (tier {tier})"
                )
            rtts_s.append(rt * 1e-3)
            bws_Bps.append(bw / 8.0)
        one_way_s = sum(rtts_s) / len(rtts_s) / 2.0
        bw_Bps = min(bws_Bps) if bandwidth == "min" else sum(bws_Bps) / len(bws_Bps)
        links[r] = PiecewiseTrace.constant(one_way_s, bw_Bps, name=r)
    return TraceSet(links, name=name or f"skyplane-{len(regions)}region")


def skyplane_pairs(
    path: str | os.PathLike[str], *, rtt: str = "avg", tier: str = "PREMIUM"
) -> dict[tuple[str, str], tuple[float, float]]:
    """Every directed pair ``(src, dst)`` measured in both matrices, as ``(one-way latency
    seconds, bandwidth bytes/s)`` of that path alone: ``RTT / 2`` over the rows of both
    directions, ``throughput_received(src -> dst) / 8`` (no fallback to the other direction).
    The per-pair view of the matrices that :func:`import_skyplane` averages per region."""
    if rtt not in ("avg", "min"):
        raise InputError(f"option rtt must be avg or min, got {rtt!r}")
    if tier not in ("PREMIUM", "STANDARD", "any"):
        raise InputError(f"option tier must be PREMIUM, STANDARD or any, got {tier!r}")
    lat_f, tput_f = _files(path)
    lat = _read(lat_f, _LAT_COLS, ("min_rtt", "avg_rtt"), tier)
    tput = _read(tput_f, _TPUT_COLS, ("throughput_received",), tier)
    col = 1 if rtt == "avg" else 0
    out: dict[tuple[str, str], tuple[float, float]] = {}
    for src, dst in sorted(tput):
        rt = _pair_mean(lat, src, dst, col, both=True)
        bw = _pair_mean(tput, src, dst, 0, both=False)
        if src != dst and rt is not None and bw is not None:
            out[(src, dst)] = (rt * 1e-3 / 2.0, bw / 8.0)
    return out
