"""Validate the convergence model against the bundled real runs; write a table and plots.

Usage::

    python benchmarks/bench_convergence.py                       # bundled workloads, default targets
    python benchmarks/bench_convergence.py --plots docs/benchmarks --markdown out.md

For each workload with a bundled gradient trace, calibrated parameters and real runs
(traces/data/grads/), and for each target: the iterations the real run needed, the dense run's
(the baseline, measured in the same capture) and the model's prediction. Runs at the calibration
densities are marked CAL; other fixed densities HELD-OUT; schedules ADAPTIVE. The acceptance rule
(issue 6) is checked on HELD-OUT and ADAPTIVE cases that are at least 20% slower than dense:
|predicted - real| / real <= 15%.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from realrun.capture import RunCurve, bundled_runs_path, read_runs
from sim.convergence import ConvergenceModel, iterations_to_target_curve

DEFAULT_TARGETS = {
    "digits-mlp": [("loss", 1.5), ("loss", 1.0), ("loss", 0.7), ("loss", 0.5), ("accuracy", 0.9)],
    "digits-cnn": [("loss", 2.0), ("loss", 1.5), ("loss", 1.0), ("loss", 0.5), ("accuracy", 0.9)],
    "char-lstm": [("loss", 2.0), ("loss", 1.5), ("loss", 1.0), ("loss", 0.7), ("loss", 0.5), ("accuracy", 0.8)],
}


def _kind(key: str, run: RunCurve, cal: tuple[float, ...]) -> str:
    if ":" in key.split("@", 1)[1]:
        return "ADAPTIVE"
    return "CAL" if run.densities[0] in cal else "HELD-OUT"


def evaluate(workload: str, targets: list[tuple[str, float]]) -> list[dict[str, object]]:
    """One row per (run, target) with real, dense and predicted iterations."""
    model = ConvergenceModel.bundled(workload)
    runs = read_runs(bundled_runs_path(workload))
    rows: list[dict[str, object]] = []
    for key, run in sorted(runs.items(), key=lambda kv: -kv[1].mean_gain):
        kind = _kind(key, run, model.params.calibrated_on)
        for metric, value in targets:
            vals = run.eval_loss if metric == "loss" else run.eval_accuracy
            real = iterations_to_target_curve(run.eval_steps, vals, value, metric)
            dense = model.dense_iterations_to(value, metric)
            pred = model.iterations_to_target(run.densities, value, metric, run.compressor)
            err = None if real is None or pred is None else (pred - real) / real
            slow = None if real is None or dense is None else real / dense
            rows.append({"workload": workload, "run": key.split("@", 1)[1], "kind": kind,
                         "gain": run.mean_gain, "target": f"{metric} {'<=' if metric == 'loss' else '>='} {value:g}",
                         "dense": dense, "real": real, "pred": pred, "slowdown": slow, "err": err})
    return rows


def _fmt(x: object, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def markdown(rows: list[dict[str, object]]) -> str:
    """The rows as a markdown table."""
    out = ["| workload | run | kind | mean gain | target | dense it. | real it. | real/dense | predicted it. | error |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(
            f"| {r['workload']} | {r['run']} | {r['kind']} | {_fmt(r['gain'], '.4f')} | {r['target']} | "
            f"{_fmt(r['dense'], '.0f')} | {_fmt(r['real'], '.0f')} | {_fmt(r['slowdown'], '.2f')} | "
            f"{_fmt(r['pred'], '.0f')} | {_fmt(None if r['err'] is None else 100 * float(r['err']), '+.1f')}% |"  # type: ignore[arg-type]
        )
    return "\n".join(out) + "\n"


def plot(workload: str, out_dir: Path) -> Path:
    """Real held-out loss curves against the model's predicted curves."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    model = ConvergenceModel.bundled(workload)
    runs = read_runs(bundled_runs_path(workload))
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for i, (key, run) in enumerate(sorted(runs.items(), key=lambda kv: -kv[1].mean_gain)):
        color = f"C{i % 10}"
        pred = model.predict(run.densities, run.compressor)
        label = key.split("@", 1)[1]
        ax.plot(run.eval_steps, run.eval_loss, color=color, lw=1.6, label=f"real {label}")
        ax.plot(np.arange(len(pred.loss)), pred.loss, color=color, lw=1.0, ls="--")
    ax.set_xlabel("iteration")
    ax.set_ylabel("held-out loss")
    ax.set_title(f"{workload}: real (solid) vs predicted (dashed), top-k + error feedback")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"convergence-{workload}-loss.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    """Evaluate, print the table and the acceptance summary."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", default="digits-mlp,digits-cnn,char-lstm")
    parser.add_argument("--plots", type=Path, default=None, help="directory for PNG plots")
    parser.add_argument("--markdown", type=Path, default=None, help="write the table here too")
    args = parser.parse_args(argv)
    rows: list[dict[str, object]] = []
    for wl in args.workloads.split(","):
        t0 = time.perf_counter()
        rows.extend(evaluate(wl, DEFAULT_TARGETS.get(wl, [("loss", 1.0)])))
        elapsed = time.perf_counter() - t0
        sys.stdout.write(f"{wl}: evaluated in {elapsed:.2f} s (model predictions for every run and target)\n")
        if args.plots:
            sys.stdout.write(f"plot: {plot(wl, args.plots)}\n")
    table = markdown(rows)
    sys.stdout.write(table)
    checked = [r for r in rows if r["kind"] != "CAL" and r["slowdown"] is not None and float(r["slowdown"]) >= 1.2]  # type: ignore[arg-type]
    ok = [r for r in checked if r["err"] is not None and abs(float(r["err"])) <= 0.15]  # type: ignore[arg-type]
    errs = [abs(float(r["err"])) for r in checked if r["err"] is not None]  # type: ignore[arg-type]
    summary = (
        f"\nacceptance: {len(ok)}/{len(checked)} held-out/adaptive cases >= 20% slower than dense are "
        f"within 15%; mean |error| {100 * float(np.mean(errs)) if errs else float('nan'):.1f}%, "
        f"max {100 * max(errs) if errs else float('nan'):.1f}%\n"
    )
    sys.stdout.write(summary)
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(table + summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
