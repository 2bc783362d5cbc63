"""Real-vs-real noise floor of the netns validation: two separate runs of the same case.

Usage: ``python benchmarks/netns_noise_floor.py DIR_A DIR_B [--json]``, where both directories
were written by ``bench_netns_validation.py --keep DIR`` (same ranks, traces, policies, seeds).

For every validated case found in both (``n<ranks>-val-<policy>-<trace>``), run A is taken as the
"prediction" of run B and compared iteration by iteration exactly as ``compctl validate``
compares a simulated run with a real one (the same first iterations skipped, the same MAPE),
and the other way round; and **by time**: each iteration of B predicted by the iteration of A that
started nearest to it on the trace clock (``start_s``), the real-vs-real analogue of
``--align-trace`` (on a stepped trace two free-running runs are soon at different link states
for the same iteration index, an error the aligned simulated side does not have). No model can
be expected to predict a run better than another run of
the same configuration predicts it, so this MAPE is the bar's reachable floor on the machine the
runs were measured on. Also given: each run's constant floor (the least MAPE of any constant
prediction, :func:`analysis.validate_replay.constant_floor_mape`) and the two runs' mean
iteration times and densities.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analysis.validate import compare
from analysis.validate_replay import constant_floor_mape
from sim.rundir import read_run

SKIP = 3  # the iterations compare() leaves out by default (the hook's warm-up and start-up)
_CASE = re.compile(r"^n(\d+)-val-(.+)-(constant|stepped)$")


def cases(a: Path, b: Path) -> list[str]:
    """Validated-run directory names present (with records) in both ``a`` and ``b``."""
    names = {p.name for p in a.iterdir() if _CASE.match(p.name) and (p / "meta.json").is_file()}
    return sorted(n for n in names if (b / n / "meta.json").is_file())


def time_matched_mape(real: pd.DataFrame, pred: pd.DataFrame, skip: int = SKIP) -> float:
    """MAPE of ``real``'s iteration times (from ``skip`` on), each predicted by the iteration
    of ``pred`` (from ``skip`` on) whose start on the trace clock is nearest to its own."""
    r = real[real["iteration"] >= skip]
    p = pred[pred["iteration"] >= skip].sort_values("start_s")
    ps, pt = p["start_s"].to_numpy(float), p["iter_s"].to_numpy(float)
    rs, rt = r["start_s"].to_numpy(float), r["iter_s"].to_numpy(float)
    k = np.clip(np.searchsorted(ps, rs), 1, len(ps) - 1)
    nearest = np.where(np.abs(ps[k - 1] - rs) <= np.abs(ps[k] - rs), k - 1, k)
    return float(np.mean(np.abs(pt[nearest] - rt) / rt))


def pair_floor(a: Path, b: Path) -> dict[str, Any]:
    """Run ``a`` against run ``b`` of one case, both directions."""
    ra, meta_a = read_run(a)
    rb, meta_b = read_run(b)
    if meta_a.get("config", {}).get("trace") != meta_b.get("config", {}).get("trace"):
        raise SystemExit(f"{a.name}: the two runs used different traces")
    ab = compare(rb, ra, skip=SKIP)  # B measured, A as its prediction
    ba = compare(ra, rb, skip=SKIP)
    sa, sb = ra[ra["iteration"] >= SKIP], rb[rb["iteration"] >= SKIP]
    m = _CASE.match(a.name)
    assert m is not None
    return {"case": a.name, "ranks": int(m.group(1)), "policy": m.group(2),
            "trace": m.group(3), "n": ab.n,
            "mape_iter_b_by_a": ab.mape_iter, "mape_iter_a_by_b": ba.mape_iter,
            "mape_iter": 0.5 * (ab.mape_iter + ba.mape_iter),
            "mdape_iter": 0.5 * (ab.mdape_iter + ba.mdape_iter),
            "mape_comm": 0.5 * (ab.mape_comm + ba.mape_comm),
            "mape_iter_by_time": 0.5 * (time_matched_mape(rb, ra) + time_matched_mape(ra, rb)),
            "mean_iter_s": [float(sa["iter_s"].mean()), float(sb["iter_s"].mean())],
            "mean_density": [float(sa["density"].mean()), float(sb["density"].mean())],
            "constant_floor": [constant_floor_mape(sa["iter_s"].to_numpy(float)),
                               constant_floor_mape(sb["iter_s"].to_numpy(float))]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    a, b = Path(args.a), Path(args.b)
    for d in (a, b):
        if not d.is_dir():
            sys.stderr.write(f"error: {d} is not a directory\n")
            return 2
    names = cases(a, b)
    if not names:
        sys.stderr.write("error: no validated run present in both directories\n")
        return 2
    rows = [pair_floor(a / n, b / n) for n in names]
    if args.json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return 0
    for r in rows:
        sys.stdout.write(
            f"{r['ranks']} ranks {r['policy']:<15} {r['trace']:<9} real vs real MAPE iter "
            f"{r['mape_iter']:6.1%} (B by A {r['mape_iter_b_by_a']:5.1%}, A by B "
            f"{r['mape_iter_a_by_b']:5.1%}; median {r['mdape_iter']:5.1%}; by time "
            f"{r['mape_iter_by_time']:6.1%})  comm "
            f"{r['mape_comm']:6.1%}  mean iter {r['mean_iter_s'][0] * 1e3:6.2f}/"
            f"{r['mean_iter_s'][1] * 1e3:6.2f} ms  density {r['mean_density'][0]:.3f}/"
            f"{r['mean_density'][1]:.3f}  constant floor {r['constant_floor'][0]:5.1%}/"
            f"{r['constant_floor'][1]:5.1%}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
