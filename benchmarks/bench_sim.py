"""Simulated iterations per second at the analytic level, shared trace vs per-link traces.

Usage: ``python benchmarks/bench_sim.py [--iterations 20000] [--repeats 3] [--json]``

For 8, 64, 1,024 and 8,192 workers, ResNet-50 with a fixed decision (random-k 1 % over a ring
allreduce, monitor off as for every static policy) runs over time-varying random-walk traces
(bandwidth around 10 Gbit/s, latency around 1 ms, a new state every 0.5 s, 300 s looped):

* shared: one trace for every link;
* per-link: a different random walk per worker (all on the same 0.5 s sampling grid);
* per-link-async: a different two-state Markov congestion trace per worker (good 5 s / bad 2 s
  mean sojourns, bad = 1/5 bandwidth and 5x latency), so every link changes state at its own
  random times and the bottleneck has the union of all their breakpoints.

Iterations per CPU second of this process (``time.process_time``, robust to other jobs on a
shared machine) and per wall second; each is the best of ``--repeats`` timed calls of :func:`sim.runner.run_simulation` (setup,
bottleneck, simulation and building the records DataFrame all included). Ratios are against the
baseline measured in the same run: 8 workers, shared trace. ``setup s`` is one 1-iteration run
(profile, traces, bottleneck, policy, records), where per-link costs show. A last row times 1,024
workers with the link monitor on (what an adaptive policy pays for its estimates); the footer
compares the tree-reduced bottleneck with one ``traces.model.bottleneck`` call over all links.

Target (issue "Foundation"): >= 20,000 iterations/s at 1,024 workers sharing one trace, on one
core; per-link cost growing at most linearly in the number of workers.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from typing import Any

from sim.cluster import paced_trace
from sim.runner import SimConfig, run_simulation
from traces.generators import markov_congestion, random_walk
from traces.model import TraceSet

WORKERS = (8, 64, 1024, 8192)


def walk_link(seed: int) -> Any:
    """The benchmarks' time-varying link: a looping random walk around 1 ms and 10 Gbit/s."""
    return random_walk(
        seed=seed,
        latency_s=1e-3,
        bandwidth_Bps=1.25e9,
        bandwidth_sigma=0.2,
        latency_sigma_s=2e-4,
        dt_s=0.5,
        duration_s=300.0,
        loop=True,
        name=f"walk{seed}",
    )


def _markov(seed: int) -> Any:
    return markov_congestion(
        seed=seed,
        latency_s=1e-3,
        bandwidth_Bps=1.25e9,
        good_mean_s=5.0,
        bad_mean_s=2.0,
        duration_s=300.0,
        loop=True,
        name=f"markov{seed}",
    )


def _traces(mode: str, n: int, shared: TraceSet) -> TraceSet:
    if mode == "shared":
        return shared
    make = walk_link if mode == "per-link" else _markov
    return TraceSet({f"w{i}": make(i + 1) for i in range(n)}, name=mode)


def _time_run(cfg: SimConfig, traces: TraceSet, repeats: int) -> tuple[float, float]:
    """Best (CPU seconds, wall seconds) over ``repeats`` calls."""
    best_cpu = best_wall = float("inf")
    for _ in range(repeats):
        c0, w0 = time.process_time(), time.perf_counter()
        run_simulation(cfg, traces=traces)
        best_cpu = min(best_cpu, time.process_time() - c0)
        best_wall = min(best_wall, time.perf_counter() - w0)
    return best_cpu, best_wall


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print a table (or JSON)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--iterations", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)

    shared = TraceSet.single(walk_link(0))
    rows: list[dict[str, Any]] = []
    for mode in ("shared", "per-link", "per-link-async"):
        for n in WORKERS:
            traces = _traces(mode, n, shared)
            cfg = SimConfig(
                workload="resnet50",
                workers=n,
                trace=f"walk-{mode}",
                collective="ring",
                density=0.01,
                iterations=args.iterations,
                seed=1,
            )
            t0 = time.perf_counter()
            run_simulation(SimConfig(**{**cfg.to_dict(), "iterations": 1}), traces=traces)
            setup_s = time.perf_counter() - t0
            cpu, wall = _time_run(cfg, traces, args.repeats)
            rows.append(
                {
                    "mode": mode,
                    "workers": n,
                    "cpu_s": cpu,
                    "wall_s": wall,
                    "setup_s": setup_s,
                    "it_per_s": args.iterations / cpu,
                    "it_per_wall_s": args.iterations / wall,
                }
            )
    mon = SimConfig(
        workload="resnet50",
        workers=1024,
        trace="walk-shared",
        collective="ring",
        density=0.01,
        iterations=max(1, args.iterations // 10),
        seed=1,
        monitor="on",
    )
    cpu, wall = _time_run(mon, shared, args.repeats)
    rows.append(
        {
            "mode": "shared+monitor",
            "workers": 1024,
            "cpu_s": cpu,
            "wall_s": wall,
            "setup_s": float("nan"),
            "it_per_s": mon.iterations / cpu,
            "it_per_wall_s": mon.iterations / wall,
        }
    )
    async_1k = _traces("per-link-async", 1024, shared)
    t0 = time.perf_counter()
    paced_trace(async_1k, 1024, horizon_s=1.0)
    tree_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    async_1k.bottleneck(1024, horizon_s=1.0)
    one_shot_s = time.perf_counter() - t0
    base = rows[0]["it_per_s"]
    for r in rows:
        r["ratio_vs_baseline"] = r["it_per_s"] / base
    footer = {
        "bottleneck_1024_async_tree_s": tree_s,
        "bottleneck_1024_async_one_shot_s": one_shot_s,
    }
    if args.json:
        sys.stdout.write(json.dumps({"rows": rows, **footer}, indent=1) + "\n")
        return 0
    sys.stdout.write(
        f"{'mode':<15}{'workers':>8}{'iter/CPU-s':>12}{'iter/wall-s':>12}{'ratio':>8}"
        f"{'setup s':>10}\n"
    )
    for r in rows:
        sys.stdout.write(
            f"{r['mode']:<15}{r['workers']:>8}{r['it_per_s']:>12.0f}{r['it_per_wall_s']:>12.0f}"
            f"{r['ratio_vs_baseline']:>8.2f}{r['setup_s']:>10.4f}\n"
        )
    sys.stdout.write(
        f"bottleneck of 1024 async links: tree {tree_s:.3f} s, one call {one_shot_s:.3f} s "
        f"(ratio {one_shot_s / tree_s:.1f})\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
