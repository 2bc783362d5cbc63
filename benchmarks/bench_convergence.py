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

Seeds: the model is calibrated on seed 0, and "real" is seed 0's run. Where repeat runs with
other seeds are bundled (``<workload>.seedN.runs.json``, each with its own dense run), the table
also gives each seed's slowdown against *its own* dense run, their mean and spread
((max - min) / mean), and the error of the predicted slowdown (predicted / dense) against that
mean; the acceptance rule is checked both ways.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from realrun.capture import RunCurve, bundled_runs_path, read_runs
from sim.convergence import ConvergenceModel, iterations_to_target_curve
from traces.gradtrace import GRADS_DIR

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
    repeats = [read_runs(p) for p in sorted(GRADS_DIR.glob(f"{workload}.seed*.runs.json"))]
    rows: list[dict[str, object]] = []
    dense_key = next((k for k, r in runs.items() if all(d >= 1.0 for d in r.densities)), None)
    for key, run in sorted(runs.items(), key=lambda kv: -kv[1].mean_gain):
        kind = _kind(key, run, model.params.calibrated_on)
        for metric, value in targets:
            real = _reach(run, metric, value)
            dense = model.dense_iterations_to(value, metric)
            pred = model.iterations_to_target(run.densities, value, metric, run.compressor)
            # Each seed's slowdown against its own dense run (seed 0's is the trace's curve).
            slows = [x for x in [_ratio(real, dense), *(
                _ratio(_reach(r[key], metric, value), _reach(r[dense_key], metric, value))
                for r in repeats if dense_key and key in r and dense_key in r
            )] if x is not None]
            mean = float(np.mean(slows)) if len(slows) > 1 else None
            rows.append({
                "workload": workload, "run": key.split("@", 1)[1], "kind": kind, "gain": run.mean_gain,
                "target": f"{metric} {'<=' if metric == 'loss' else '>='} {value:g}",
                "dense": dense, "real": real, "pred": pred,
                "slowdown": _ratio(real, dense), "err": _rel(pred, real),
                "seeds": len(slows), "slowdown_mean": mean,
                "spread": (max(slows) - min(slows)) / mean if mean else None,
                "err_mean": _rel(_ratio(pred, dense), mean),
            })
    return rows


def _reach(run: RunCurve, metric: str, value: float) -> float | None:
    vals = run.eval_loss if metric == "loss" else run.eval_accuracy
    return iterations_to_target_curve(run.eval_steps, vals, value, metric)


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a / b


def _rel(pred: float | None, real: float | None) -> float | None:
    return None if pred is None or real is None else (pred - real) / real


def _fmt(x: object, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def markdown(rows: list[dict[str, object]]) -> str:
    """The rows as a markdown table."""
    out = ["| workload | run | kind | mean gain | target | dense it. | real it. (seed 0) | real/dense | "
           "predicted it. | error | seeds | mean slowdown | seed spread | error vs mean slowdown |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(
            f"| {r['workload']} | {r['run']} | {r['kind']} | {_fmt(r['gain'], '.4f')} | {r['target']} | "
            f"{_fmt(r['dense'], '.0f')} | {_fmt(r['real'], '.0f')} | {_fmt(r['slowdown'], '.2f')} | "
            f"{_fmt(r['pred'], '.0f')} | {_pct(r['err'])} | {r['seeds']} | {_fmt(r['slowdown_mean'], '.2f')} | "
            f"{_pct(r['spread'], '.0f')} | {_pct(r['err_mean'])} |"
        )
    return "\n".join(out) + "\n"


def _pct(x: object, spec: str = "+.1f") -> str:
    return "-" if x is None else f"{format(100 * float(x), spec)}%"  # type: ignore[arg-type]


def summary(rows: list[dict[str, object]], err_key: str, slow_key: str) -> str:
    """Per-run summary of the acceptance cases (non-CAL, >= 20% slower than dense) as markdown."""
    out = ["| workload | run | kind | cases | slowdown | mean abs error | max abs error | within 15% |",
           "|---|---|---|---|---|---|---|---|"]
    groups: dict[tuple[str, str, str], list[dict[str, object]]] = {}
    for r in _checked(rows, slow_key):
        groups.setdefault((str(r["workload"]), str(r["run"]), str(r["kind"])), []).append(r)
    for (wl, run, kind), rs in groups.items():
        slows = [float(r[slow_key]) for r in rs]  # type: ignore[arg-type]
        errs, ok = _abs_errors(rs, err_key)
        out.append(
            f"| {wl} | {run} | {kind.lower()} | {len(rs)} | {min(slows):.2f}-{max(slows):.2f} | "
            f"{100 * float(np.mean(errs)):.1f}% | {100 * max(errs):.1f}% | {ok}/{len(rs)} |"
        )
    return "\n".join(out) + "\n"


def _checked(rows: list[dict[str, object]], slow_key: str) -> list[dict[str, object]]:
    return [r for r in rows if r["kind"] != "CAL" and r[slow_key] is not None and float(r[slow_key]) >= 1.2]  # type: ignore[arg-type]


def _abs_errors(rows: list[dict[str, object]], err_key: str) -> tuple[list[float], int]:
    """|error| of each row that has one, and how many of them are within 15%."""
    errs = [abs(float(r[err_key])) for r in rows if r[err_key] is not None]  # type: ignore[arg-type]
    return errs, sum(e <= 0.15 for e in errs)


def verdict(rows: list[dict[str, object]], err_key: str, slow_key: str, what: str) -> str:
    """One line: how many acceptance cases are within 15%, mean and max error."""
    checked = _checked(rows, slow_key)
    errs, ok = _abs_errors(checked, err_key)
    return (
        f"acceptance ({what}): {ok}/{len(checked)} held-out/adaptive cases >= 20% slower than dense "
        f"are within 15%; mean |error| {100 * float(np.mean(errs)) if errs else float('nan'):.1f}%, "
        f"max {100 * max(errs) if errs else float('nan'):.1f}%\n"
    )


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
    tail = (
        "\nAgainst seed 0 (the run the model was calibrated beside):\n\n"
        + summary(rows, "err", "slowdown")
        + "\nAgainst the mean slowdown over seeds (each seed against its own dense run):\n\n"
        + summary(rows, "err_mean", "slowdown_mean")
        + "\n" + verdict(rows, "err", "slowdown", "seed 0")
        + verdict([r for r in rows if r["slowdown_mean"] is not None], "err_mean", "slowdown_mean",
                  "mean slowdown over seeds")
    )
    sys.stdout.write(table + tail)
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(table + tail)
    return 0


if __name__ == "__main__":
    sys.exit(main())
