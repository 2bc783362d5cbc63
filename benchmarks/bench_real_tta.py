"""Real 2-rank time to target: adaptive policies against fixed densities over a stepped trace.

Usage: ``python benchmarks/bench_real_tta.py [--seeds 1,2,3] [--repeats 1]
[--densities 0.1,0.03,0.01,0.005,0.003,0.002,0.001] [--policies mpc] [--trace SPEC]
[--emulation hook|netns] [--steps 400] [--target-loss 1.5] [--latency-pings N] [--pin-cores]
[--keep DIR [--record-observations]] [--json]`` (``netns`` needs root).

Each run is ``compctl real --workload digits-mlp --nproc 2`` (CPU, gloo) under ``--trace``. The
default trace (:data:`TRACE`) loops 0.25 s at 10 Mbit/s and 0.25 s at 0.5 Mbit/s (1 ms latency,
run seconds): a compressed run reaches the target in about 0.5-1.5 s, so it crosses several
steps. (The first version of this benchmark used 4 s steps, :data:`TRACE_4S`: every compressed
run ended inside the first 10 Mbit/s phase, so only the dense run saw a step.) With ``--emulation
hook`` the hook tops each collective up to the trace's alpha-beta time; with ``netns`` the ranks
talk real TCP through tbf-shaped veth pairs following the trace (the hook adds only the latency).

The target is a training loss of ``TARGET_LOSS`` (1.5): a run's time to target is the end of the
first iteration at which the mean training loss of the last ``SMOOTH`` (10) iterations reaches
it, on the run's own clock (``start_s + iter_s``). ``mpc`` is told the convergence model's
progress for that loss (``target_progress``), as in the simulator table. A policy is a name with
optional ``:key=value`` parameters (``mpc:probe_every=0``). Runs go round by round, seed by
seed, every policy of a seed in turn, so load drift on a shared machine hits all of them; with
``--repeats R`` every (policy, seed) runs R times and its time is the mean of its repeats.
``--latency-pings N`` runs the adaptive policies with ``compctl real --latency-pings N`` (the
hook measures the link's latency before the first controlled step, for the monitor); the fixed
densities, whose decisions read no observation, run without. A policy entry's ``decision_lag=1``
is not a policy parameter: it runs that entry with ``compctl real --decision-lag 1`` (each
decision computed a step ahead, in the network wait). ``--target-loss`` moves the target (a
lower loss: a longer run, less timing noise per second of it); ``mpc`` is told the model's
progress for it. Reported per policy: each seed's
time to target and the mean over seeds; the best fixed density
is the one with the least mean (chosen in hindsight on these very runs); per policy, the mean
decision seconds per iteration up to the target (the records' ``decide_s``, the part not
hidden in network waits) and the machine's 1-minute load at each run's start (min and max).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

TRACE = "steps:dur_s=0.25/0.25,lat_ms=1/1,bw_gbps=0.01/0.0005,loop=true"
TRACE_4S = "steps:dur_s=4/4,lat_ms=1/1,bw_gbps=0.01/0.0005,loop=true"
WORKLOAD = "digits-mlp"
TARGET_LOSS = 1.5
SMOOTH = 10
DENSITIES = "0.1,0.03,0.01,0.005,0.003,0.002,0.001"


def _target_index(records: Any, target_loss: float) -> int | None:
    """The first iteration whose trailing mean training loss reaches ``target_loss``."""
    loss = records["loss"].rolling(SMOOTH, min_periods=SMOOTH).mean().to_numpy()
    for i, v in enumerate(loss):
        if v <= target_loss:
            return i
    return None


def time_to_target_s(records: Any, target_loss: float = TARGET_LOSS) -> float:
    """End of the first iteration whose trailing mean training loss reaches ``target_loss``
    (inf if none)."""
    i = _target_index(records, target_loss)
    if i is None:
        return math.inf
    return float(records["start_s"].iloc[i] + records["iter_s"].iloc[i])


def exposed_decide_s(records: Any, target_loss: float = TARGET_LOSS) -> float:
    """Mean decision seconds per iteration on the critical path up to the target (``decide_s``
    less ``decide_hidden_s``; NaN when the records have no ``decide_s``)."""
    if "decide_s" not in records:
        return math.nan
    i = _target_index(records, target_loss)
    part = records.iloc[: (len(records) if i is None else i + 1)]
    hidden = part["decide_hidden_s"] if "decide_hidden_s" in part else 0.0
    return float((part["decide_s"] - hidden).mean())


def _run(policy: str, params: list[str], seed: int, args: argparse.Namespace, out: Path
         ) -> tuple[float, float]:
    """(time to target, exposed decision seconds per iteration) of one run."""
    import pandas as pd

    cmd = [sys.executable, "-m", "sim.entry", "real", "--workload", WORKLOAD, "--nproc", "2",
           "--policy", policy, "--trace", args.trace, "--steps", str(args.steps),
           "--seed", str(seed), "--emulation", args.emulation, "--out", str(out), "--quiet",
           "--force"]
    if args.pin_cores:
        cmd.append("--pin-cores")
    if policy != "fixed" and args.latency_pings:
        cmd += ["--latency-pings", str(args.latency_pings)]
    if policy != "fixed" and args.record_observations:
        cmd.append("--record-observations")
    for p in params:
        if p.startswith("decision_lag="):
            cmd += ["--decision-lag", p.split("=", 1)[1]]
        else:
            cmd += ["--param", p]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    records = pd.read_parquet(out / "records.parquet")
    return (time_to_target_s(records, args.target_loss),
            exposed_decide_s(records, args.target_loss))


def _policies(spec: str, target: float) -> dict[str, tuple[str, list[str]]]:
    """``name[:k=v[:k=v]]`` entries; ``mpc`` gets ``target_progress`` unless given."""
    out: dict[str, tuple[str, list[str]]] = {}
    for entry in (e for e in spec.split(",") if e):
        name, *params = entry.split(":")
        if name == "mpc" and not any(p.startswith("target_progress=") for p in params):
            params.append(f"target_progress={target:.3f}")
        out[entry] = (name, params)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--repeats", type=int, default=1, help="runs per (policy, seed)")
    parser.add_argument("--densities", default=DENSITIES)
    parser.add_argument("--policies", default="mpc", help="adaptive policies, comma-separated")
    parser.add_argument("--trace", default=TRACE)
    parser.add_argument("--emulation", default="hook", choices=("hook", "netns"))
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--target-loss", type=float, default=TARGET_LOSS)
    parser.add_argument("--pin-cores", action="store_true",
                        help="run every rank pinned to a core (compctl real --pin-cores)")
    parser.add_argument("--latency-pings", type=int, default=0,
                        help="latency pings for the adaptive policies' runs (default 0: none)")
    parser.add_argument("--keep", type=Path, help="keep every run's output under this folder")
    parser.add_argument("--record-observations", action="store_true",
                        help="the adaptive policies' runs record rank 0's observation stream "
                        "(compctl real --record-observations; with --keep, for "
                        "bench_mpc_plan.py --stream)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    from sim.convergence import ConvergenceModel

    target = ConvergenceModel.bundled(WORKLOAD).dense_iterations_to(args.target_loss, "loss")
    assert target is not None
    runs: dict[str, tuple[str, list[str]]] = {}
    for d in (float(x) for x in args.densities.split(",") if x):
        comp = "none" if d >= 1.0 else "topk"
        runs[f"fixed {d:g}"] = ("fixed", [f"density={d}", f"compressor={comp}",
                                           "collective=auto"])
    runs.update(_policies(args.policies, target))
    seeds = [int(s) for s in args.seeds.split(",")]
    each: dict[str, dict[int, list[float]]] = {k: {s: [] for s in seeds} for k in runs}
    decide: dict[str, list[float]] = {k: [] for k in runs}
    load: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep if args.keep is not None else Path(tmp)
        for rep in range(args.repeats):
            for seed in seeds:
                for name, (policy, params) in runs.items():
                    tag = name.replace(" ", "_").replace(":", "_").replace("=", "")
                    out = root / f"{tag}_s{seed}_r{rep}"
                    load.append(os.getloadavg()[0])
                    t, dec = _run(policy, params, seed, args, out)
                    each[name][seed].append(t)
                    decide[name].append(dec)
                    print(f"round {rep} seed {seed} {name}: {t:.3f} s", file=sys.stderr)
    times = {k: [statistics.fmean(v[s]) for s in seeds] for k, v in each.items()}
    means = {k: statistics.fmean(v) for k, v in times.items()}
    fixed = {k: v for k, v in means.items() if k.startswith("fixed")}
    best = min(fixed, key=lambda k: fixed[k])
    adaptive = [k for k in runs if not k.startswith("fixed")]
    result = {"trace": args.trace, "emulation": args.emulation, "workload": WORKLOAD,
              "target_loss": args.target_loss, "target_progress": target, "seeds": seeds,
              "steps": args.steps, "pin_cores": args.pin_cores,
              "load_1min": [min(load), max(load)],
              "exposed_decide_s": {k: statistics.fmean(v) for k, v in decide.items()},
              "latency_pings": args.latency_pings,
              "repeats": args.repeats, "runs_s": each, "times_s": times, "mean_s": means,
              "best_fixed": best,
              "over_best_fixed": {k: means[k] / means[best] for k in adaptive}}
    if args.json:
        sys.stdout.write(json.dumps(result, indent=1) + "\n")
    else:
        for k, v in times.items():
            sys.stdout.write(f"{k:>24}: " + " ".join(f"{x:8.3f}" for x in v)
                             + f"  mean {means[k]:.3f} s\n")
        for k in adaptive:
            sys.stdout.write(f"{k} / best fixed ({best}): {means[k] / means[best]:.3f}\n")
        sys.stdout.write(f"1-minute load {min(load):.1f}-{max(load):.1f}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
