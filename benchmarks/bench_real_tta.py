"""Real 2-rank time to target: ``mpc`` against fixed densities over a stepped bandwidth trace.

Usage: ``python benchmarks/bench_real_tta.py [--seeds 1,2,3] [--densities 1,0.1,0.01]
[--steps 260] [--json]``

Each run is ``compctl real --workload digits-mlp --nproc 2`` (CPU, gloo, hook emulation of the
trace) under a looping two-step bandwidth trace (4 s at 10 Mbit/s, 4 s at 0.5 Mbit/s, 1 ms
latency; trace seconds). The target is a training loss of ``TARGET_LOSS`` (1.5): a run's time
to target is the end of the first iteration at which the mean training loss of the last
``SMOOTH`` (10) iterations reaches it, on the run's own clock (``start_s + iter_s``). ``mpc`` is
told the convergence model's progress for that loss (``target_progress``), as in the simulator
table. Runs go seed by seed, every policy of a seed in turn, so load drift on a shared machine
hits all of them. Reported per policy: each seed's time to target and the mean; the best fixed
density is the one with the least mean.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

TRACE = "steps:dur_s=4/4,lat_ms=1/1,bw_gbps=0.01/0.0005,loop=true"
WORKLOAD = "digits-mlp"
TARGET_LOSS = 1.5
SMOOTH = 10


def time_to_target_s(records: Any, target_loss: float = TARGET_LOSS) -> float:
    """End of the first iteration whose trailing mean training loss reaches ``target_loss``
    (inf if none)."""
    loss = records["loss"].rolling(SMOOTH, min_periods=SMOOTH).mean().to_numpy()
    for i, v in enumerate(loss):
        if v <= target_loss:
            return float(records["start_s"].iloc[i] + records["iter_s"].iloc[i])
    return math.inf


def _run(policy: str, params: list[str], seed: int, steps: int, out: Path) -> float:
    import pandas as pd

    cmd = [sys.executable, "-m", "sim.entry", "real", "--workload", WORKLOAD, "--nproc", "2",
           "--policy", policy, "--trace", TRACE, "--steps", str(steps), "--seed", str(seed),
           "--emulation", "hook", "--out", str(out), "--quiet"]
    for p in params:
        cmd += ["--param", p]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time_to_target_s(pd.read_parquet(out / "records.parquet"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--densities", default="1,0.1,0.01")
    parser.add_argument("--steps", type=int, default=260)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    from sim.convergence import ConvergenceModel

    target = ConvergenceModel.bundled(WORKLOAD).dense_iterations_to(TARGET_LOSS, "loss")
    assert target is not None
    runs: dict[str, tuple[str, list[str]]] = {}
    for d in (float(x) for x in args.densities.split(",")):
        comp = "none" if d >= 1.0 else "topk"
        runs[f"fixed {d:g}"] = ("fixed", [f"density={d}", f"compressor={comp}",
                                           "collective=auto"])
    runs["mpc"] = ("mpc", [f"target_progress={target:.3f}"])
    times: dict[str, list[float]] = {k: [] for k in runs}
    with tempfile.TemporaryDirectory() as tmp:
        for seed in (int(s) for s in args.seeds.split(",")):
            for name, (policy, params) in runs.items():
                out = Path(tmp) / f"{name.replace(' ', '_')}_{seed}"
                times[name].append(_run(policy, params, seed, args.steps, out))
                print(f"seed {seed} {name}: {times[name][-1]:.3f} s", file=sys.stderr)
    means = {k: statistics.fmean(v) for k, v in times.items()}
    fixed = {k: v for k, v in means.items() if k.startswith("fixed")}
    best = min(fixed, key=lambda k: fixed[k])
    result = {"trace": TRACE, "workload": WORKLOAD, "target_loss": TARGET_LOSS,
              "target_progress": target, "times_s": times, "mean_s": means,
              "best_fixed": best, "mpc_over_best_fixed": means["mpc"] / means[best]}
    if args.json:
        sys.stdout.write(json.dumps(result, indent=1) + "\n")
    else:
        for k, v in times.items():
            sys.stdout.write(f"{k:>12}: " + " ".join(f"{x:8.3f}" for x in v)
                             + f"  mean {means[k]:.3f} s\n")
        sys.stdout.write(f"mpc / best fixed ({best}): {result['mpc_over_best_fixed']:.3f}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
