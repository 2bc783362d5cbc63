"""Costs of the trace layer: lookups the simulator makes per event, generators, importers.

Usage: ``python benchmarks/bench_traces.py [--repeats 3] [--json]``

Three groups, each with its own baseline measured in the same run (ratios are "times slower
than the baseline"; each cell is the best of ``--repeats``):

1. ``transfer_end_s`` calls per second (200,000 calls at pseudo-random start times and sizes)
   on bundled traces of growing size; baseline: a constant link (the closed form).
2. Generating 1,000,000 samples: sine (vectorised numpy), baseline; random walk (a sequential
   loop because each clipped step depends on the previous one); Markov congestion and delay
   spikes over the same horizon.
3. Importing: a 1,000,000-line mahimahi file and a 100,000-line pensieve file, written to a
   temporary directory first; baseline: reading the same pensieve trace back from canonical
   CSV.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from traces import generators as gen
from traces.bundled import resolve_trace
from traces.csvio import write_trace_csv
from traces.importers import import_mahimahi, import_pensieve
from traces.model import PiecewiseTrace


def _best(fn: Callable[[], Any], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def bench_transfer(repeats: int) -> list[dict[str, Any]]:
    """transfer_end_s rate per trace; the first row is the constant-link baseline."""
    n = 200_000
    rng = np.random.default_rng(0)
    starts = rng.uniform(0.0, 3000.0, n).tolist()
    sizes = rng.uniform(1e5, 1e8, n).tolist()
    cases: list[tuple[str, PiecewiseTrace]] = [
        ("const (baseline)", PiecewiseTrace.constant(1e-3, 1.25e9)),
        ("seed003-steps", resolve_trace("seed003-steps").links["*"]),
        ("norway-bus-1-x1000 (loops)", resolve_trace("norway-bus-1-x1000").links["*"]),
        ("delay-highvar", resolve_trace("delay-highvar").links["*"]),
    ]
    rows: list[dict[str, Any]] = []
    for name, tr in cases:

        def run(tr: PiecewiseTrace = tr) -> None:
            f = tr.transfer_end_s
            for s, b in zip(starts, sizes, strict=True):
                f(s, b)

        sec = _best(run, repeats)
        rows.append({"case": name, "segments": tr.n_segments, "seconds": sec, "per_s": n / sec})
    base = rows[0]["seconds"]
    for r in rows:
        r["ratio"] = r["seconds"] / base
    return rows


def bench_generators(repeats: int) -> list[dict[str, Any]]:
    """Generation time of 1,000,000 samples (0.01 s steps over 10,000 s)."""
    common: dict[str, Any] = {"latency_s": 1e-3, "bandwidth_Bps": 1.25e9, "duration_s": 10_000.0}
    cases: list[tuple[str, Callable[[], PiecewiseTrace]]] = [
        ("sine, 1e6 samples (baseline)", lambda: gen.sine(dt_s=0.01, **common)),
        ("random walk, 1e6 samples", lambda: gen.random_walk(seed=1, dt_s=0.01, **common)),
        (
            "markov, mean sojourn 0.01 s",
            lambda: gen.markov_congestion(seed=1, good_mean_s=0.01, bad_mean_s=0.01, **common),
        ),
        (
            "spikes, 100 per s",
            lambda: gen.delay_spikes(
                seed=1, spike_rate_per_s=100.0, spike_duration_s=0.001, **common
            ),
        ),
    ]
    rows: list[dict[str, Any]] = []
    for name, fn in cases:
        sec = _best(fn, repeats)
        rows.append({"case": name, "segments": fn().n_segments, "seconds": sec})
    base = rows[0]["seconds"]
    for r in rows:
        r["ratio"] = r["seconds"] / base
    return rows


def bench_importers(repeats: int) -> list[dict[str, Any]]:
    """Import times on generated files of realistic format."""
    rng = np.random.default_rng(0)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as d:
        mm = Path(d) / "big.mahimahi"
        ms = np.sort(rng.integers(0, 600_000, 1_000_000))
        mm.write_text("\n".join(map(str, ms.tolist())) + "\n")
        pv = Path(d) / "big.tsv"
        t = np.cumsum(rng.uniform(0.5, 1.5, 100_000))
        t -= t[0]
        v = rng.uniform(0.5, 20.0, 100_000)
        pv.write_text(
            "".join(f"{a!r}\t{b!r}\n" for a, b in zip(t.tolist(), v.tolist(), strict=True))
        )
        csv_path = Path(d) / "big.csv"
        write_trace_csv(import_pensieve(pv), csv_path)
        from traces.csvio import read_trace

        cases: list[tuple[str, Callable[[], Any]]] = [
            ("canonical CSV, 1e5 rows (baseline)", lambda: read_trace(csv_path)),
            ("pensieve, 1e5 lines", lambda: import_pensieve(pv)),
            ("mahimahi, 1e6 lines", lambda: import_mahimahi(mm)),
        ]
        for name, fn in cases:
            rows.append({"case": name, "seconds": _best(fn, repeats)})
    base = rows[0]["seconds"]
    for r in rows:
        r["ratio"] = r["seconds"] / base
    return rows


def main(argv: list[str] | None = None) -> int:
    """Run every group and print a table (or JSON)."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    result = {
        "transfer_end_s": bench_transfer(args.repeats),
        "generators": bench_generators(args.repeats),
        "importers": bench_importers(args.repeats),
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    for group, rows in result.items():
        print(f"\n{group}")
        for r in rows:
            extra = f"  {r['per_s']:,.0f} calls/s" if "per_s" in r else ""
            seg = f"  {r['segments']:>8} segments" if "segments" in r else ""
            print(f"  {r['case']:<36} {r['seconds'] * 1e3:9.1f} ms  x{r['ratio']:.2f}{seg}{extra}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
