"""Calibrate digits-mlp's convergence model on real 2-rank runs that switch density.

Usage: ``python benchmarks/calibrate_real_switch.py --runs-dir DIR [--fit-seeds 11,12]
[--check-seeds 13] [--steps 360] [--check-records DIR ...] [--write PATH] [--json]``.

Why. The bundled calibration (``traces/data/grads/digits-mlp.params.json``) was fitted on
fixed-density runs (1, 0.1, 0.01, 0.001; 4 in-process workers, held-out loss). Fixed densities
cannot tell a *lag* (progress the error-feedback residual holds back and a denser step
releases) from *lost* progress; that calibration puts it all in the lag, so it predicts that a
burst of high density after a long hold at 0.001 catches up with the dense run within some
10-20 iterations. In real 2-rank runs about half of it never comes back
(docs/benchmarks/controllers.md, the sim-vs-real section). ``mpc`` plans exactly such
"hold sparse, finish dense" schedules, so this is where its simulator win came from.

What it does. Every schedule below runs for real (``compctl real --policy replay --emulation
none``, digits-mlp, 2 gloo ranks, CPU): fixed densities from 1 to 0.001, a hold at 0.001 for
100-250 iterations and then 0.003-0.1 to the end, bursts of 0.05 inside a hold at 0.001,
alternations every 36 iterations (about one step of the real-run trace) and switches down. The
iterations-to-target are deterministic per seed (a replayed schedule reproduces a run's losses
to the bit), so no network and no timing enter. A run's curve is its training loss averaged
over the last 10 iterations (the target of ``bench_real_tta.py``). The convergence model's five
parameters are fitted (:func:`sim.convergence.calibrate`, targets loss 1.5, 1.2 and 1.0) on
the ``--fit-seeds`` runs and checked on the ``--check-seeds`` runs and on any kept real runs
(``--check-records``: run folders with ``records.parquet``, e.g. ``bench_real_tta.py --keep``
output), each predicted from its own density schedule. Runs already in ``--runs-dir`` are
reused (``--no-run``: only those, no new run). ``--write`` saves the fitted parameters (the bundled ``digits-mlp.real2.params.json``
that ``mpc:calibration=real2`` plans with).
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

WORKLOAD = "digits-mlp"
TARGETS = (("loss", 1.5), ("loss", 1.2), ("loss", 1.0))
SMOOTH = 10
Parts = list[tuple[float, int]]


def schedules() -> dict[str, Parts]:
    """Name -> ``[(density, iterations), ...]`` (the last part lasts to the end); the first
    iteration is the dense warm-up every real run has."""
    out: dict[str, Parts] = {}
    for d in (1.0, 0.1, 0.03, 0.01, 0.005, 0.003, 0.002, 0.001):
        out[f"fixed{d:g}"] = [(1.0, 1), (d, 1)]
    for n in (100, 150, 200, 250):
        for d in (0.003, 0.01, 0.03, 0.1):
            out[f"h{n}_{d:g}"] = [(1.0, 1), (0.001, n), (d, 1)]
    for n in (150, 200):
        for b in (6, 12, 24):
            out[f"b{n}_{b}"] = [(1.0, 1), (0.001, n), (0.05, b), (0.001, 1)]
    for a, b in ((0.001, 0.01), (0.002, 0.005), (0.001, 0.005)):
        out[f"alt{a:g}_{b:g}"] = [(1.0, 1)] + [(a, 36), (b, 36)] * 6
    out["down0.01_0.001"] = [(1.0, 1), (0.01, 100), (0.001, 1)]
    out["down0.005_0.001_0.01"] = [(1.0, 1), (0.005, 120), (0.001, 80), (0.01, 1)]
    return out


def _schedule_text(parts: Parts) -> str:
    return ";".join(
        ("none/1.0/ring" if d >= 1.0 else f"topk/{d!r}/allgather") + f"@{n}" for d, n in parts
    )


def run(parts: Parts, seed: int, steps: int, out: Path) -> None:
    """One real run of the schedule (skipped when ``out`` already holds its records)."""
    if (out / "records.parquet").is_file():
        return
    cmd = [sys.executable, "-m", "sim.entry", "real", "--workload", WORKLOAD, "--nproc", "2",
           "--policy", "replay", "--param", "schedule=" + _schedule_text(parts),
           "--steps", str(steps), "--seed", str(seed), "--emulation", "none",
           "--out", str(out), "--quiet", "--force"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def curve(folder: Path, label: str) -> Any:
    """A run's :class:`RealCurve`: per-iteration densities, trailing-mean training loss."""
    import pandas as pd

    from sim.convergence.params import RealCurve

    r = pd.read_parquet(folder / "records.parquet")
    loss = r["loss"].rolling(SMOOTH, min_periods=SMOOTH).mean()
    keep = loss.notna().to_numpy()
    its = [int(i) + 1 for i in range(len(r)) if keep[i]]  # iterations done at that record
    vals = [float(v) for v in loss.to_numpy()[keep]]
    return RealCurve(tuple(float(d) for d in r["density"]), tuple(its), tuple(vals),
                     tuple(0.0 for _ in its), label)


def errors(model: Any, runs: list[Any], target: float) -> list[dict[str, Any]]:
    """Real and predicted iterations to loss ``target`` per run (the schedule's last density
    held past its end)."""
    from sim.convergence.progress import iterations_to_target_curve

    rows = []
    for c in runs:
        real = iterations_to_target_curve(c.eval_steps, c.eval_loss, target, "loss")
        tail = [c.densities[-1]] * 400
        pred = model.iterations_to_target(list(c.densities) + tail, target)
        err = math.log(pred / real) if real and pred else math.nan
        rows.append({"run": c.label, "real": real, "predicted": pred, "log_error": err})
    return rows


def _summary(rows: list[dict[str, Any]]) -> dict[str, float]:
    errs = [r["log_error"] for r in rows if not math.isnan(r["log_error"])]
    if not errs:
        return {"rms_log_error": math.nan, "max_abs_log_error": math.nan, "n": 0}
    return {"rms_log_error": math.sqrt(sum(e * e for e in errs) / len(errs)),
            "max_abs_log_error": max(abs(e) for e in errs), "n": len(errs)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs-dir", type=Path, required=True, help="real runs kept here")
    parser.add_argument("--fit-seeds", default="11,12")
    parser.add_argument("--check-seeds", default="13")
    parser.add_argument("--steps", type=int, default=360)
    parser.add_argument("--check-records", type=Path, nargs="*", default=[],
                        help="kept real-run folders to predict (their own schedules)")
    parser.add_argument("--no-run", action="store_true",
                        help="use only the runs already in --runs-dir (listed in the output)")
    parser.add_argument("--write", type=Path, help="save the fitted parameters here")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    from sim.convergence import ConvergenceModel
    from sim.convergence.calibration import calibrate

    fit_seeds = [int(s) for s in args.fit_seeds.split(",") if s]
    check_seeds = [int(s) for s in args.check_seeds.split(",") if s]
    sets: dict[str, list[Any]] = {"fit": [], "check": []}
    for group, seeds in (("fit", fit_seeds), ("check", check_seeds)):
        for seed in seeds:
            for name, parts in schedules().items():
                out = args.runs_dir / f"{name}_s{seed}"
                if args.no_run and not (out / "records.parquet").is_file():
                    continue
                run(parts, seed, args.steps, out)
                sets[group].append(curve(out, out.name))
    sets["kept"] = [curve(p, p.name) for p in args.check_records]
    bundled = ConvergenceModel.bundled(WORKLOAD)
    note = (f"benchmarks/calibrate_real_switch.py: {len(sets['fit'])} real 2-rank runs "
            f"(seeds {args.fit_seeds}, fixed and switching schedules), training loss, "
            f"{SMOOTH}-iteration mean")
    params = calibrate(bundled.trace, sets["fit"], TARGETS, note=note)
    fitted = ConvergenceModel(bundled.trace, params)
    result: dict[str, Any] = {"params": params.to_json(), "fit_seeds": fit_seeds,
                              "check_seeds": check_seeds,
                              "fit_runs": [c.label for c in sets["fit"]], "sets": {}}
    for group, runs in sets.items():
        if not runs:
            continue
        per_model = {}
        for label, model in (("bundled", bundled), ("fitted", fitted)):
            rows = errors(model, runs, 1.0)
            per_model[label] = {"summary": _summary(rows), "runs": rows}
        result["sets"][group] = per_model
    if args.write is not None:
        params.save(args.write)
    if args.json:
        sys.stdout.write(json.dumps(result, indent=1) + "\n")
    else:
        p = params
        sys.stdout.write(f"fitted: lam={p.lam:.4g} mu={p.mu:.4g} alpha={p.alpha:.4g} "
                         f"phase={p.phase:.4g} knee={p.knee:.4g}\n")
        for group, per_model in result["sets"].items():
            for label, v in per_model.items():
                s = v["summary"]
                sys.stdout.write(f"{group:>5} {label:>7}: loss 1.0 rms log error "
                                 f"{s['rms_log_error']:.3f}, worst {s['max_abs_log_error']:.3f} "
                                 f"({s['n']} runs)\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
