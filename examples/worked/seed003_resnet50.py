"""Worked example: the seed 003 network schedule, 64 workers, ResNet-50 profile.

Runs dense, fixed top-k at density 0.01, the DC2-style family, MOO, GraVAC-like, the UCB bandit
and the oracle in the simulator on the bundled ``seed003-steps`` trace (latency 1..32..1 ms,
bandwidth 25..1..25 Gbit/s, 12 steps of 30 s, the last step held), then

* plots time per iteration and density over simulated time for every policy
  (``docs/img/worked_seed003.png`` by default), and
* prints, per policy, the simulated time to reach the same training progress (dense-iteration
  equivalents: the ``progress`` column of the convergence model that scores every run; the oracle
  is told the target) and the speed-up over dense
  and over fixed 0.01, plus the mean iteration time during the 360 s schedule.

Two scenarios:

* ``comm-only`` (the plot): compression compute time set to zero (``compress_scale=0``), as in
  seed 003's alpha-beta analysis; it isolates what the controllers do about the network;
* ``calibrated``: the compression costs of the profile's device as they are (``compress_scale=1``;
  ResNet-50 is a GPU profile, so the H100 reference of ``sim/compress/cost_source.py``).

Usage::

    python examples/worked/seed003_resnet50.py                 # table + PNG
    python examples/worked/seed003_resnet50.py --json          # numbers as JSON
    python examples/worked/seed003_resnet50.py --progress 1000 --out /tmp/w.png

Every number printed is measured by this run (deterministic: same seed, same numbers).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

from sim.runner import SimConfig, run_simulation

#: (label, policy, parameters) of the policies compared.
POLICIES: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("dense", "dense", {}),
    ("fixed 0.01", "fixed", {"density": 0.01, "compressor": "topk", "collective": "auto"}),
    ("dc2-aimd", "dc2-aimd", {}),
    ("dc2-vegas", "dc2-vegas", {}),
    ("dc2-pi", "dc2-pi", {}),
    ("dc2-budget", "dc2-budget", {}),
    ("moo", "moo", {}),
    ("gravac", "gravac", {}),
    ("bandit-ucb", "bandit-ucb", {}),
    ("oracle", "oracle", {}),
)
#: Policies drawn in the plot (the bandit's exploration would hide the others; it is in the table).
PLOTTED = ("dense", "fixed 0.01", "dc2-aimd", "dc2-vegas", "dc2-pi", "dc2-budget", "moo", "oracle")
SCHEDULE_S = 360.0  # 12 steps of 30 s
ROOT = Path(__file__).resolve().parents[2]
#: Scenario -> multiplier of the profile device's compression times (SimConfig.compress_scale).
SCENARIOS: dict[str, float] = {"comm-only": 0.0, "calibrated": 1.0}


def run_policy(
    policy: str, params: dict[str, Any], iterations: int, seed: int, compress_scale: float
) -> Any:
    """Simulate one policy on the seed 003 schedule; records with cumulative progress."""
    cfg = SimConfig(
        workload="resnet50",
        workers=64,
        trace="seed003-steps",
        policy=policy,
        policy_params=tuple(params.items()),
        iterations=iterations,
        seed=seed,
        compress_scale=compress_scale,
    )
    records, _ = run_simulation(cfg)
    records["end_s"] = records["start_s"] + records["iter_s"]
    return records


def time_to_progress_s(records: Any, target: float) -> float:
    """Simulated time at which cumulative progress first reaches ``target`` (nan if never)."""
    hit = np.flatnonzero(records["progress"].to_numpy() >= target)
    return float(records["end_s"].iloc[hit[0]]) if hit.size else math.nan


def summarise(results: dict[str, Any], target: float) -> list[dict[str, Any]]:
    """One row per policy: time to ``target`` progress, speed-ups, schedule means."""
    t_dense = time_to_progress_s(results["dense"], target)
    t_fixed = time_to_progress_s(results["fixed 0.01"], target)
    rows = []
    for label, rec in results.items():
        t = time_to_progress_s(rec, target)
        in_sched = rec[rec["start_s"] < SCHEDULE_S]
        rows.append(
            {
                "policy": label,
                "time_to_progress_s": t,
                "speedup_vs_dense": t_dense / t,
                "speedup_vs_fixed": t_fixed / t,
                "mean_iter_s_schedule": float(in_sched["iter_s"].mean()),
                "mean_density_schedule": float(in_sched["density"].mean()),
                "iterations_schedule": int(len(in_sched)),
            }
        )
    return rows


def plot(results: dict[str, Any], path: Path) -> None:
    """Time per iteration and density over simulated time, one line per policy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, 1, figsize=(10, 10), sharex=True)
    link = results["dense"]
    link = link[link["start_s"] < SCHEDULE_S]
    axes[0].step(link["start_s"], link["latency_s"] * 1e3, where="post", color="tab:red")
    axes[0].set_ylabel("latency (ms)", color="tab:red")
    twin = axes[0].twinx()
    twin.step(link["start_s"], link["bandwidth_Bps"] * 8 / 1e9, where="post", color="tab:blue")
    twin.set_ylabel("bandwidth (Gbit/s)", color="tab:blue")
    axes[0].set_title(
        "seed003-steps, 64 workers, ResNet-50 profile (compression compute time excluded)"
    )
    for label, rec in results.items():
        if label not in PLOTTED:
            continue
        rec = rec[rec["start_s"] < SCHEDULE_S]
        # A rolling median keeps the plot readable where policies probe every few steps.
        axes[1].plot(rec["start_s"], rec["iter_s"].rolling(5, min_periods=1).median(),
                     label=label, lw=1.2)
        axes[2].step(rec["start_s"], rec["density"], where="post", label=label, lw=1.2)
    axes[1].set_yscale("log")
    axes[1].set_ylabel("time per iteration (s)")
    axes[2].set_yscale("log")
    axes[2].set_ylabel("density")
    axes[2].set_xlabel("simulated time (s)")
    axes[1].legend(ncol=4, fontsize=8)
    for ax in axes:
        ax.grid(True, which="both", alpha=0.3)
        ax.set_xlim(0.0, SCHEDULE_S)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    """Run the comparison, write the PNG, print the table (or JSON)."""
    parser = argparse.ArgumentParser(
        description="Seed 003 schedule, 64 workers, ResNet-50: compare control policies.",
        epilog="example:\n  python examples/worked/seed003_resnet50.py --json\n",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--progress", type=float, default=1500.0,
                        help="progress target in dense-iteration equivalents (default 1500)")
    parser.add_argument("--seed", type=int, default=0, help="root seed (default 0)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs/img/worked_seed003.png",
                        help="PNG to write (default docs/img/worked_seed003.png)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    if not args.progress > 0:
        parser.error("--progress must be > 0")
    # Generous: every policy here reaches the target well within 3x the dense iterations (a run
    # that does not shows nan).
    iterations = int(math.ceil(3 * args.progress))

    from tqdm import tqdm

    scenarios: dict[str, list[dict[str, Any]]] = {}
    for scenario, compress_scale in SCENARIOS.items():
        results: dict[str, Any] = {}
        bar = tqdm(POLICIES, disable=args.quiet or not sys.stderr.isatty(), file=sys.stderr)
        for label, policy, params in bar:
            bar.set_description(f"{scenario}: {label}")
            if policy in ("oracle", "mpc"):
                params = {**params, "target_progress": float(args.progress)}
            results[label] = run_policy(policy, params, iterations, args.seed, compress_scale)
        scenarios[scenario] = summarise(results, args.progress)
        if scenario == "comm-only":
            plot(results, args.out)
    if args.json:
        sys.stdout.write(json.dumps(scenarios, indent=1) + "\n")
        return 0
    for scenario, rows in scenarios.items():
        sys.stdout.write(
            f"[{scenario}] time to {args.progress:g} dense-equivalent iterations of progress "
            f"(64 workers, resnet50, seed003-steps)\n"
            f"{'policy':<12} {'time (s)':>9} {'vs dense':>9} {'vs fixed':>9} "
            f"{'iter (s)*':>10} {'density*':>9}\n"
        )
        for r in rows:
            sys.stdout.write(
                f"{r['policy']:<12} {r['time_to_progress_s']:9.1f} "
                f"{r['speedup_vs_dense']:8.2f}x {r['speedup_vs_fixed']:8.2f}x "
                f"{r['mean_iter_s_schedule']:10.3f} {r['mean_density_schedule']:9.4f}\n"
            )
        sys.stdout.write("\n")
    sys.stdout.write(f"* means over the {SCHEDULE_S:g} s schedule.  plot (comm-only): {args.out}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
