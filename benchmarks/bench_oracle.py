"""Speed of the oracle's plan at stepwise and events fidelity, with and without its reuse of one
price per joint link state, measured in the same run.

The oracle replays candidate density schedules through true iteration times; where the context
reports the constant joint state of the links (:meth:`sim.engine.OracleContext.segment_s`) it
prices an iteration inside one state once per density (:mod:`sim.control.policies.oracle_plan`).
Each case runs the same simulation twice: as is, and with ``segment_s`` answering ``None`` (every
candidate iteration simulated, the behaviour before the stepwise and events levels reported
their states). Both runs must give the same records to the bit (checked; a mismatch exits 1).

Cases (ResNet-50, ``oracle`` told the time-to-target table's target, ``--densities`` its grid
(default four densities of its own grid),
``--iterations`` simulated: the plan, made at the first decision, is most of the cost):

* ``seed003-steps`` and ``markov-congestion`` (one bundled trace shared by every link), 8
  workers, and ``seed003-steps`` at 64 workers (stepwise only);
* per-link random walks, each link on its own step (``0.5 + 0.037 i`` seconds, so the union of
  their change points is not one grid), 8 workers;
* per-link random walks on one shared 0.5 s grid (the stepwise benchmark's links), 1,024
  workers (``--big``; stepwise only).

Per case: wall seconds with and without the reuse (one call each, ``--repeat`` for more) and
their ratio; how many candidate iterations were simulated and how many reused a price; the
joint states (union change points) within the planned horizon and their mean length against
the mean iteration.

Usage::

    python benchmarks/bench_oracle.py [--fidelity stepwise,events] [--big] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any
from unittest import mock

from bench_sim import walk_link  # same directory: the simulator benchmarks' link
from tta_table import target_progress

from sim.control.policies.oracle_plan import Planner
from sim.engine import OracleContext
from sim.runner import SimConfig, run_simulation
from traces.generators import random_walk
from traces.model import TraceSet

#: Four densities of the oracle's default grid (1 ... 0.001, 13 densities), so that the runs
#: without the reuse take minutes, not hours; the cost of a plan grows with the grid alike with
#: and without the reuse.
GRID = "1,0.1,0.01,0.001"


def _own_step_walks(n: int) -> TraceSet:
    return TraceSet({
        f"w{i}": random_walk(seed=500 + i, latency_s=1e-3, bandwidth_Bps=1.25e9,
                             bandwidth_sigma=0.2, latency_sigma_s=2e-4, dt_s=0.5 + 0.037 * i,
                             duration_s=300.0, loop=True, name=f"w{i}")
        for i in range(n)
    })


def cases(big: bool) -> list[tuple[str, str, int, Callable[[], TraceSet | None], bool]]:
    """``(label, trace, workers, traces, events too)`` of each case."""
    out: list[tuple[str, str, int, Callable[[], TraceSet | None], bool]] = [
        ("seed003-steps, 8 workers", "seed003-steps", 8, lambda: None, True),
        ("markov-congestion, 8 workers", "markov-congestion", 8, lambda: None, True),
        ("seed003-steps, 64 workers", "seed003-steps", 64, lambda: None, False),
        ("per-link walks, own steps, 8 workers", "walks-own", 8, lambda: _own_step_walks(8),
         True),
    ]
    if big:
        out.append(("per-link walks, 0.5 s grid, 1,024 workers", "walk-64", 1024,
                    lambda: TraceSet({f"walk{i}": walk_link(i) for i in range(64)}), False))
    return out


def _run(cfg: SimConfig, traces: TraceSet | None, reuse: bool) -> dict[str, Any]:
    plans: list[tuple[Planner, list[float], list[int]]] = []
    search = Planner.search

    def kept(self: Planner, windows: int, passes: int) -> tuple[list[float], list[int]]:
        bounds, choice = search(self, windows, passes)
        plans.append((self, list(bounds), list(choice)))
        return bounds, choice

    contexts: list[OracleContext] = []
    init = OracleContext.__init__

    def seen(self: OracleContext, *a: Any, **k: Any) -> None:
        init(self, *a, **k)
        contexts.append(self)

    with mock.patch.object(Planner, "search", kept), \
            mock.patch.object(OracleContext, "__init__", seen):
        if reuse:
            t0 = time.perf_counter()
            rec, _ = run_simulation(cfg, traces=traces)
        else:
            with mock.patch.object(OracleContext, "segment_s", lambda self, t: None):
                t0 = time.perf_counter()
                rec, _ = run_simulation(cfg, traces=traces)
        wall = time.perf_counter() - t0
    p, bounds, choice = plans[0]
    priced, reused = p.priced, p.reused
    # The joint states the plan crosses: from its start to its predicted time to target
    # (one more replay, after the clock stopped).
    p.bounds = bounds
    end = p.run(choice)[0]
    points = contexts[0].change_points_s(p.start_s, end)
    return {
        "wall_s": wall,
        "priced": priced,
        "reused": reused,
        "records": rec.to_csv(float_format="%.17g"),
        "mean_iter_s": float(rec["iter_s"].mean()),
        "states": len(points) + 1,
        "span_s": end - p.start_s,
    }


def measure(label: str, trace: str, workers: int, traces: TraceSet | None, fidelity: str,
            iterations: int, densities: str, repeat: int) -> dict[str, Any]:
    """One case at one fidelity: both runs ``repeat`` times, alternating."""
    cfg = SimConfig(workload="resnet50", workers=workers, trace=trace, policy="oracle",
                    iterations=iterations, fidelity=fidelity, monitor="on",
                    policy_params={"target_progress": target_progress("resnet50"),
                                   "densities": densities})
    on: list[dict[str, Any]] = []
    off: list[dict[str, Any]] = []
    for _ in range(repeat):
        on.append(_run(cfg, traces, reuse=True))
        off.append(_run(cfg, traces, reuse=False))
    same = all(r["records"] == on[0]["records"] for r in on + off)
    with_s = [r["wall_s"] for r in on]
    without_s = [r["wall_s"] for r in off]
    a = on[0]
    return {
        "case": label, "fidelity": fidelity, "workers": workers,
        "with_reuse_s": with_s, "without_reuse_s": without_s,
        "speedup": statistics.median(without_s) / statistics.median(with_s),
        "identical_records": same,
        "iterations_priced": a["priced"], "iterations_reused": a["reused"],
        "reuse_rate": a["reused"] / max(1, a["priced"] + a["reused"]),
        "joint_states": a["states"], "states_span_s": a["span_s"],
        "mean_state_s": a["span_s"] / a["states"], "mean_iter_s": a["mean_iter_s"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fidelity", default="stepwise,events",
                        help="comma-separated fidelities (stepwise, events)")
    parser.add_argument("--iterations", type=int, default=20, help="iterations simulated")
    parser.add_argument("--densities", default=GRID, help="the oracle's density grid")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each side")
    parser.add_argument("--big", action="store_true", help="add the 1,024-worker case")
    parser.add_argument("--only", default="", help="run only cases whose label contains this")
    parser.add_argument("--json", action="store_true", help="print each row as a JSON line")
    args = parser.parse_args(argv)
    fids = [f for f in args.fidelity.split(",") if f]
    bad = [f for f in fids if f not in ("stepwise", "events")]
    if bad or args.iterations < 1 or args.repeat < 1:
        sys.stderr.write(f"bench_oracle: bad --fidelity {bad} or --iterations/--repeat < 1\n")
        return 2
    rows = []
    for label, trace, workers, make, events in cases(args.big):
        if args.only and args.only not in label:
            continue
        traces = make()
        for fid in fids:
            if fid == "events" and not events:
                continue
            row = measure(label, trace, workers, traces, fid, args.iterations, args.densities,
                          args.repeat)
            rows.append(row)
            if args.json:  # one line per row as it finishes (a long run keeps what it did)
                sys.stdout.write(json.dumps(row) + "\n")
                sys.stdout.flush()
            else:
                sys.stdout.write(
                    f"{label:<44} {fid:<8} with {min(row['with_reuse_s']):8.2f} s  without "
                    f"{min(row['without_reuse_s']):8.2f} s  {row['speedup']:6.2f}x  "
                    f"reused {row['iterations_reused']}/"
                    f"{row['iterations_reused'] + row['iterations_priced']}  "
                    f"states {row['joint_states']} in {row['states_span_s']:.0f} s "
                    f"(mean {row['mean_state_s']:.3g} s, iteration {row['mean_iter_s']:.3g} s)"
                    f"  identical={row['identical_records']}\n")
                sys.stdout.flush()
    return 0 if all(r["identical_records"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
