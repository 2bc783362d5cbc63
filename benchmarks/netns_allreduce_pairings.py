"""Every pairing of saved netns allreduce runs: calibration of one, held-out part of another.

Usage: ``python benchmarks/netns_allreduce_pairings.py PREFIX1 PREFIX2 ... [--json]`` where
each ``PREFIX`` names one run's files as ``bench_netns_allreduce.py --measure-only`` saved them:
``PREFIX-calibration.csv``, ``PREFIX-held-out.csv`` and, where present, ``PREFIX-stats.json``
(``--save-stats``: every call, each point's median interval).

For every ordered pair of runs (own pairings, a run's calibration with its own held-out part,
and cross-run ones), the transport is fitted per rank count on the first run's calibration
(``bench_netns_allreduce.evaluate``: fixed wire bytes per message fitted, calls priced as the
benchmark runs them, each held-out point with its own measured idle gap) and predicts the
second run's held-out points. Printed per rank count: the points within 10% (all sizes, 1-8
KiB, 128 KiB and up) summed over the pairings, and per held-out point its error in every
pairing with, where the stats are present, its median's 95% interval relative to its time.

``--host-probe``: each run's stats must hold its host-speed probe (part ``probe``, 1 KiB calls
tbf does not shape, measured first in every round: ``bench_netns_allreduce.py``, default since
2026-11-26 21:00 UTC); a pairing then scales the calibration's fitted per-call software terms by
the held-out run's probe time over the calibration run's, per rank count (1 in own pairings).
The probe is a separate measurement of the machine's speed at run time, none of the held-out
points.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from bench_netns_allreduce import evaluate

from realrun.allreduce_interleave import PointStats, read_stats
from sim.errors import InputError
from sim.transport_fit import read_csv

SMALL_MAX_BYTES = 8 * 1024
LARGE_MIN_BYTES = 128 * 1024


def probe_times(stats: list[PointStats] | None, name: str) -> dict[int, float]:
    """Per rank count, the run's host-speed probe time (the median of its probe points'
    times); InputError where the run has none."""
    per: dict[int, list[float]] = {}
    for s in stats or []:
        if s.part == "probe":
            per.setdefault(s.measurement.ranks, []).append(s.measurement.time_s)
    if not per:
        raise InputError(f"run {name}: no host-speed probe in its stats (measured with "
                         "--probe-mbit 0 or before 2026-11-26 21:00 UTC)")
    return {n: float(statistics.median(ts)) for n, ts in per.items()}


def pairings(prefixes: list[str], host_probe: bool = False) -> list[dict[str, object]]:
    """One entry per (calibration run, held-out run): the evaluated rows per rank count; with
    ``host_probe`` the calibration's software terms scaled by the runs' probe ratio."""
    runs = []
    for p in prefixes:
        stats_path = Path(f"{p}-stats.json")
        stats = read_stats(str(stats_path)) if stats_path.is_file() else None
        probe = probe_times(stats, Path(p).name) if host_probe else {}
        runs.append((Path(p).name, read_csv(f"{p}-calibration.csv"),
                     read_csv(f"{p}-held-out.csv"), stats, probe))
    out: list[dict[str, object]] = []
    for cal_name, cal, _, _, cal_probe in runs:
        for held_name, _, held, stats, held_probe in runs:
            scale = {n: held_probe[n] / t for n, t in cal_probe.items() if n in held_probe}
            out.append({"cal": cal_name, "held": held_name, "host_scale": scale,
                        "result": evaluate(cal, held, message_bytes=True, stats=stats,
                                           host_scale=scale)})
    return out


def _counts(rows: list[dict[str, object]], keep: object) -> tuple[int, int]:
    errs = [abs(float(r["rel_error"])) for r in rows if keep(float(r["bytes"]))]  # type: ignore[arg-type, operator]
    return sum(e <= 0.1 for e in errs), len(errs)


def report(res: list[dict[str, object]]) -> list[str]:
    """Summary lines: counts per rank count and pairing kind, then every point's errors."""
    lines = []
    classes = (("all sizes", lambda b: True), ("1-8 KiB", lambda b: b <= SMALL_MAX_BYTES),
               (">= 128 KiB", lambda b: b >= LARGE_MIN_BYTES))
    ranks = sorted({int(r["ranks"]) for p in res for r in p["result"]})  # type: ignore[attr-defined]
    for n in ranks:
        for kind, keep_pair in (("own", lambda p: p["cal"] == p["held"]),
                                ("all", lambda p: True)):
            per = [[r for r in p["result"] if r["ranks"] == n][0]["held"]  # type: ignore[attr-defined]
                   for p in res if keep_pair(p)]
            parts = []
            for name, keep in classes:
                got = [_counts(rows, keep) for rows in per]
                parts.append(f"{name} {sum(g for g, _ in got)}/{sum(t for _, t in got)} "
                             f"({min(g for g, _ in got)}-{max(g for g, _ in got)} of "
                             f"{got[0][1]})")
            mape = [statistics.fmean(abs(float(x["rel_error"])) for x in rows) for rows in per]
            lines.append(f"{n} ranks, {kind} pairings ({len(per)}): within 10%: "
                         + "; ".join(parts) + f"; MAPE {min(mape):.1%}-{max(mape):.1%}")
        points: dict[tuple[float, float], list[str]] = {}
        for p in res:
            for r in p["result"]:  # type: ignore[attr-defined]
                if r["ranks"] != n:
                    continue
                for x in r["held"]:
                    ci = x["ci_rel"]
                    text = f"{float(x['rel_error']):+.1%}"
                    if p["cal"] == p["held"] and ci is not None:
                        text += f" [{ci[0]:+.1%}..{ci[1]:+.1%}]"
                    points.setdefault((float(x["mbit"]), float(x["bytes"])), []).append(text)
        for (mbit, size), errs in sorted(points.items()):
            within = sum(abs(float(e.split()[0].rstrip("%"))) <= 10.0 for e in errs)
            lines.append(f"  {n} ranks {mbit:4.0f} Mbit/s {size:>9.0f} B: {within}/{len(errs)}"
                         f" within 10%: " + ", ".join(errs))
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("prefix", nargs="+", help="PREFIX of PREFIX-calibration.csv etc.")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--host-probe", action="store_true",
                    help="scale the calibration's software terms by the runs' host-speed "
                    "probe ratio (module docstring)")
    a = ap.parse_args()
    try:
        res = pairings(a.prefix, host_probe=a.host_probe)
    except InputError as e:
        sys.stderr.write(f"error: {e}\n")
        return 2
    if a.json:
        sys.stdout.write(json.dumps(res, indent=1) + "\n")
    else:
        sys.stdout.write("\n".join(report(res)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
