"""Bounded loss on real runs: convergence against the model's prediction, accuracy against dense.

Usage::

    python benchmarks/bench_bounded_loss.py --steps 400 --seeds 0,1,2 --json out.json

Per seed, three real runs of the bundled ``digits-mlp`` on 2 gloo ranks (no network emulation:
the loss process is what is measured): dense; bounded loss (``--loss-bound`` with the seeded
``--packet-loss`` process, lost entries gone); the same with error feedback. For each target the
table gives the iterations each run needed (held-out evaluation every ``--eval-every`` steps,
interpolated), the model's prediction (the dense run's own iterations times the predicted
slowdown: :func:`sim.convergence.loss.progress_with_loss` of the run's recorded delivered
fractions, with or without error feedback as the run had it) and the error of the prediction; then the final
accuracy of each run and its difference from the same seed's dense run, in points.

The bundled model's gradient is 38 KB, 26 packets of 1500 bytes: a 1% bound would allow none,
so the packets here carry ``--packet-bytes`` (64 by default: 601 packets a step).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from sim.convergence import ConvergenceModel, iterations_to_target_curve
from sim.convergence.loss import progress_with_loss
from sim.convergence.progress import first_reach
from sim.entry import main as compctl
from sim.rundir import read_run

TARGETS = [("loss", 1.0), ("loss", 0.7), ("loss", 0.5), ("accuracy", 0.9)]
WORKLOAD = "digits-mlp"


def _run(out: Path, seed: int, steps: int, eval_every: int, extra: list[str]) -> Any:
    argv = ["real", "--nproc", "2", "--workload", WORKLOAD, "--emulation", "none",
            "--steps", str(steps), "--seed", str(seed), "--eval-every", str(eval_every),
            "--out", str(out), "--quiet", *extra]
    if compctl(argv) != 0:
        raise SystemExit(f"real run failed: {' '.join(argv)}")
    return read_run(out)[0]


def _reach(rec: Any, metric: str, target: float) -> float | None:
    col = "eval_loss" if metric == "loss" else "accuracy"
    ev = rec[np.isfinite(rec[col])]
    # The evaluation after iteration i has seen i + 1 steps.
    return iterations_to_target_curve(ev["iteration"] + 1, ev[col], target, metric)


def _predicted_slowdown(model: ConvergenceModel, delivered: np.ndarray, feedback: bool,
                        metric: str, target: float) -> float | None:
    p_star = model.dense_iterations_to(target, metric)
    if p_star is None:
        return None
    prog, _ = progress_with_loss(model, np.ones(len(delivered) + 1), delivered,
                                 feedback=feedback)
    hit = first_reach(prog, p_star)
    return None if hit is None else hit / p_star


def evaluate(seeds: list[int], steps: int, eval_every: int, bound: float, loss: float,
             packet_bytes: int, work: Path) -> dict[str, Any]:
    model = ConvergenceModel.bundled(WORKLOAD)
    lossy = ["--loss-bound", str(bound), "--packet-loss", str(loss),
             "--packet-bytes", str(packet_bytes)]
    variants = {"dense": [], "bounded": lossy, "bounded+EF": [*lossy, "--loss-feedback"]}
    rows: list[dict[str, Any]] = []
    finals: list[dict[str, Any]] = []
    for seed in seeds:
        recs = {name: _run(work / f"{name}-{seed}", seed, steps, eval_every, extra)
                for name, extra in variants.items()}
        acc_dense = float(recs["dense"]["accuracy"].dropna().iloc[-1])
        for name, rec in recs.items():
            delivered = rec["delivered_frac"].to_numpy() if "delivered_frac" in rec else None
            acc = float(rec["accuracy"].dropna().iloc[-1])
            finals.append({
                "seed": seed, "run": name, "final_accuracy": acc,
                "points_vs_dense": 100 * (acc - acc_dense),
                "mean_delivered": float(np.mean(delivered[1:])) if delivered is not None else 1.0,
                "min_rank_delivered": float(rec["min_rank_delivered_frac"].iloc[1:].min())
                if delivered is not None else 1.0,
            })
            if name == "dense":
                continue
            for metric, target in TARGETS:
                real = _reach(rec, metric, target)
                dense = _reach(recs["dense"], metric, target)
                slow = _predicted_slowdown(model, delivered, name.endswith("EF"), metric,
                                           target)
                pred = None if dense is None or slow is None else dense * slow
                err = None if pred is None or real is None else (real - pred) / pred
                rows.append({"seed": seed, "run": name, "metric": metric, "target": target,
                             "dense": dense, "real": real, "predicted": pred, "error": err})
    return {"rows": rows, "finals": finals}


def _f(x: Any, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def markdown(res: dict[str, Any]) -> str:
    out = ["| seed | run | target | dense real | run real | predicted | error |",
           "|---|---|---|---|---|---|---|"]
    for r in res["rows"]:
        out.append(f"| {r['seed']} | {r['run']} | {r['metric']} {r['target']:g} | "
                   f"{_f(r['dense'], '.0f')} | {_f(r['real'], '.0f')} | "
                   f"{_f(r['predicted'], '.0f')} | {_f(r['error'], '+.1%')} |")
    out += ["", "| seed | run | final accuracy | points vs dense | mean delivered | "
            "worst rank-step delivered |", "|---|---|---|---|---|---|"]
    for f in res["finals"]:
        out.append(f"| {f['seed']} | {f['run']} | {f['final_accuracy']:.4f} | "
                   f"{f['points_vs_dense']:+.2f} | {f['mean_delivered']:.4f} | "
                   f"{f['min_rank_delivered']:.4f} |")
    errs = [abs(r["error"]) for r in res["rows"] if r["error"] is not None]
    pts = [abs(f["points_vs_dense"]) for f in res["finals"] if f["run"] != "dense"]
    out += ["", f"|error| of the predicted iterations: mean {np.mean(errs):.1%}, "
            f"max {np.max(errs):.1%} over {len(errs)} (run, target) pairs; "
            f"|accuracy - dense|: max {np.max(pts):.2f} points"]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--eval-every", type=int, default=20)
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--loss-bound", type=float, default=0.01)
    p.add_argument("--packet-loss", type=float, default=0.01)
    p.add_argument("--packet-bytes", type=int, default=64)
    p.add_argument("--json", help="also write the results as JSON here")
    a = p.parse_args(argv)
    seeds = [int(s) for s in a.seeds.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        res = evaluate(seeds, a.steps, a.eval_every, a.loss_bound, a.packet_loss,
                       a.packet_bytes, Path(tmp))
    sys.stdout.write(markdown(res) + "\n")
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
