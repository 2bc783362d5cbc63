"""How far a real run's measured gain sits from the convergence model's, per density.

Usage: ``python benchmarks/real_gain_ratio.py RUN_DIR [RUN_DIR ...] [--workload digits-mlp]
[--params calibration=real2] [--skip 20] [--since-switch] [--records] [--json]``.

Every ``RUN_DIR`` holds an ``observations.pkl`` (``compctl real --record-observations``). Each
stream is replayed, open loop, into a fresh ``mpc`` (``--params``: its options, ``k=v:k=v``)
bound to the workload's convergence model, and after every step the controller's gain ratio
(the measured gain over the model's at the density in force, bounded to [0.25, 4]; it scales
every density's gain in the next plan) is read. Reported per density in force: steps, mean
and standard deviation of the log ratio. A ratio that depends on the density means one
measured ratio misprices the other densities of a plan; a wide spread means one step's ratio
moves the whole plan.

``--since-switch`` splits every density's rows by the steps its run had lasted (0 at the step a
switch made; bins 0, 1, 2, 3-4, 5-8, 9-16, 17-32, 33+): a switch's transient (an error-feedback
residual released or built up) shows as a ratio that drifts with them. ``--records`` reads each
run's ``records.parquet`` instead (its ``density``, ``iteration`` and measured ``gain``
columns, against the same model under ``--params``' ``calibration``), so runs recorded without
observations, such as a fixed density's, are measured the same way.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

#: Upper ends of the ``--since-switch`` bins (steps the density's run had lasted).
SINCE_BINS = ((0, "0"), (1, "1"), (2, "2"), (4, "3-4"), (8, "5-8"), (16, "9-16"),
              (32, "17-32"))
#: Every bin's name in order, the open last one included.
BIN_NAMES = tuple(name for _, name in SINCE_BINS) + ("33+",)


def since_bin(steps: int) -> str:
    """The ``--since-switch`` bin of a run that had lasted ``steps`` steps."""
    for top, name in SINCE_BINS:
        if steps <= top:
            return name
    return BIN_NAMES[-1]


def _bounded_log(gain: float, model_gain: float) -> float:
    """Log of the measured over the model's gain, bounded to [0.25, 4] as ``mpc`` bounds it."""
    return math.log(min(4.0, max(0.25, gain / model_gain)))


def ratios_from_records(run_dirs: list[Path], workload: str, calibration: str, skip: int,
                        by_since: bool) -> dict[tuple[float, str], list[float]]:
    """Log gain ratios of every compressed step past ``skip`` in each run's records, keyed by
    the density (and the ``--since-switch`` bin, else ``""``)."""
    import pandas as pd

    from sim.control.progress import ProgressModel

    pm = ProgressModel.for_workload(workload)
    if calibration:
        pm = pm.recalibrated(calibration)
    out: dict[tuple[float, str], list[float]] = defaultdict(list)
    for run in run_dirs:
        df = pd.read_parquet(run / "records.parquet",
                             columns=["iteration", "density", "compressor", "gain"])
        on, since = math.nan, 0
        for it, dens, comp, gain in zip(df["iteration"], df["density"], df["compressor"],
                                         df["gain"], strict=True):
            dens = float(dens)
            since = since + 1 if dens == on else 0
            on = dens
            if it > skip and dens < 1.0 and gain == gain and gain > 0.0:
                key = (dens, since_bin(since) if by_since else "")
                out[key].append(_bounded_log(float(gain), pm.gain(str(comp), dens, int(it))))
    return dict(out)


def ratios_by_density(run_dirs: list[Path], workload: str, params: dict[str, object],
                      skip: int, by_since: bool = False
                      ) -> dict[tuple[float, str], list[float]]:
    """Log gain ratios after each step past ``skip``, keyed by the density in force (and the
    ``--since-switch`` bin of its run, else ``""``)."""
    from sim.control import make_policy
    from sim.control.obs_stream import load_stream
    from sim.control.progress import ProgressModel
    from sim.control.world import controller_seed

    out: dict[tuple[float, str], list[float]] = defaultdict(list)
    for run in run_dirs:
        ctl = make_policy("mpc", **params)
        ctl.reset(seed=controller_seed(1))
        ctl.bind_progress(ProgressModel.for_workload(workload))
        on, since = math.nan, 0
        for obs in load_stream(run / "observations.pkl"):
            ctl.decide(obs)
            d = obs.decision
            if d is None:
                continue
            since = since + 1 if d.density == on else 0
            on = d.density
            if obs.step > skip and d.density < 1.0:
                key = (d.density, since_bin(since) if by_since else "")
                out[key].append(math.log(ctl._gain_ratio))
    return dict(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="real run directories")
    ap.add_argument("--workload", default="digits-mlp")
    ap.add_argument("--params", default="calibration=real2", help="mpc options, k=v:k=v")
    ap.add_argument("--skip", type=int, default=20, help="steps left out at the start")
    ap.add_argument("--since-switch", action="store_true",
                    help="split each density by the steps its run had lasted")
    ap.add_argument("--records", action="store_true",
                    help="read records.parquet (measured gain per iteration) instead of a replay")
    ap.add_argument("--json", action="store_true", help="print JSON rows")
    args = ap.parse_args(argv)
    from sim.control.params import parse_param

    params = dict(parse_param(kv) for kv in args.params.split(":") if kv)
    need = "records.parquet" if args.records else "observations.pkl"
    missing = [str(r) for r in args.runs if not (r / need).is_file()]
    if missing:
        sys.stderr.write(f"error: no {need} in {', '.join(missing)}\n")
        return 2
    if args.records:
        by = ratios_from_records(args.runs, args.workload, str(params.get("calibration", "")),
                                 args.skip, args.since_switch)
    else:
        by = ratios_by_density(args.runs, args.workload, params, args.skip, args.since_switch)
    order = {name: i for i, name in enumerate(BIN_NAMES)}
    rows = []
    for (d, since), v in sorted(by.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], -1))):
        row: dict[str, Any] = {"density": d}
        if args.since_switch:
            row["since_switch"] = since
        rows.append(row | {"steps": len(v), "log_ratio_mean": statistics.fmean(v),
                           "log_ratio_sd": statistics.pstdev(v)})
    if args.json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return 0
    for r in rows:
        since = f" since {r['since_switch']:>5}" if args.since_switch else ""
        sys.stdout.write(f"density {r['density']:<6g}{since} steps {r['steps']:5d}  log ratio mean "
                         f"{r['log_ratio_mean']:+.3f} (x{math.exp(r['log_ratio_mean']):.2f})"
                         f"  sd {r['log_ratio_sd']:.3f}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
