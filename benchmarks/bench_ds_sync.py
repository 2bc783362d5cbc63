"""DS-Sync: real runs, the consensus parameter's calibration, and its held-out error.

    python benchmarks/bench_ds_sync.py real --steps 800 --eval-every 20 --shuffle-every 1 8 \
        --out docs/benchmarks/ds_sync_real.json
    python benchmarks/bench_ds_sync.py real --steps 800 --eval-every 20 --skip-dense \
        --shuffle-every 64 256 --out docs/benchmarks/ds_sync_real_long.json
    python benchmarks/bench_ds_sync.py fit --runs docs/benchmarks/ds_sync_real.json \
        docs/benchmarks/ds_sync_real_long.json --fit-on 64 --write
    python benchmarks/bench_ds_sync.py real --steps 300 --eval-every 5 --lr 0.4 \
        --shuffle-every 1 16 256 --out docs/benchmarks/ds_sync_real_lr04.json
    python benchmarks/bench_ds_sync.py fit --runs docs/benchmarks/ds_sync_real_lr04.json \
        --fit-on 256 --targets loss:0.5,loss:0.4,loss:0.3,loss:0.25,accuracy:0.9,accuracy:0.95

``real`` trains the bundled ``digits-mlp`` on ``--nproc`` gloo ranks (CPU, no network
emulation: convergence only) for every seed: plain allreduce (the dense baseline of the same
seed), and DS-Sync with ``--groups`` groups at each ``--shuffle-every`` period. It stores every
run's evaluation curve. ``fit`` fits ``kappa`` on the calibration period (``--fit-on``, default the smallest) only,
predicts the others (held out) and prints, per seed and target, the measured and predicted
iterations, their error and the final accuracy against dense; ``--write`` stores ``kappa``
in ``sim/sync/consensus_params.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from sim.sync.calibrate import fit_kappa, iterations_to, predicted_slowdown
from sim.sync.consensus import CONSENSUS_PARAMS_FILE, consensus_distance

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


def _key(run: dict[str, Any]) -> int:
    s = run["sync"]
    return int(s[s.index("--shuffle-every") + 1]) if s else 0


def _targets(text: str | None) -> tuple[tuple[str, float], ...]:
    if not text:
        return TARGETS
    out = []
    for part in text.split(","):
        metric, _, value = part.partition(":")
        out.append((metric.strip(), float(value)))
    return tuple(out)


def cmd_fit(args: argparse.Namespace) -> None:
    docs = [json.loads(Path(p).read_text()) for p in args.runs]
    doc = docs[0]
    n, g = doc["nproc"], doc["groups"]
    for other in docs[1:]:
        if (other["nproc"], other["groups"], other["workload"], other.get("lr")) != (
            n, g, doc["workload"], doc.get("lr")
        ):
            raise SystemExit("--runs files must share workload, nproc, groups and lr")
        doc["runs"] = doc["runs"] + other["runs"]
    periods = sorted({k for d in docs for k in d["shuffle_every"]})
    by_seed: dict[int, dict[int, dict[str, Any]]] = {}
    for r in doc["runs"]:
        by_seed.setdefault(r["seed"], {})[_key(r)] = r

    def slowdowns(k: int) -> list[tuple[int, str, float, float]]:
        out = []
        for seed, runs in sorted(by_seed.items()):
            dense, ds = runs[0], runs[k]
            for metric, target in _targets(args.targets):
                vals = "eval_loss" if metric == "loss" else "eval_accuracy"
                td = iterations_to(dense["eval_steps"], dense[vals], target, metric)
                tg = iterations_to(ds["eval_steps"], ds[vals], target, metric)
                if td is not None and tg is not None:
                    out.append((seed, f"{metric}{'<=' if metric == 'loss' else '>='}{target}",
                                td, tg))
        return out

    calib = args.fit_on if args.fit_on is not None else periods[0]
    cases = [(n, g, calib, tg / td) for _, _, td, tg in slowdowns(calib)]
    kappa, rms = fit_kappa(cases)
    print(f"kappa = {kappa:.4f} (fit on shuffle-every {calib}, {len(cases)} cases, "
          f"rms log error {rms:.3f})")
    print("| shuffle every | D | seed | target | dense it. | DS-Sync it. | predicted | error |")
    print("|---|---|---|---|---|---|---|---|")
    summary = {}
    for k in periods:
        errs = []
        for seed, tgt, td, tg in slowdowns(k):
            pred = td * predicted_slowdown(n, g, k, kappa)
            err = (pred - tg) / tg
            errs.append(err)
            print(f"| {k}{' (fit)' if k == calib else ''} | {consensus_distance(n, g, k):.3f} | "
                  f"{seed} | {tgt} | {td:.0f} | {tg:.0f} | {pred:.0f} | {err * 100:+.1f}% |")
        summary[k] = (float(np.mean(np.abs(errs))) if errs else math.nan, len(errs),
                      sum(e >= 0 for e in errs), float(np.max(np.abs(errs))) if errs else math.nan)
    for k, (mae, cnt, within, worst) in summary.items():
        print(f"shuffle every {k}: mean |error| {mae * 100:.1f}% (max {worst * 100:.1f}%) over "
              f"{cnt} cases; reached the target within the predicted iterations in {within}")
    print("| seed | run | final accuracy | dense | difference (points) |")
    print("|---|---|---|---|---|")
    for seed, runs in sorted(by_seed.items()):
        dense_acc = runs[0]["eval_accuracy"][-1]
        for k in periods:
            acc = runs[k]["eval_accuracy"][-1]
            print(f"| {seed} | g={g} k={k} | {acc:.4f} | {dense_acc:.4f} | "
                  f"{(acc - dense_acc) * 100:+.2f} |")
    if args.write:
        table = json.loads(CONSENSUS_PARAMS_FILE.read_text())
        entry = {
            "kappa": kappa,
            "calibrated_on": {"workers": n, "groups": g, "shuffle_every": calib,
                              "seeds": sorted(by_seed), "steps": doc["steps"]},
            "fit_rms_log_error": rms,
            "held_out_mean_abs_error": {str(k): v[0] for k, v in summary.items() if k != calib},
            "note": "python benchmarks/bench_ds_sync.py real/fit (real gloo runs on CPU)",
        }
        table[doc["workload"]] = entry
        table["default"] = {**entry, "note": f"calibrated on {doc['workload']}; " + entry["note"]}
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
    f.add_argument("--fit-on", type=int, default=None,
                   help="the shuffle period kappa is fitted on (default: the smallest)")
    f.add_argument("--targets", default=None,
                   help="metric:value list, e.g. loss:0.5,accuracy:0.95 (default: "
                   + ",".join(f"{m}:{v:g}" for m, v in TARGETS) + ")")
    f.add_argument("--write", action="store_true")
    f.set_defaults(func=cmd_fit)
    args = p.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
