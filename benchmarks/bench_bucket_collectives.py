"""Per-bucket versus whole-message collective choice under ``collective=auto``.

Usage: ``python benchmarks/bench_bucket_collectives.py [--samples 8] [--json]``

For every multi-bucket seed workload x bundled trace x worker count (8 to 1,024, powers of two)
x setting (dense; top-k at density 0.01), the link is sampled at ``--samples`` evenly spaced
times of the trace. At each sample the selector picks once pricing the whole gradient as one
message and once pricing each bucket with its own payload (:func:`sim.control.selector.
select_decision`); both decisions are then run through the analytic engine's iteration
(:class:`sim.engine.IterationModel`) starting at that time. A case "changes the pick" when the
per-bucket decision differs from the whole-message one at any sample; its gain is the whole-message
iteration time summed over the samples divided by the per-bucket one.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from sim.control.selector import select_decision
from sim.engine import _build
from sim.runner import SimConfig
from traces.bundled import bundled_names

WORKLOADS = ("bert-base", "gpt2-small", "lstm-ptb", "resnet50", "vgg16")
WORKERS = (8, 16, 32, 64, 128, 256, 512, 1024)
SETTINGS = (("none", 1.0), ("topk", 0.01))


def _case(workload: str, trace: str, workers: int, samples: int) -> list[tuple[bool, float, float]]:
    """Per setting: (pick changed, whole-message seconds, per-bucket seconds) over the samples."""
    cfg = SimConfig(workload=workload, workers=workers, trace=trace, policy="dense",
                    iterations=1)
    _, _, model, _, _ = _build(cfg, None)
    link = model.cluster.link
    span = float(link.duration_s) if link.duration_s > 0 else 1.0
    times = [span * i / samples for i in range(samples)]
    sizes = tuple(b.numel * model.dtype_bytes for b in model.buckets)
    out = []
    for compressor, density in SETTINGS:
        changed, whole_s, per_s = False, 0.0, 0.0
        for t in times:
            lat, bw = float(link.latency_at(t)), float(link.bandwidth_at(t))
            args = (lat, bw, workers, float(model.grad_bytes))
            whole = select_decision(*args, (), density, compressor)
            per = select_decision(*args, sizes, density, compressor)
            changed |= per != whole
            whole_s += model.run(model.plan(whole), t).iter_s
            per_s += model.run(model.plan(per), t).iter_s
        out.append((changed, whole_s, per_s))
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the measurement and print a summary (or JSON)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rows: list[dict[str, Any]] = []
    for workload in WORKLOADS:
        for trace in bundled_names():
            for workers in WORKERS:
                res = _case(workload, trace, workers, args.samples)
                for (compressor, density), (changed, whole_s, per_s) in zip(SETTINGS, res, strict=True):
                    rows.append({
                        "workload": workload, "trace": trace, "workers": workers,
                        "compressor": compressor, "density": density, "changed": changed,
                        "gain": whole_s / per_s,
                    })
    changed = [r for r in rows if r["changed"]]
    gains = sorted(r["gain"] for r in changed)
    summary = {
        "cases": len(rows),
        "changed": len(changed),
        "median_gain_when_changed": gains[len(gains) // 2] if gains else 1.0,
        "max_gain": max(gains) if gains else 1.0,
        "min_gain": min(r["gain"] for r in rows),
        "over_1pct": sum(1 for r in rows if r["gain"] > 1.01),
    }
    if args.json:
        json.dump({"summary": summary, "rows": rows}, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(json.dumps(summary) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
