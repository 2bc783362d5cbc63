"""Speed of the stepwise network's step-cost memo at its bound against the old bound (65,536
entries), measured in the same run, on the case that overflowed it: the oracle's plan over a
64-worker ResNet-50 run on ``delay-highvar`` (every link's delay changes often, so a plan prices
hundreds of thousands of (phase, joint link state) pairs again and again).

Each side runs the same simulation (the oracle told the time-to-target table's target, a small
density grid, a few iterations: the plan made at the first decision is most of the cost); the
sides alternate ``--repeat`` times, and every run's records must be identical to the bit (the
memo changes speed, not results; a mismatch exits 1). Reported: wall seconds per side, their
ratio, and the memo's size at the end.

Usage::

    python benchmarks/bench_stepwise_cache.py [--workers 64] [--densities 0.1,0.01]
        [--iterations 20] [--repeat 1] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any
from unittest import mock

from tta_table import target_progress

import sim.stepwise_net as stepwise_net
from sim.runner import SimConfig, run_simulation

OLD_ENTRIES = 65536


def _run(cfg: SimConfig, entries: int) -> tuple[float, str, int]:
    nets: list[stepwise_net.StepwiseNetwork] = []
    init = stepwise_net.StepwiseNetwork.__init__

    def seen(self: stepwise_net.StepwiseNetwork, *a: Any, **k: Any) -> None:
        init(self, *a, **k)
        nets.append(self)

    with mock.patch.object(stepwise_net, "COST_CACHE_ENTRIES", entries), \
            mock.patch.object(stepwise_net.StepwiseNetwork, "__init__", seen):
        t0 = time.perf_counter()
        rec, _ = run_simulation(cfg)
        wall = time.perf_counter() - t0
    size = max((len(n._cost_cache) for n in nets), default=0)
    return wall, rec.to_csv(float_format="%.17g"), size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=64)
    parser.add_argument("--trace", default="delay-highvar")
    parser.add_argument("--densities", default="0.1,0.01", help="the oracle's density grid")
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    cfg = SimConfig(workload="resnet50", workers=args.workers, trace=args.trace,
                    policy="oracle", iterations=args.iterations, fidelity="stepwise",
                    monitor="on", policy_params={"target_progress": target_progress("resnet50"),
                                                 "densities": args.densities})
    new_s: list[float] = []
    old_s: list[float] = []
    records: set[str] = set()
    sizes: dict[str, int] = {}
    for _ in range(args.repeat):
        for label, entries, out in (("old", OLD_ENTRIES, old_s),
                                    ("new", stepwise_net.COST_CACHE_ENTRIES, new_s)):
            wall, rec, size = _run(cfg, entries)
            out.append(wall)
            records.add(rec)
            sizes[label] = size
            sys.stderr.write(f"{label} bound {entries}: {wall:.1f} s, memo {size} entries\n")
    row = {"trace": args.trace, "workers": args.workers, "densities": args.densities,
           "iterations": args.iterations, "old_bound": OLD_ENTRIES,
           "new_bound": stepwise_net.COST_CACHE_ENTRIES, "old_s": old_s, "new_s": new_s,
           "speedup": statistics.median(old_s) / statistics.median(new_s),
           "memo_entries_old": sizes["old"], "memo_entries_new": sizes["new"],
           "identical_records": len(records) == 1}
    if args.json:
        sys.stdout.write(json.dumps(row) + "\n")
    else:
        sys.stdout.write(
            f"{args.trace}, {args.workers} workers, densities {args.densities}: old bound "
            f"{statistics.median(old_s):.1f} s, new {statistics.median(new_s):.1f} s, "
            f"{row['speedup']:.2f}x; memo {sizes['new']} entries; identical records: "
            f"{row['identical_records']}\n")
    return 0 if row["identical_records"] else 1


if __name__ == "__main__":
    sys.exit(main())
