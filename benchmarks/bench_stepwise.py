"""Speed of the stepwise fidelity against the analytic one, measured in the same run.

Usage: ``nice -n 10 python benchmarks/bench_stepwise.py [--iterations 1000] [--big-iterations 100]
[--events-iterations 100] [--json]``

ResNet-50, dense ring allreduce (4 buckets), per-link traces: a different random walk per link
(bandwidth around 10 Gbit/s, latency around 1 ms, a new state every 0.5 s, 300 s looped) for
64 links, link ``i`` of the cluster following walk ``i mod 64``; log-normal compute jitter
(sigma 0.1) so that the per-worker compute model is exercised. Rows:

* 1,024 workers x ``--iterations`` at both fidelities (issue target: stepwise under 60 s);
* 8,192 workers x ``--big-iterations`` at both fidelities (must complete; time recorded);
* workers 64 -> 8,192 at 100 iterations, stepwise: CPU seconds per (worker x step), to check
  that cost grows no faster than workers x steps (a step = one phase step of a collective);
* 1,024 workers with the ``nccl`` transport (chunked pipeline) and with the ``2racks-4to1``-style
  contention (the flat cluster's links are all used by a ring, so the ring is the contention
  case here);
* the ``events`` fidelity (SimPy processes per worker and per collective) against the vectorised
  stepwise level at 64, 256 and 1,024 workers x ``--events-iterations``, ``nccl`` transport:
  CPU time ratio, and the largest relative difference of their iteration times (float rounding).

CPU seconds of this process (``time.process_time``), one call each (the runs are long enough).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from typing import Any

from bench_sim import walk_link  # same directory: the simulator benchmarks' link

from sim.runner import SimConfig, run_simulation
from traces.model import TraceSet


def _traces(n_links: int = 64) -> TraceSet:
    return TraceSet({f"walk{i}": walk_link(i) for i in range(n_links)})


def _run(workers: int, iterations: int, fidelity: str, ts: TraceSet, **kw: Any) -> dict[str, Any]:
    cfg = SimConfig(
        workload="resnet50",
        workers=workers,
        trace="walk-64",
        collective="ring",
        density=1.0,
        iterations=iterations,
        fidelity=fidelity,
        straggler_sigma=0.1,
        convergence="off",
        **kw,
    )
    t0 = time.process_time()
    records, _ = run_simulation(cfg, traces=ts)
    cpu = time.process_time() - t0
    return {
        "workers": workers,
        "iterations": iterations,
        "fidelity": fidelity,
        "transport": kw.get("transport", "-"),
        "cpu_s": cpu,
        "it_per_s": iterations / cpu,
        "mean_iter_s": float(records["iter_s"].mean()),
        "iter_s": records["iter_s"].to_numpy(),
    }


def _events_vs_stepwise(ts: TraceSet, iterations: int) -> list[dict[str, Any]]:
    """CPU time of the events fidelity over the vectorised stepwise one, same configuration."""
    out = []
    for n in (64, 256, 1024):
        s = _run(n, iterations, "stepwise", ts, transport="nccl")
        e = _run(n, iterations, "events", ts, transport="nccl")
        rel = abs(e["iter_s"] - s["iter_s"]) / s["iter_s"]
        out.append(
            {
                "workers": n,
                "iterations": iterations,
                "stepwise_cpu_s": s["cpu_s"],
                "events_cpu_s": e["cpu_s"],
                "ratio": e["cpu_s"] / s["cpu_s"],
                "events_ms_per_iteration": e["cpu_s"] / iterations * 1e3,
                "max_rel_diff_iter_s": float(rel.max()),
            }
        )
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print a table (or JSON)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iterations", type=int, default=1000)
    p.add_argument("--big-iterations", type=int, default=100)
    p.add_argument("--events-iterations", type=int, default=100)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    logging.disable(logging.WARNING)
    ts = _traces()
    rows = []
    for fid in ("analytic", "stepwise"):
        rows.append(_run(1024, args.iterations, fid, ts))
    rows.append(_run(1024, args.iterations // 4, "stepwise", ts, transport="nccl"))
    for fid in ("analytic", "stepwise"):
        rows.append(_run(8192, args.big_iterations, fid, ts))
    scaling = [_run(n, 100, "stepwise", ts) for n in (64, 256, 1024, 4096, 8192)]
    base = scaling[0]["cpu_s"] / (scaling[0]["workers"] * 100)
    for r in scaling:
        r["cost_per_worker_step_vs_64"] = r["cpu_s"] / (r["workers"] * 100) / base
    events = _events_vs_stepwise(ts, args.events_iterations)
    for r in rows + scaling:
        del r["iter_s"]
    if args.json:
        doc = {"rows": rows, "scaling": scaling, "events_vs_stepwise": events}
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return 0
    out = ["| workers | iterations | fidelity | transport | CPU s | it/s | mean iter s |"]
    out.append("|---|---|---|---|---|---|---|")
    for r in rows:
        out.append(
            f"| {r['workers']} | {r['iterations']} | {r['fidelity']} | {r['transport']} | "
            f"{r['cpu_s']:.2f} | {r['it_per_s']:.0f} | {r['mean_iter_s']:.4g} |"
        )
    a1, s1 = rows[0], rows[1]
    a8, s8 = rows[3], rows[4]
    out.append("")
    out.append(
        f"stepwise / analytic CPU time: {s1['cpu_s'] / a1['cpu_s']:.1f}x at 1,024 workers, "
        f"{s8['cpu_s'] / a8['cpu_s']:.1f}x at 8,192 workers; mean iteration time "
        f"stepwise / analytic {s1['mean_iter_s'] / a1['mean_iter_s']:.4f} at 1,024"
    )
    out.append("")
    out.append("| workers (100 it, stepwise) | CPU s | CPU per worker x iteration vs 64 |")
    out.append("|---|---|---|")
    for r in scaling:
        out.append(f"| {r['workers']} | {r['cpu_s']:.2f} | {r['cost_per_worker_step_vs_64']:.2f} |")
    out.append("")
    out.append(
        "| workers (nccl) | iterations | stepwise CPU s | events CPU s | events / stepwise | "
        "events ms / iteration | max rel. diff of iter_s |"
    )
    out.append("|---|---|---|---|---|---|---|")
    for r in events:
        out.append(
            f"| {r['workers']} | {r['iterations']} | {r['stepwise_cpu_s']:.3f} | "
            f"{r['events_cpu_s']:.2f} | {r['ratio']:.0f}x | {r['events_ms_per_iteration']:.1f} | "
            f"{r['max_rel_diff_iter_s']:.1e} |"
        )
    sys.stdout.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
