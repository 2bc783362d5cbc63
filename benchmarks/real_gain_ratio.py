"""How far a real run's measured gain sits from the convergence model's, per density.

Usage: ``python benchmarks/real_gain_ratio.py RUN_DIR [RUN_DIR ...] [--workload digits-mlp]
[--params calibration=real2] [--skip 20] [--json]``.

Every ``RUN_DIR`` holds an ``observations.pkl`` (``compctl real --record-observations``). Each
stream is replayed, open loop, into a fresh ``mpc`` (``--params``: its options, ``k=v:k=v``)
bound to the workload's convergence model, and after every step the controller's gain ratio
(the measured gain over the model's at the density in force, bounded to [0.25, 4]; it scales
every density's gain in the next plan) is read. Reported per density in force: steps, mean
and standard deviation of the log ratio. A ratio that depends on the density means one
measured ratio misprices the other densities of a plan; a wide spread means one step's ratio
moves the whole plan.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path


def ratios_by_density(run_dirs: list[Path], workload: str, params: dict[str, object],
                      skip: int) -> dict[float, list[float]]:
    """Log gain ratios after each step past ``skip``, keyed by the density in force."""
    from sim.control import make_policy
    from sim.control.obs_stream import load_stream
    from sim.control.progress import ProgressModel
    from sim.control.world import controller_seed

    out: dict[float, list[float]] = defaultdict(list)
    for run in run_dirs:
        ctl = make_policy("mpc", **params)
        ctl.reset(seed=controller_seed(1))
        ctl.bind_progress(ProgressModel.for_workload(workload))
        for obs in load_stream(run / "observations.pkl"):
            ctl.decide(obs)
            d = obs.decision
            if d is not None and obs.step > skip and d.density < 1.0:
                out[d.density].append(math.log(ctl._gain_ratio))
    return dict(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="real run directories")
    ap.add_argument("--workload", default="digits-mlp")
    ap.add_argument("--params", default="calibration=real2", help="mpc options, k=v:k=v")
    ap.add_argument("--skip", type=int, default=20, help="steps left out at the start")
    ap.add_argument("--json", action="store_true", help="print JSON rows")
    args = ap.parse_args(argv)
    from sim.control.params import parse_param

    params = dict(parse_param(kv) for kv in args.params.split(":") if kv)
    missing = [str(r) for r in args.runs if not (r / "observations.pkl").is_file()]
    if missing:
        sys.stderr.write(f"error: no observations.pkl in {', '.join(missing)}\n")
        return 2
    by = ratios_by_density(args.runs, args.workload, params, args.skip)
    rows = [{"density": d, "steps": len(v), "log_ratio_mean": statistics.fmean(v),
             "log_ratio_sd": statistics.pstdev(v)} for d, v in sorted(by.items())]
    if args.json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return 0
    for r in rows:
        sys.stdout.write(f"density {r['density']:<6g} steps {r['steps']:5d}  log ratio mean "
                         f"{r['log_ratio_mean']:+.3f} (x{math.exp(r['log_ratio_mean']):.2f})"
                         f"  sd {r['log_ratio_sd']:.3f}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
