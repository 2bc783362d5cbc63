"""DS-Sync's gain against worker count on a shared bottleneck, and against compression control.

    python benchmarks/bench_ds_sync_scaling.py --plot docs/img/ds_sync_scaling.png \
        --json docs/benchmarks/ds_sync_scaling.json

Stepwise simulator, ResNet-50 (its convergence borrowed from the captured digits-cnn trace),
``n`` workers with one GPU and one 10 Gbit/s NIC per node, 4 nodes per rack behind a 4:1
oversubscribed uplink (one NIC's bandwidth per rack): the shared bottleneck. For each collective
(ring, recursive halving/doubling, parameter server) and ``n`` in 8..128 it runs plain
allreduce, DS-Sync with groups of 4 (``g = n / 4``, locality-aware groups, reshuffled every
step), fixed random-k / top-k at 1% (compression control) and both together, and reports the
mean iteration time and the time to 90% predicted accuracy (DS-Sync pays its calibrated
consensus cost, :mod:`sim.sync.consensus`). Same seed, same numbers.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from sim.runner import SimConfig, run_simulation

TOPOLOGY = """description = "{n} nodes x 1 GPU, 4 nodes per rack, 4:1 oversubscribed uplinks"
[cluster]
nodes = {n}
gpus_per_node = 1
nics_per_node = 1
nodes_per_rack = 4
[links.intra]
latency_us = 2
bandwidth_gbps = 1200
[links.nic]
latency_us = 5
bandwidth_gbps = 10
[links.uplink]
latency_us = 5
oversubscription = 4.0
"""

TARGET = 0.9


def _tta_s(rec: Any) -> float:
    hit = np.nonzero(rec["pred_accuracy"].to_numpy() >= TARGET)[0]
    if len(hit) == 0:
        return float("nan")
    i = int(hit[0])
    return float(rec["start_s"].iloc[i] + rec["iter_s"].iloc[i])


def _choices(coll: str, n: int) -> dict[str, dict[str, Any]]:
    ds = {"sync": "ds-sync", "groups": n // 4, "shuffle_every": 1}
    return {
        "allreduce": {"collective": coll, "density": 1.0},
        "ds-sync": {"collective": coll, "density": 1.0, **ds},
        "compress 1%": {"collective": coll, "density": 0.01},
        "ds-sync + compress 1%": {"collective": coll, "density": 0.01, **ds},
    }


def run(workers: list[int], collectives: list[str], iterations: int) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in workers:
            topo = Path(tmp) / f"scale{n}.toml"
            topo.write_text(TOPOLOGY.format(n=n))
            for coll in collectives:
                for label, kw in _choices(coll, n).items():
                    cfg = SimConfig(workload="resnet50", workers=n,
                                    trace="const:lat_ms=0.01,bw_gbps=10", iterations=iterations,
                                    fidelity="stepwise", topology=str(topo), seed=0, **kw)
                    rec, _ = run_simulation(cfg)
                    rows.append({"workers": n, "collective": coll, "choice": label,
                                 "mean_iter_s": float(rec["iter_s"].mean()),
                                 "tta_s": _tta_s(rec)})
                    print(f"n={n} {coll} {label}: iteration {rows[-1]['mean_iter_s']:.4f} s, "
                          f"time to target {rows[-1]['tta_s']:.1f} s", flush=True)
    return rows


def plot(rows: list[dict[str, Any]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharex=True)
    colls = sorted({r["collective"] for r in rows})
    for ax, metric, title in ((axes[0], "mean_iter_s", "per-iteration time"),
                              (axes[1], "tta_s", "time to 90% predicted accuracy")):
        for coll in colls:
            for other, style in (("allreduce", "-"), ("compress 1%", ":")):
                xs, ys = [], []
                for n in sorted({r["workers"] for r in rows}):
                    get = {r["choice"]: r[metric] for r in rows
                           if r["workers"] == n and r["collective"] == coll}
                    xs.append(n)
                    ys.append(get[other] / get["ds-sync"])
                ax.plot(xs, ys, style, marker="o", label=f"{coll}: vs {other}")
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ax.set_xlabel("workers (groups of 4)")
        ax.set_ylabel("DS-Sync speed-up (x)")
        ax.set_title(title)
    axes[1].legend(fontsize=7)
    fig.suptitle("DS-Sync on a 4:1 oversubscribed rack network (stepwise, ResNet-50)")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workers", type=int, nargs="+", default=[8, 16, 32, 64, 128])
    p.add_argument("--collectives", nargs="+", default=["ring", "rhd", "ps"])
    p.add_argument("--iterations", type=int, default=1200)
    p.add_argument("--plot")
    p.add_argument("--json")
    args = p.parse_args()
    rows = run(args.workers, args.collectives, args.iterations)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    if args.plot:
        plot(rows, args.plot)


if __name__ == "__main__":
    main()
