"""What foresight is worth: the oracle's planner with and without the future trace.

    python benchmarks/tta_foresight.py SCENARIOS.csv.gz [--misses] [--sample N] [--seed S] \\
        [--jobs 2] [--checkpoint FILE.jsonl] [--csv OUT.csv] [--json]

``SCENARIOS.csv.gz`` is the per-scenario table of the perfect-monitor runs
(``benchmarks/tta_truth_split.py --csv``: trace, workload, workers, the oracle's, the best
fixed density's, ``mpc``'s and ``mpc`` with the true link's times to target). For each chosen
scenario this simulates ``oracle:foresight=none`` (:mod:`sim.control.policies.oracle_myopic`:
the oracle's planner and the scoring model, the present link exactly, no future) and reports,
per scenario, its time next to the others; then the counts: within 5% of the oracle, faster than
the oracle, and where ``mpc`` with the true link is more than 5% behind the oracle, whether the
planner without foresight is too (the future is what is missing) or not (``mpc``'s own
approximations are).

``--misses`` picks the scenarios where ``mpc`` or ``mpc`` with the true link is more than 5%
behind the oracle; ``--sample N`` adds N others drawn at random (``--seed``) as a control.
``--checkpoint`` appends each finished scenario to a JSON-lines file and takes finished ones
from it on a re-run (an interrupted run resumes). Simulated, deterministic: the same input
gives the same bytes of output.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

import tta_table as tt  # noqa: E402

from compctl_base.atomic_files import atomic_open  # noqa: E402

#: The diagnostic's policy spec, as the time-to-target tables name it.
SPEC = "oracle:foresight=none"
#: A scenario is behind when its time is more than this ratio of the reference's.
BEHIND = 1.05
KEY = ("table", "trace", "workload", "workers")
COLUMNS = (*KEY, "class", "oracle_s", "best_fixed_s", "mpc_s", "mpc_truth_s", "myopic_s",
           "myopic_vs_oracle", "mpc_vs_oracle", "mpc_truth_vs_oracle", "mpc_truth_vs_myopic")


def choose(table: pd.DataFrame, misses: bool, sample: int, seed: int) -> pd.DataFrame:
    """The scenarios to run: the misses (``mpc`` or ``mpc`` with the true link more than 5%
    behind the oracle) when ``misses``, plus ``sample`` others drawn with ``seed``; every
    scenario when neither is asked for."""
    if not misses and sample <= 0:
        return table
    limit = BEHIND * table["oracle_s"]
    behind = (table["mpc_s"] > limit) | (table["mpc_truth_s"] > limit)
    picked = table[behind] if misses else table.iloc[:0]
    rest = table[~behind] if misses else table
    if sample > 0:
        picked = pd.concat([picked, rest.sample(n=min(sample, len(rest)), random_state=seed)])
    return picked.sort_index()


def simulate(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with the diagnostic's time to target (``myopic_s``) and the ratios."""
    target = tt.target_progress(row["workload"])
    name, options = tt.policy_spec(SPEC)
    rec = tt._run(row["trace"], row["workload"], int(row["workers"]), name,
                  int(6 * target), (("target_progress", target), *options))
    out = {k: row[k] for k in COLUMNS if k in row}
    out["myopic_s"] = tt.tta_s(rec, target)
    return ratios(out)


def ratios(r: dict[str, Any]) -> dict[str, Any]:
    """The ratio columns of one result row (``inf`` where a time is)."""
    o, m = float(r["oracle_s"]), float(r["myopic_s"])
    r["myopic_vs_oracle"] = m / o
    r["mpc_vs_oracle"] = float(r["mpc_s"]) / o
    r["mpc_truth_vs_oracle"] = float(r["mpc_truth_s"]) / o
    r["mpc_truth_vs_myopic"] = float(r["mpc_truth_s"]) / m if m > 0 else math.inf
    return r


def _key(r: dict[str, Any]) -> tuple[str, str, str, int]:
    return (str(r["table"]), str(r["trace"]), str(r["workload"]), int(r["workers"]))


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The counts the module docstring names, over ``rows``."""
    truth_behind = [r for r in rows if r["mpc_truth_vs_oracle"] > BEHIND]
    return {
        "scenarios": len(rows),
        "myopic_within_5pct_of_oracle": sum(r["myopic_vs_oracle"] <= BEHIND for r in rows),
        "myopic_faster_than_oracle": sum(r["myopic_vs_oracle"] < 1.0 - 1e-9 for r in rows),
        "mpc_truth_behind_oracle": len(truth_behind),
        "of_those_myopic_behind_too": sum(r["myopic_vs_oracle"] > BEHIND for r in truth_behind),
        "of_those_mpc_truth_behind_myopic": sum(
            r["mpc_truth_vs_myopic"] > BEHIND for r in truth_behind
        ),
        "mpc_truth_within_5pct_of_myopic": sum(r["mpc_truth_vs_myopic"] <= BEHIND for r in rows),
        "mpc_within_5pct_of_min_oracle_myopic": sum(
            r["mpc_s"] <= BEHIND * min(r["oracle_s"], r["myopic_s"]) for r in rows
        ),
        "geomean_myopic_vs_oracle": _geomean([r["myopic_vs_oracle"] for r in rows]),
        "worst_myopic_vs_oracle": max((r["myopic_vs_oracle"] for r in rows), default=math.nan),
        "best_myopic_vs_oracle": min((r["myopic_vs_oracle"] for r in rows), default=math.nan),
    }


def _geomean(xs: list[float]) -> float:
    xs = [x for x in xs if math.isfinite(x) and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else math.nan


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scenarios", help="per-scenario CSV of the perfect-monitor runs")
    ap.add_argument("--misses", action="store_true",
                    help="only scenarios where mpc or mpc with the true link is > 5%% behind "
                    "the oracle")
    ap.add_argument("--sample", type=int, default=0, help="add N other scenarios at random")
    ap.add_argument("--seed", type=int, default=0, help="seed of --sample (default 0)")
    ap.add_argument("--jobs", type=int, default=1, help="processes (default 1)")
    ap.add_argument("--checkpoint", default=None, help="JSON-lines file of finished scenarios")
    ap.add_argument("--csv", default=None, help="write one row per scenario here")
    ap.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = ap.parse_args(argv)
    path = Path(args.scenarios)
    if not path.is_file():
        sys.stderr.write(f"tta_foresight: no such file: {path}\n")
        return 2
    table = pd.read_csv(path)
    missing = [c for c in (*KEY, "class", "oracle_s", "best_fixed_s", "mpc_s", "mpc_truth_s")
               if c not in table]
    if missing:
        sys.stderr.write(f"tta_foresight: {path} lacks column(s) {', '.join(missing)}\n")
        return 2
    todo = [dict(r) for r in choose(table, args.misses, args.sample, args.seed).to_dict("records")]
    done: dict[tuple[str, str, str, int], dict[str, Any]] = {}
    ck = Path(args.checkpoint) if args.checkpoint else None
    if ck is not None and ck.is_file():
        for line in ck.read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                done[_key(r)] = r
    pending = [r for r in todo if _key(r) not in done]
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for n, r in enumerate(pool.map(simulate, pending), 1):
            done[_key(r)] = r
            if ck is not None:
                with ck.open("a") as f:
                    f.write(json.dumps(r) + "\n")
            sys.stderr.write(f"\r{n}/{len(pending)} scenarios")
    if pending:
        sys.stderr.write("\n")
    rows = [done[_key(r)] for r in todo]
    if args.csv:
        with atomic_open(Path(args.csv), "w") as f:
            w = csv.DictWriter(f, fieldnames=list(COLUMNS), lineterminator="\n")
            w.writeheader()
            for r in rows:
                w.writerow({k: r[k] for k in COLUMNS})
    summ = summary(rows)
    if args.json:
        sys.stdout.write(json.dumps(summ, indent=1) + "\n")
    else:
        for k, v in summ.items():
            sys.stdout.write(f"{k:<40} {v:.4f}\n" if isinstance(v, float) else f"{k:<40} {v}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
