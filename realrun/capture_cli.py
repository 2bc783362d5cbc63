"""``compctl capture`` and the ``compctl convergence-*`` commands.

* ``capture``: train a built-in workload for real and write its gradient trace (.npz).
* ``convergence-run``: real compressed runs at fixed densities or schedules, kept in a runs file.
* ``convergence-calibrate``: fit the convergence model's parameters to real fixed-density runs
  (running the missing ones first).
* ``convergence-predict``: predicted progress, loss/accuracy and iterations to a target for a
  density schedule.

Size (over 400 lines): four related subcommands (capture and the three convergence-*
commands) share their option sets and output format; each is short.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sim.errors import InputError

__all__ = ["register", "parse_target", "parse_densities", "run_key"]

_CAPTURE_EPILOG = """\
examples:
  compctl capture --workload digits-mlp --steps 800 --every 10 --out grads/digits-mlp.npz
  compctl capture --workload char-lstm --steps 500 --workers 4 --seed 1 \\
      --compressors topk --densities 0.01,0.001 --out grads/lstm-seed1.npz

Training is real (torch, this CPU): one process plays --workers data-parallel workers, each on
its own data shard; the optimiser steps on their averaged gradient (what DDP computes). At every
--every-th step the trace records per layer the gradient norm, size and cross-worker variance,
and for each compressor and density the gain and achieved density under error feedback (shadow
memories updated every step). The dense run's held-out loss/accuracy curve is recorded too.
Same --seed, same file. Format: docs/convergence.md and traces/gradtrace.py.
"""

_RUN_EPILOG = """\
examples:
  compctl convergence-run --workload digits-mlp --steps 800 --schedule 0.003 --schedule 0.0003 \\
      --runs my-runs.json
  compctl convergence-run --workload char-lstm --steps 500 \\
      --schedule 1:0.1,101:0.001,251:0.0003,401:0.003 --runs my-runs.json

A schedule is a density (fixed) or STEP:DENSITY pairs from step 1. Runs already in the file
(same compressor and schedule) are kept unless --force. Each run is real training with error
feedback, the same code path as capture.
"""

_CAL_EPILOG = """\
examples:
  compctl convergence-calibrate --workload digits-mlp --densities 1,0.1,0.01,0.001 \\
      --target loss=1.5 --target loss=1.0 --target loss=0.7 --target loss=0.5 \\
      --runs my-runs.json --out digits-mlp.params.json
  compctl convergence-calibrate --workload char-lstm --trace grads/lstm.npz \\
      --densities 1,0.1,0.01,0.001 --target loss=1.0 --target accuracy=0.8 --out p.json --json

Without --trace the bundled trace of the workload is used. Fixed-density runs missing from
--runs are trained first (real, minutes on a small CPU) and added to the file. All four
parameters (lam, mu, alpha, phase) are fitted unless --mu / --phase fix them.
"""

_PRED_EPILOG = """\
examples:
  compctl convergence-predict --workload digits-mlp --schedule 0.001 --steps 800 --target loss=0.7
  compctl convergence-predict --params p.json --trace grads/x.npz \\
      --schedule 1:0.1,101:0.001 --steps 600 --target accuracy=0.9 --json

Prints, per target, the dense run's iterations and the predicted iterations under the schedule,
and the predicted loss and accuracy at the end.
"""


def parse_target(text: str) -> tuple[str, float]:
    """``loss=0.5`` or ``accuracy=0.9`` -> ``(metric, value)``; :class:`InputError` if bad."""
    metric, _, value = text.partition("=")
    metric = metric.strip()
    if metric not in ("loss", "accuracy") or not value:
        raise InputError(f"bad target {text!r}; use loss=VALUE or accuracy=VALUE")
    try:
        return metric, float(value)
    except ValueError:
        raise InputError(f"bad target {text!r}; {value!r} is not a number") from None


def parse_densities(text: str) -> list[float]:
    """Comma-separated densities in (0, 1]."""
    try:
        out = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"bad density list {text!r}; use e.g. 0.1,0.01,0.001") from None
    if not out or not all(0.0 < d <= 1.0 for d in out):
        raise InputError(f"densities must lie in (0, 1], got {text!r}")
    return out


@contextmanager
def _bar(total: int, desc: str, quiet: bool) -> Iterator[Callable[[int], None]]:
    from tqdm import tqdm

    bar = tqdm(total=total, desc=desc, file=sys.stderr, disable=quiet or not sys.stderr.isatty(), leave=False)
    try:
        yield lambda step: bar.update(1)
    finally:
        bar.close()


def _threads() -> None:
    import torch

    # One intra-op thread: the machines this runs on are shared, and results stay reproducible.
    torch.set_num_threads(1)


def _stoppable(cmd: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """``cmd`` with SIGTERM and SIGHUP taking Ctrl-C's path (clean-up runs, exit 128+signal)."""

    def run(args: argparse.Namespace) -> int:
        from sim.signals import interrupt_on_signals

        with interrupt_on_signals():
            return cmd(args)

    run.__doc__ = cmd.__doc__
    return run


def _check_new_file(out: str, force: bool) -> None:
    """Refuse, before any training, to replace an existing file without ``--force``."""
    p = Path(out)
    if p.is_dir():
        raise InputError(f"--out {out!r} is a folder; name a file")
    if os.path.lexists(p) and not force:
        raise InputError(f"--out {out!r}: the file exists (use --force to replace it)")
    if p.parent.exists() and not p.parent.is_dir():
        raise InputError(f"--out {out!r}: {p.parent} is not a folder")


def _cmd_capture(args: argparse.Namespace) -> int:
    from realrun.capture import capture_gradtrace
    from traces.gradtrace import write_gradtrace

    _check_new_file(args.out, args.force)
    _threads()
    comps = [c for c in args.compressors.split(",") if c]
    from sim.compress.base import compressor_names

    unknown = [c for c in comps if c not in compressor_names()]
    if unknown:
        raise InputError(f"unknown compressor {unknown[0]!r}; known: {', '.join(compressor_names())}")
    with _bar(args.steps, f"capture {args.workload}", args.quiet) as tick:
        tr = capture_gradtrace(
            args.workload,
            steps=args.steps,
            every=args.every,
            eval_every=args.eval_every,
            world_size=args.workers,
            batch_size=args.batch_size,
            seed=args.seed,
            compressors=comps,
            densities=parse_densities(args.densities),
            progress=tick,
        )
    path = write_gradtrace(tr, args.out)
    summary = {
        "out": str(path),
        "workload": tr.workload,
        "samples": int(len(tr.steps)),
        "layers": len(tr.layers),
        "final_loss": float(tr.eval_loss[-1]),
        "final_accuracy": float(tr.eval_accuracy[-1]),
        "bytes": path.stat().st_size,
    }
    if args.json:
        sys.stdout.write(json.dumps(summary) + "\n")
    else:
        sys.stdout.write(
            f"wrote {path}: {summary['samples']} samples x {summary['layers']} layers, "
            f"final loss {summary['final_loss']:.4f}, accuracy {summary['final_accuracy']:.4f}\n"
        )
    return 0


def run_key(compressor: str, spec: str) -> str:
    """Key of a run in a runs file: ``COMPRESSOR@SCHEDULE``, fixed densities written as ``%g``."""
    spec = spec.strip()
    if ":" not in spec:
        try:
            spec = f"{float(spec):g}"
        except ValueError:
            raise InputError(f"bad density schedule {spec!r}") from None
    return f"{compressor}@{spec}"


def _run_missing(
    workload: str, specs: list[str], steps: int, compressor: str, workers: int, seed: int,
    runs_path: Path, force: bool, quiet: bool,
) -> dict[str, Any]:
    from realrun.capture import read_runs, schedule_from_spec, train_schedule, write_runs

    runs = read_runs(runs_path)
    for spec in specs:
        key = run_key(compressor, spec)
        have = runs.get(key)
        fits = (
            have is not None and have.workload == workload and len(have.densities) == steps
            and have.world_size == workers and have.seed == seed
        )
        if fits and not force:
            continue
        dens = schedule_from_spec(spec, steps)
        _threads()
        with _bar(steps, f"{workload} {key}", quiet) as tick:
            runs[key] = train_schedule(
                workload, dens, compressor=compressor, world_size=workers, seed=seed, progress=tick
            )
        write_runs(runs_path, runs)  # after every run: an interrupted batch keeps what finished
    return runs


def _cmd_run(args: argparse.Namespace) -> int:
    runs = _run_missing(
        args.workload, args.schedule, args.steps, args.compressor, args.workers, args.seed,
        Path(args.runs), args.force, args.quiet,
    )
    rows = []
    for spec in args.schedule:
        c = runs[run_key(args.compressor, spec)]
        rows.append({"schedule": spec, "final_loss": c.eval_loss[-1],
                     "final_accuracy": c.eval_accuracy[-1], "mean_gain": c.mean_gain})
    for r in rows:
        sys.stdout.write(json.dumps(r) + "\n" if args.json else
                         f"{r['schedule']}: final loss {r['final_loss']:.4f}, accuracy "
                         f"{r['final_accuracy']:.4f}, mean gain {r['mean_gain']:.4g}\n")
    return 0


def _load_trace(workload: str, trace: str | None) -> Any:
    from traces.gradtrace import bundled_gradtrace, read_gradtrace

    tr = read_gradtrace(trace) if trace else bundled_gradtrace(workload)
    if tr.workload != workload:
        raise InputError(f"gradient trace {trace} is of {tr.workload!r}, not {workload!r}")
    return tr


def _cmd_calibrate(args: argparse.Namespace) -> int:
    from realrun.capture import bundled_runs_path
    from sim.convergence import RealCurve, calibrate

    _check_new_file(args.out, args.force)
    tr = _load_trace(args.workload, args.trace)
    targets = [parse_target(t) for t in args.target]
    dens = parse_densities(args.densities)
    steps = args.steps or int(tr.header["steps"])
    specs = [f"{d:g}" for d in dens]
    runs_path = Path(args.runs) if args.runs else bundled_runs_path(args.workload)
    runs = _run_missing(
        args.workload, specs, steps, args.compressor, int(tr.header["world_size"]),
        int(tr.header["seed"]), runs_path, False, args.quiet,
    )
    curves = []
    for spec in specs:
        c = runs[run_key(args.compressor, spec)]
        curves.append(RealCurve(tuple(c.densities), tuple(c.eval_steps), tuple(c.eval_loss),
                                tuple(c.eval_accuracy), label=spec))
    params = calibrate(
        tr, curves, targets, compressor=args.compressor, mu=args.mu, phase=args.phase,
        knee=args.knee,
        note=f"compctl convergence-calibrate on {', '.join(specs)}; runs in {runs_path.name}",
    )
    params.save(args.out)
    if args.json:
        sys.stdout.write(json.dumps(params.to_json()) + "\n")
    else:
        sys.stdout.write(
            f"wrote {args.out}: lam={params.lam:.4g} mu={params.mu:.4g} alpha={params.alpha:.4g} phase={params.phase:.4g} "
            f"knee={params.knee:.4g} "
            f"(rms log error {params.fit_rms_log_error:.3f} over {len(curves)} runs)\n"
        )
    return 0


def _cmd_predict(args: argparse.Namespace) -> int:
    from realrun.capture import schedule_from_spec
    from sim.convergence import ConvergenceModel

    if args.params:
        model = ConvergenceModel.load(args.params, args.trace)
    elif args.workload:
        model = ConvergenceModel.bundled(args.workload)
    else:
        raise InputError("give --workload (bundled model) or --params (and optionally --trace)")
    dens = schedule_from_spec(args.schedule, args.steps)
    pred = model.predict(dens, args.compressor)
    out: dict[str, Any] = {
        "workload": model.trace.workload,
        "schedule": args.schedule,
        "steps": args.steps,
        "final_progress": float(pred.progress[-1]),
        "final_pred_loss": float(pred.loss[-1]),
        "final_pred_accuracy": float(pred.accuracy[-1]),
        "targets": [],
    }
    for text in args.target:
        metric, value = parse_target(text)
        it = model.iterations_to_target(dens, value, metric, args.compressor)
        out["targets"].append({"metric": metric, "target": value,
                               "dense_iterations": model.dense_iterations_to(value, metric),
                               "predicted_iterations": it})
    if args.json:
        sys.stdout.write(json.dumps(out) + "\n")
        return 0
    sys.stdout.write(
        f"{out['workload']} {args.schedule} for {args.steps} iterations: progress "
        f"{out['final_progress']:.1f} dense-iteration equivalents, predicted loss "
        f"{out['final_pred_loss']:.4f}, accuracy {out['final_pred_accuracy']:.4f}\n"
    )
    for t in out["targets"]:
        pi = t["predicted_iterations"]
        sys.stdout.write(
            f"  {t['metric']} {t['target']:g}: dense {t['dense_iterations']:.0f} iterations, "
            f"predicted {'not reached' if pi is None else f'{pi:.0f}'}\n"
        )
    return 0


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add ``capture`` and ``convergence-run|calibrate|predict`` to ``sub``."""
    from realrun.capture import DEFAULT_COMPRESSORS, DEFAULT_DENSITIES

    fmt = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser("capture", help="train a real workload and record its gradient trace",
                       description="Real training that records a gradient trace (.npz).",
                       epilog=_CAPTURE_EPILOG, formatter_class=fmt)
    p.add_argument("--workload", required=True, help="digits-mlp, digits-cnn or char-lstm")
    p.add_argument("--steps", type=int, required=True, help="training iterations")
    p.add_argument("--every", type=int, default=10, help="sample every K steps (default 10)")
    p.add_argument("--eval-every", type=int, default=None, help="evaluate every K steps (default --every)")
    p.add_argument("--workers", type=int, default=4, help="simulated data-parallel workers (default 4)")
    p.add_argument("--batch-size", type=int, default=None, help="per worker (default: the workload's)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--compressors", default=",".join(DEFAULT_COMPRESSORS), help="comma-separated")
    p.add_argument("--densities", default=",".join(f"{d:g}" for d in DEFAULT_DENSITIES))
    p.add_argument("--out", required=True, help="output .npz path")
    p.add_argument("--force", action="store_true", help="replace an existing --out file")
    p.add_argument("--json", action="store_true", help="print a JSON summary")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_stoppable(_cmd_capture))

    r = sub.add_parser("convergence-run", help="real compressed runs (fixed or scheduled density)",
                       description="Real training with top-k and error feedback at density schedules.",
                       epilog=_RUN_EPILOG, formatter_class=fmt)
    r.add_argument("--workload", required=True)
    r.add_argument("--steps", type=int, required=True)
    r.add_argument("--schedule", action="append", required=True, help="density or STEP:DENSITY,... (repeatable)")
    r.add_argument("--compressor", default="topk")
    r.add_argument("--workers", type=int, default=4)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--runs", required=True, help="runs JSON file to add to")
    r.add_argument("--force", action="store_true", help="re-run schedules already in the file")
    r.add_argument("--json", action="store_true")
    r.add_argument("--quiet", action="store_true")
    r.set_defaults(func=_stoppable(_cmd_run))

    c = sub.add_parser("convergence-calibrate", help="fit the convergence model to real runs",
                       description="Calibrate the convergence model on real fixed-density runs.",
                       epilog=_CAL_EPILOG, formatter_class=fmt)
    c.add_argument("--workload", required=True)
    c.add_argument("--trace", default=None, help="gradient trace .npz (default: bundled)")
    c.add_argument("--densities", default="1,0.1,0.01,0.001", help="calibration densities")
    c.add_argument("--target", action="append", required=True, help="loss=V or accuracy=V (repeatable)")
    c.add_argument("--compressor", default="topk")
    c.add_argument("--steps", type=int, default=None, help="run length (default: the trace's)")
    c.add_argument("--runs", default=None, help="real-runs JSON (default: the bundled one)")
    c.add_argument("--mu", type=float, default=None,
                   help="fix the lag-turnover parameter mu (1 = the residual's own); default: fit it")
    c.add_argument("--fit-mu", action="store_true", help=argparse.SUPPRESS)  # the default now; old scripts
    c.add_argument("--phase", type=float, default=None,
                   help="fix the phase parameter (0 = no late-training lag decay); default: fit it")
    c.add_argument("--knee", type=float, default=None,
                   help="fix the staleness knee (0 = stale steps lose no usefulness); default: fit it")
    c.add_argument("--out", required=True, help="parameters JSON to write")
    c.add_argument("--force", action="store_true", help="replace an existing --out file")
    c.add_argument("--json", action="store_true")
    c.add_argument("--quiet", action="store_true")
    c.set_defaults(func=_stoppable(_cmd_calibrate))

    q = sub.add_parser("convergence-predict", help="predicted progress and time-to-target",
                       description="Predict progress, loss/accuracy and iterations to a target.",
                       epilog=_PRED_EPILOG, formatter_class=fmt)
    q.add_argument("--workload", default=None, help="use the bundled trace and parameters")
    q.add_argument("--params", default=None, help="parameters JSON (from convergence-calibrate)")
    q.add_argument("--trace", default=None, help="gradient trace (default: bundled for the params)")
    q.add_argument("--schedule", required=True, help="density or STEP:DENSITY,...")
    q.add_argument("--steps", type=int, required=True)
    q.add_argument("--compressor", default="topk")
    q.add_argument("--target", action="append", default=[], help="loss=V or accuracy=V (repeatable)")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=_cmd_predict)
