"""The simulator's view of bounded loss: the figures and numbers of docs/bounded_loss.md.

Usage::

    python benchmarks/bounded_loss_figures.py --out docs/img [--json numbers.json]

1. tails: per-iteration communication time (p50, p99) against the packet-loss rate, plain
   TCP-like transport vs the bounded-loss transport (1% bound), analytic level;
2. fan-in: p99 of a parameter-server collective against the worker count at a fixed loss rate
   (the more synchronised flows a step waits for, the likelier one of them waits for a timeout);
3. scheme vs network: time to a predicted accuracy target, each scheme against dense over the
   plain transport, on five networks (lossless fast, lossy fast, lossy with a compute-heavy
   model, bandwidth-starved, time-varying with spikes);
4. spraying vs hashing: one collective's time on the two-spine topology at the stepwise level.

Every number is simulated with a fixed seed: the script's output is deterministic.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from sim.runner import SimConfig, run_simulation

BOUND = 0.01


def _run(**kw: Any) -> Any:
    return run_simulation(SimConfig(**kw))[0]


def tails(losses: list[float]) -> dict[str, Any]:
    """p50 / p99 of comm_s vs packet loss (bert-base, 16 workers, ring, 25 Gbit/s)."""
    base = dict(workload="bert-base", workers=16, trace="const:lat_ms=0.05,bw_gbps=25",
                policy="dense", collective="ring", iterations=400, seed=1, convergence="off")
    out: dict[str, Any] = {"loss": losses, "plain": [], "bounded": []}
    for p in losses:
        for name, extra in (("plain", {}), ("bounded", {"loss_bound": BOUND})):
            r = _run(**base, packet_loss=p, **extra)
            c = r["comm_s"].to_numpy()
            out[name].append({"p50_s": float(np.percentile(c, 50)),
                              "p99_s": float(np.percentile(c, 99)),
                              "mean_iter_s": float(r["iter_s"].mean()),
                              "min_delivered": float(r["delivered_frac"].min())})
    return out


def fan_in(workers: list[int], loss: float) -> dict[str, Any]:
    """p99 comm_s of the ps collective vs workers at ``loss``."""
    out: dict[str, Any] = {"workers": workers, "loss": loss, "plain": [], "bounded": [],
                           "lossless": []}
    for n in workers:
        base = dict(workload="resnet50", workers=n, trace="const:lat_ms=0.05,bw_gbps=25",
                    policy="dense", collective="ps", iterations=300, seed=2, convergence="off")
        for name, extra in (("lossless", {}), ("plain", {"packet_loss": loss}),
                            ("bounded", {"packet_loss": loss, "loss_bound": BOUND})):
            c = _run(**base, **extra)["comm_s"].to_numpy()
            out[name].append(float(np.percentile(c, 99)))
    return out


NETWORKS = {
    "fast, lossless": dict(workload="bert-base", trace="const:lat_ms=0.05,bw_gbps=100"),
    "fast, 0.1% loss": dict(workload="bert-base", trace="const:lat_ms=0.05,bw_gbps=100",
                            packet_loss=0.001),
    "fast, 0.1% loss, compute-heavy": dict(workload="resnet50",
                                           trace="const:lat_ms=0.05,bw_gbps=100",
                                           packet_loss=0.001),
    "slow (10 Gbit/s), 0.1% loss": dict(workload="bert-base",
                                        trace="const:lat_ms=0.05,bw_gbps=10",
                                        packet_loss=0.001),
    "delay spikes, lossless": dict(workload="bert-base", trace="delay-spikes"),
}
SCHEMES = {
    "dense": {"policy": "dense"},
    "bounded loss 1%": {"policy": "dense", "loss_bound": BOUND},
    "bounded loss 1% + deadline": {"policy": "dense", "loss_bound": BOUND, "deadline_s": None},
    "top-k 10%": {"policy": "fixed", "density": 0.1, "compressor": "topk",
                  "collective": "allgather"},
    "random-k 10%": {"policy": "fixed", "density": 0.1, "compressor": "randomk",
                     "collective": "ring"},
    "dc2-aimd": {"policy": "dc2-aimd"},
    "dc2-aimd + bounded loss 1%": {"policy": "dc2-aimd", "loss_bound": BOUND},
}


def _tta(r: Any, target: float) -> float:
    hit = np.flatnonzero(r["pred_accuracy"].to_numpy() >= target)
    return float(r["iter_s"].cumsum().iloc[hit[0]]) if len(hit) else float("nan")


def schemes(target: float = 0.8, iterations: int = 400) -> dict[str, Any]:
    """Time to ``target`` predicted accuracy per (network, scheme), 16 workers, ring.

    The deadline of the "+ deadline" scheme is 90% of the plain dense run's median collective
    (its median communication per iteration over its bucket count): a deadline that fires on
    most collectives, cutting up to the bound.
    """
    out: dict[str, Any] = {"target": target, "networks": {}}
    for net, kw in NETWORKS.items():
        row: dict[str, Any] = {}
        deadline = None
        for name, sk in SCHEMES.items():
            s = dict(sk)
            if "deadline_s" in s:
                s["deadline_s"] = deadline
            cfg: dict[str, Any] = dict(workers=16, iterations=iterations, seed=3, **kw, **s)
            if cfg["policy"] == "dense":
                cfg["collective"] = "ring"
            r, meta = run_simulation(SimConfig(**cfg))
            if name == "dense":
                deadline = 0.9 * float(np.median(r["comm_s"])) / meta["workload"]["buckets"]
            row[name] = {"tta_s": _tta(r, target), "mean_iter_s": float(r["iter_s"].mean()),
                         "mean_delivered": float(r["delivered_frac"].mean())
                         if "delivered_frac" in r else 1.0}
        out["networks"][net] = row
    return out


def spraying(sizes_mb: list[float]) -> dict[str, Any]:
    """One collective on the 2-spine topology: per-flow hashing vs per-packet spraying."""
    import tempfile

    from sim.compress.spec import get_spec
    from sim.stepwise_cost import stepwise_collective

    src = Path(__file__).resolve().parents[1] / "sim" / "topologies" / "2spine.toml"
    out: dict[str, Any] = {"sizes_mb": sizes_mb}
    with tempfile.TemporaryDirectory() as tmp:
        for lb in ("hash", "spray"):
            path = Path(tmp) / f"2spine-{lb}.toml"
            path.write_text(src.read_text().replace('load_balancing = "auto"',
                                                    f'load_balancing = "{lb}"'))
            for coll in ("ring", "rhd", "tree"):
                times = []
                for mb in sizes_mb:
                    payload = get_spec("none").payload(int(mb * 1e6 / 4), 1.0, 4)
                    times.append(stepwise_collective(coll, 8, payload, latency_s=5e-6,
                                                     bandwidth_Bps=12.5e9,
                                                     topology=str(path))["time_s"])
                out[f"{coll}/{lb}"] = times
    return out


def plot(res: dict[str, Any], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    t = res["tails"]
    fig, ax = plt.subplots(figsize=(6, 3.6))
    x = np.maximum(np.array(t["loss"]), 1e-6)
    for name, style in (("plain", "-o"), ("bounded", "-s")):
        ax.plot(x, [1e3 * v["p99_s"] for v in t[name]], style, label=f"{name}: p99")
        ax.plot(x, [1e3 * v["p50_s"] for v in t[name]], style, alpha=0.4,
                label=f"{name}: p50")
    ax.set_xscale("log")
    ax.set_xlabel("per-packet loss (0 drawn at 1e-6)")
    ax.set_ylabel("communication per iteration (ms)")
    ax.set_title("BERT-base, 16 workers, dense ring allreduce, 25 Gbit/s")
    ax.legend(fontsize=8)
    fig.tight_layout()
    paths.append(out / "bounded_loss_tails.png")
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)

    f = res["fan_in"]
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for name, style in (("plain", "-o"), ("bounded", "-s")):
        extra = [1e3 * (v - b) for v, b in zip(f[name], f["lossless"], strict=True)]
        ax.plot(f["workers"], extra, style, label=name)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("workers (parameter server: one step waits for every worker's flow)")
    ax.set_ylabel("p99 communication minus lossless (ms)")
    ax.set_title(f"ResNet-50, dense, ps, 25 Gbit/s, {f['loss']:g} per-packet loss")
    ax.legend(fontsize=8)
    fig.tight_layout()
    paths.append(out / "bounded_loss_fanin.png")
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)

    s = res["schemes"]
    nets = list(s["networks"])
    names = list(SCHEMES)
    fig, ax = plt.subplots(figsize=(8, 3.8))
    w = 0.8 / len(names)
    for j, name in enumerate(names):
        vals = []
        for net in nets:
            d = s["networks"][net]["dense"]["tta_s"]
            v = s["networks"][net].get(name, {}).get("tta_s", float("nan"))
            vals.append(d / v if v == v and v > 0 else 0.0)
        ax.bar(np.arange(len(nets)) + j * w, vals, w, label=name)
    ax.axhline(1.0, color="k", lw=0.6)
    ax.set_xticks(np.arange(len(nets)) + 0.4 - w / 2)
    ax.set_xticklabels(nets, fontsize=7, rotation=12)
    ax.set_ylabel(f"speed-up to {s['target']:g} predicted accuracy vs dense")
    ax.legend(fontsize=7, ncol=3)
    fig.tight_layout()
    paths.append(out / "bounded_loss_schemes.png")
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)

    sp = res["spraying"]
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for coll in ("ring", "rhd", "tree"):
        ratio = np.array(sp[f"{coll}/hash"]) / np.array(sp[f"{coll}/spray"])
        ax.plot(sp["sizes_mb"], ratio, "-o", label=coll)
    ax.set_xscale("log")
    ax.set_xlabel("collective size (MB per worker)")
    ax.set_ylabel("time with hashing / time with spraying")
    ax.set_title("2 spines, 8 ranks in 2 racks (sim/topologies/2spine.toml)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    paths.append(out / "bounded_loss_spraying.png")
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)
    return paths


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--out", default="docs/img")
    p.add_argument("--json", help="also write the numbers as JSON here")
    a = p.parse_args(argv)
    res = {
        "tails": tails([0.0, 1e-5, 1e-4, 1e-3, 5e-3]),
        "fan_in": fan_in([4, 8, 16, 32, 64, 128], 1e-4),
        "schemes": schemes(),
        "spraying": spraying([0.1, 1.0, 10.0, 100.0]),
    }
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    for path in plot(res, out):
        sys.stdout.write(f"wrote {path}\n")
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
