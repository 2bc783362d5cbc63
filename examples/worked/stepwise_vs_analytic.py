"""Worked example for docs/stepwise.md: where the stepwise and analytic levels disagree.

Usage: ``python examples/worked/stepwise_vs_analytic.py [--out docs/img] [--json]``

Four cases, each run at both fidelities (same seed, same configuration):

1. one slow link among 256 workers (255 links at 10 Gbit/s, the last rank's at 1 Gbit/s), over
   a ring and over a binary tree;
2. stragglers: log-normal compute jitter (sigma 0.3) per worker and iteration;
3. two racks behind a 4:1 oversubscribed uplink (``sim/topologies/2racks-4to1.toml``) against
   the flat cluster the analytic level assumes;
4. the delay of every link rising from 1 ms to 20 ms in the middle of a 2 GB allreduce.

Writes ``stepwise_vs_analytic.png`` (mean iteration time per case and fidelity),
``stepwise_timeline.json`` (one iteration of case 2 as Chrome trace JSON, for Perfetto) and
``events_timeline.json`` (the same iteration from ``--fidelity events``: every worker's compute
up to each bucket, each bucket's collective and its phases per link class) into ``--out``, and
prints the numbers.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import Any

from sim.collectives import closed_form as cf
from sim.collectives import schedule as sc
from sim.runner import SimConfig, run_simulation
from sim.stepwise_net import StepwiseNetwork
from sim.topology import flat_topology
from sim.transports import TRANSPORTS
from traces.model import PiecewiseTrace, TraceSet


def _pair(
    label: str,
    traces: TraceSet | None = None,
    events: str | None = None,
    event_level: str | None = None,
    **kw: Any,
) -> dict[str, Any]:
    base: dict[str, Any] = dict(
        workload="resnet50",
        collective="ring",
        density=1.0,
        iterations=50,
        seed=7,
        convergence="off",
    )
    base.update(kw)
    out: dict[str, Any] = {"case": label}
    stepwise_only = ("topology", "transport")
    for fid in ("analytic", "stepwise"):
        kw_fid = (
            dict(base)
            if fid == "stepwise"
            else {k: v for k, v in base.items() if k not in stepwise_only}
        )
        rec, _ = run_simulation(
            SimConfig(**kw_fid, fidelity=fid),
            traces=traces,
            events=events if fid == "stepwise" else None,
        )
        out[f"{fid}_iter_s"] = float(rec["iter_s"].mean())
        out[f"{fid}_comm_s"] = float(rec["comm_s"].mean())
        if "straggler_wait_s" in rec:
            out["straggler_wait_s"] = float(rec["straggler_wait_s"].mean())
        if fid == "stepwise" and event_level is not None:
            # The same run as SimPy processes per worker: its timeline shows every worker's
            # buckets; its records are the stepwise level's to float rounding.
            ev, _ = run_simulation(
                SimConfig(**kw_fid, fidelity="events"), traces=traces, events=event_level
            )
            rel = ((ev["iter_s"] - rec["iter_s"]).abs() / rec["iter_s"]).max()
            out["events_vs_stepwise_max_rel_diff"] = float(rel)
    return out


def _mid_transfer() -> dict[str, Any]:
    """2 GB ring allreduce over 16 workers; every link's delay goes 1 ms -> 20 ms at 0.5 s."""
    n, m = 16, 2e9
    tr = PiecewiseTrace([0.0, 0.5], [1e-3, 20e-3], [1.25e9, 1.25e9])
    net = StepwiseNetwork(flat_topology(n, TraceSet.single(tr)), TRANSPORTS["ideal"])
    stepwise = net.run(net.compile(sc.ring_allreduce_schedule(n, m)), 0.0)
    analytic = cf.time_over_trace_s(cf.ring_allreduce(n, m), tr, 0.0)
    return {
        "case": "delay 1 -> 20 ms mid-allreduce",
        "analytic_comm_s": analytic,
        "stepwise_comm_s": stepwise,
    }


def main(argv: list[str] | None = None) -> int:
    """Run the four cases, write the figure and the timeline, print the numbers."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="docs/img")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    logging.disable(logging.WARNING)
    os.makedirs(args.out, exist_ok=True)
    slow = {f"l{i}": PiecewiseTrace.constant(1e-3, 1.25e9) for i in range(256)}
    slow["l255"] = PiecewiseTrace.constant(1e-3, 0.125e9)
    cases = [
        _pair("one slow link, ring of 256", TraceSet(slow), workers=256, trace="slow-link"),
        _pair(
            "one slow link, tree of 256",
            TraceSet(slow),
            workers=256,
            trace="slow-link",
            collective="tree",
        ),
        _pair(
            "stragglers (sigma 0.3)",
            workers=64,
            trace="const:lat_ms=1,bw_gbps=25",
            straggler_sigma=0.3,
            events=os.path.join(args.out, "stepwise_timeline.json"),
            event_level=os.path.join(args.out, "events_timeline.json"),
        ),
        _pair(
            "2 racks, 4:1 uplink, rhd (nccl)",
            workers=64,
            trace="const:lat_ms=0.01,bw_gbps=100",
            topology="2racks-4to1",
            transport="nccl",
            collective="rhd",
        ),
        _mid_transfer(),
    ]
    _plot(cases, os.path.join(args.out, "stepwise_vs_analytic.png"))
    if args.json:
        sys.stdout.write(json.dumps(cases, indent=2) + "\n")
    else:
        for c in cases:
            sys.stdout.write(json.dumps(c) + "\n")
    return 0


def _plot(cases: list[dict[str, Any]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.6))
    labels = [c["case"] for c in cases]
    key = ["iter_s" if "analytic_iter_s" in c else "comm_s" for c in cases]
    a = [c[f"analytic_{k}"] * 1e3 for c, k in zip(cases, key, strict=True)]
    s = [c[f"stepwise_{k}"] * 1e3 for c, k in zip(cases, key, strict=True)]
    y = range(len(cases))
    ax.barh([i + 0.2 for i in y], a, height=0.4, label="analytic")
    ax.barh([i - 0.2 for i in y], s, height=0.4, label="stepwise")
    ax.set_yticks(
        list(y), [f"{lab}\n({k.replace('_s', '')})" for lab, k in zip(labels, key, strict=True)]
    )
    ax.set_xlabel("ms (mean iteration, or one allreduce for the last case)")
    ax.set_xscale("log")
    ax.invert_yaxis()
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
