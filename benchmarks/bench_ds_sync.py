"""DS-Sync: real runs, the consensus parameter's calibration, and its held-out error.

    python benchmarks/bench_ds_sync.py real --steps 800 --eval-every 20 --shuffle-every 1 8 \
        --out docs/benchmarks/ds_sync_real.json
    python benchmarks/bench_ds_sync.py real --steps 800 --eval-every 20 --skip-dense \
        --shuffle-every 64 256 --out docs/benchmarks/ds_sync_real_long.json
    python benchmarks/bench_ds_sync.py real --steps 300 --eval-every 5 --lr 0.4 \
        --shuffle-every 1 16 256 --out docs/benchmarks/ds_sync_real_lr04.json
    python benchmarks/bench_ds_sync.py fit --runs docs/benchmarks/ds_sync_real.json \
        docs/benchmarks/ds_sync_real_long.json docs/benchmarks/ds_sync_real_lr04.json \
        --targets loss:1,loss:0.7,loss:0.5,accuracy:0.9 loss:1,loss:0.7,loss:0.5,accuracy:0.9 \
        loss:0.5,loss:0.4,loss:0.3,loss:0.25,accuracy:0.9,accuracy:0.95 \
        --fit-on 0.05:64 0.4:1 0.4:256 --write

``real`` trains the bundled ``digits-mlp`` on ``--nproc`` gloo ranks (CPU, no network
emulation: convergence only) for every seed: plain allreduce (the dense baseline of the same
seed), and DS-Sync with ``--groups`` groups at each ``--shuffle-every`` period. It stores every
run's evaluation curve. ``fit`` fits the consensus model (:mod:`sim.sync.consensus`) on the
``--fit-on`` (learning rate, shuffle period) cells only, both with one parameter (``h = 0``)
and with two (``kappa``, ``h``), predicts every cell (the others are held out) and prints per
cell the measured and predicted slowdown and the iterations-to-target errors; ``--write``
stores the two-parameter fit in ``sim/sync/consensus_params.json``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from sim.sync.calibrate import SlowdownCase, fit_consensus, slowdown_cases, summarise
from sim.sync.consensus import CONSENSUS_PARAMS_FILE

TARGETS = (("loss", 1.0), ("loss", 0.7), ("loss", 0.5), ("accuracy", 0.9))


def _run(workload: str, nproc: int, steps: int, seed: int, sync: list[str],
         eval_every: int, lr: float | None = None) -> dict[str, Any]:
    from sim.rundir import read_run

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        cmd = [sys.executable, "-m", "sim.entry", "real", "--workload", workload, "--nproc",
               str(nproc), "--steps", str(steps), "--seed", str(seed), "--emulation", "none",
               "--eval-every", str(eval_every), "--out", str(out), "--quiet", *sync,
               *(["--lr", str(lr)] if lr is not None else [])]
        t0 = time.monotonic()
        subprocess.run(cmd, check=True)
        wall = time.monotonic() - t0
        rec, _ = read_run(out)
    ev = rec.dropna(subset=["eval_loss"])
    return {
        "sync": sync,
        "seed": seed,
        "eval_steps": [int(i) + 1 for i in ev["iteration"]],
        "eval_loss": [float(x) for x in ev["eval_loss"]],
        "eval_accuracy": [float(x) for x in ev["accuracy"]],
        "wall_s": wall,
    }


def cmd_real(args: argparse.Namespace) -> None:
    runs = []
    for seed in range(args.seeds):
        configs = [] if args.skip_dense else [[]]
        configs += [["--sync", "ds-sync", "--groups", str(args.groups), "--shuffle-every",
                     str(k)] for k in args.shuffle_every]
        for sync in configs:
            r = _run(args.workload, args.nproc, args.steps, seed, sync, args.eval_every,
                     args.lr)
            print(f"seed {seed} {' '.join(sync) or 'allreduce'}: final loss "
                  f"{r['eval_loss'][-1]:.3f}, accuracy {r['eval_accuracy'][-1]:.3f}, "
                  f"{r['wall_s']:.0f} s", flush=True)
            runs.append(r)
    doc = {"workload": args.workload, "nproc": args.nproc, "steps": args.steps, "lr": args.lr,
           "groups": args.groups, "shuffle_every": args.shuffle_every, "runs": runs}
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")


def _targets(text: str | None) -> tuple[tuple[str, float], ...]:
    if not text:
        return TARGETS
    out = []
    for part in text.split(","):
        metric, _, value = part.partition(":")
        out.append((metric.strip(), float(value)))
    return tuple(out)


def _workload_lr(workload: str) -> float:
    from realrun.workloads import get_workload

    return float(get_workload(workload).lr)


def cmd_fit(args: argparse.Namespace) -> None:
    specs = []
    if args.targets and len(args.targets) not in (1, len(args.runs)):
        raise SystemExit("--targets: give one list for all --runs files or one per file")
    workload = None
    merged: dict[float, tuple[dict[str, Any], tuple[tuple[str, float], ...]]] = {}
    for i, path in enumerate(args.runs):
        doc = json.loads(Path(path).read_text())
        if workload not in (None, doc["workload"]):
            raise SystemExit("--runs files must share the workload")
        workload = doc["workload"]
        lr = float(doc["lr"]) if doc.get("lr") is not None else _workload_lr(workload)
        text = args.targets[min(i, len(args.targets) - 1)] if args.targets else None
        targets = _targets(text)
        specs.append({"file": path, "lr": lr,
                      "targets": ",".join(f"{m}:{v:g}" for m, v in targets)})
        if lr in merged:  # a file of the same learning rate: its runs join the earlier ones
            first, first_targets = merged[lr]
            if (first["nproc"], first["groups"], first_targets) != (
                doc["nproc"], doc["groups"], targets
            ):
                raise SystemExit("--runs files of one learning rate must share nproc, groups "
                                 "and targets")
            first["runs"] = first["runs"] + doc["runs"]
        else:
            merged[lr] = (doc, targets)
    cases: list[SlowdownCase] = []
    for lr, (doc, targets) in merged.items():
        cases += slowdown_cases(doc["runs"], doc["nproc"], doc["groups"], lr, targets)
    assert workload is not None
    own_lr = _workload_lr(workload)
    fit_on = {(float(lr), int(k)) for lr, _, k in (x.partition(":") for x in args.fit_on)}
    fit_cases = [c for c in cases if (c.lr, c.shuffle_every) in fit_on]
    models = {"one-parameter (h = 0)": fit_consensus(fit_cases, own_lr, curvature=0.0),
              "two-parameter (kappa, h)": fit_consensus(fit_cases, own_lr)}
    results = {}
    for name, (params, rms) in models.items():
        print(f"{name}: kappa = {params.kappa:.6g}, h = {params.curvature:.6g} (fit on "
              f"{', '.join(sorted(args.fit_on))}: {len(fit_cases)} cases, rms log error "
              f"{rms:.4f})")
        print("| lr | shuffle every | D | measured slowdown | predicted | mean abs error | "
              "max abs error | reached within predicted | noise floor |")
        print("|---|---|---|---|---|---|---|---|---|")
        summ = summarise(cases, params)
        for key, row in summ.items():
            lr_s, _, k_s = key.partition(":")
            d = params.distance(cases[0].workers, cases[0].groups, int(k_s), float(lr_s))
            tag = " (fit)" if (float(lr_s), int(k_s)) in fit_on else " (held out)"
            print(f"| {lr_s} | {k_s}{tag} | {d:.3f} | {row['measured_slowdown']:.3f} | "
                  f"{row['predicted_slowdown']:.4f} | {row['mean_abs_error'] * 100:.1f}% | "
                  f"{row['max_abs_error'] * 100:.1f}% | {row['within_predicted']} of "
                  f"{row['cases']} | {row['noise_floor_mean_abs_error'] * 100:.1f}% |")
        results[name] = (params, rms, summ)
    if args.write:
        params, rms, summ = results["two-parameter (kappa, h)"]
        entry = {
            "kappa": params.kappa,
            "curvature": params.curvature,
            "lr": params.lr,
            "calibrated_on": {"workers": cases[0].workers, "groups": cases[0].groups,
                              "fit_on": sorted(args.fit_on), "runs": specs},
            "fit_rms_log_error": rms,
            "by_lr_and_period": summ,
            "note": "python benchmarks/bench_ds_sync.py real/fit (real gloo runs on CPU)",
        }
        table = json.loads(CONSENSUS_PARAMS_FILE.read_text())
        table[workload] = entry
        table["default"] = {**entry, "note": f"calibrated on {workload}; " + entry["note"]}
        CONSENSUS_PARAMS_FILE.write_text(json.dumps(table, indent=1) + "\n")
        print(f"wrote {CONSENSUS_PARAMS_FILE}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("real")
    r.add_argument("--workload", default="digits-mlp")
    r.add_argument("--nproc", type=int, default=4)
    r.add_argument("--groups", type=int, default=2)
    r.add_argument("--shuffle-every", type=int, nargs="+", default=[1, 8])
    r.add_argument("--steps", type=int, default=600)
    r.add_argument("--eval-every", type=int, default=10)
    r.add_argument("--seeds", type=int, default=3)
    r.add_argument("--lr", type=float, default=None, help="learning rate (workload's default)")
    r.add_argument("--skip-dense", action="store_true",
                   help="DS-Sync runs only (their dense baselines are in another file)")
    r.add_argument("--out", required=True)
    r.set_defaults(func=cmd_real)
    f = sub.add_parser("fit")
    f.add_argument("--runs", required=True, nargs="+", help="files written by `real`")
    f.add_argument("--fit-on", required=True, nargs="+", metavar="LR:K",
                   help="(learning rate, shuffle period) cells the model is fitted on; the "
                   "others are held out")
    f.add_argument("--targets", default=None, nargs="+",
                   help="metric:value list per --runs file (or one for all), e.g. "
                   "loss:0.5,accuracy:0.95 (default: "
                   + ",".join(f"{m}:{v:g}" for m, v in TARGETS) + ")")
    f.add_argument("--write", action="store_true")
    f.set_defaults(func=cmd_fit)
    args = p.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
