"""What the link monitor's estimation error costs `mpc`: time-to-target tables where `mpc` also
ran with the true link handed to it (``mpc:sim_monitor=truth``, ``truth-latency``,
``truth-bandwidth``; :data:`sim.config.TRUTH_MONITORS`), summarised per table.

    python benchmarks/bench_controllers.py --tta [--held-out-N] --json --reuse SET.json \\
        --policies mpc:sim_monitor=truth,mpc:sim_monitor=truth-latency,... > OUT.json
    python benchmarks/tta_truth_split.py OUT1.json OUT2.json ... [--csv FILE] [--json]

Per table and per variant: scenarios within 5% of the oracle, at least as fast as the best
fixed density in hindsight, and more than 5% behind it (the issue's three counts); ``--csv``
writes one row per scenario with every time and ratio (tidy, for pandas). The variants that saw
the true link are diagnostics: no real controller can, and the table's summary
(:func:`tta_table.summarise`) never counts them as adaptive policies.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path
from typing import Any

from compctl_base.atomic_files import atomic_open

_TOL = 1e-9
#: The variants compared, as the table keys them (those absent from a file are skipped).
VARIANTS = ("mpc", "mpc:sim_monitor=truth", "mpc:sim_monitor=truth-latency",
            "mpc:sim_monitor=truth-bandwidth", "mpc:sim_monitor=truth-ahead")


#: The three counts, in the order they are printed.
COUNTS = ("within_5pct_of_oracle", "at_least_best_fixed", "more_than_5pct_behind_best_fixed")


def counts(rows: list[dict[str, Any]], policy: str) -> dict[str, int]:
    """The three counts (:data:`COUNTS`) of ``policy`` over a table's scenario rows."""
    out = dict.fromkeys(COUNTS, 0)
    for r in rows:
        t = r["policies"][policy]
        oracle = r["policies"]["oracle"]
        fixed = min(r["fixed"].values())
        out["within_5pct_of_oracle"] += t <= 1.05 * oracle
        out["at_least_best_fixed"] += t <= fixed * (1.0 + _TOL)
        out["more_than_5pct_behind_best_fixed"] += t > 1.05 * fixed
    return out


def tidy_rows(name: str, rows: list[dict[str, Any]], variants: list[str]
              ) -> list[dict[str, Any]]:
    """One flat row per scenario: the table's name, the cell, the oracle's, the best fixed
    density's and every variant's seconds to target and ratio to the oracle."""
    out = []
    for r in rows:
        oracle = r["policies"]["oracle"]
        best_d = min(r["fixed"], key=lambda d: (r["fixed"][d], -float(d)))
        row: dict[str, Any] = {"table": name, "trace": r["trace"], "workload": r["workload"],
                               "workers": r["workers"], "class": r["class"],
                               "oracle_s": oracle, "best_fixed_density": float(best_d),
                               "best_fixed_s": r["fixed"][best_d]}
        for v in variants:
            key = v.replace("mpc:sim_monitor=", "mpc_").replace("-", "_")
            row[f"{key}_s"] = r["policies"][v]
            row[f"{key}_vs_oracle"] = r["policies"][v] / oracle
        out.append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    """Print the per-table counts and their sums over the tables (``all``; ``--json``: as
    JSON) and optionally write the tidy CSV."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("tables", nargs="+", help="bench_controllers.py --tta --json outputs")
    parser.add_argument("--csv", metavar="FILE", help="write one row per scenario here")
    parser.add_argument("--json", action="store_true", help="print the counts as JSON")
    args = parser.parse_args(argv)
    summary: dict[str, dict[str, dict[str, int]]] = {}
    tidy: list[dict[str, Any]] = []
    try:
        for path in args.tables:
            rows = json.loads(Path(path).read_text())["scenarios"]
            if not rows:
                raise ValueError(f"{path}: no scenarios")
            variants = [v for v in VARIANTS if v in rows[0]["policies"]]
            if "mpc" not in variants or "oracle" not in rows[0]["policies"]:
                raise ValueError(f"{path}: needs the oracle's and mpc's times")
            name = Path(path).stem
            summary[name] = {v: counts(rows, v) for v in variants}
            tidy.extend(tidy_rows(name, rows, variants))
    except (OSError, ValueError, KeyError) as exc:
        sys.stderr.write(f"tta_truth_split: {exc}\n")
        return 2
    if len(summary) > 1:  # every table together (variants run on every table)
        common = [v for v in VARIANTS if all(v in by for by in summary.values())]
        summary["all"] = {v: {k: sum(by[v][k] for by in summary.values()) for k in COUNTS}
                          for v in common}
    if args.csv:
        fields = list(dict.fromkeys(k for r in tidy for k in r))  # first-seen order
        with atomic_open(args.csv) as fh:
            w = csv.DictWriter(fh, fieldnames=fields)
            w.writeheader()
            w.writerows(tidy)
    if args.json:
        sys.stdout.write(json.dumps(summary, indent=1) + "\n")
        return 0
    sys.stdout.write("table        variant                          within 5% of oracle / "
                     ">= best fixed / > 5% behind it\n")
    for name, by in summary.items():
        for v, c in by.items():
            sys.stdout.write(f"{name:12s} {v:32s} {c['within_5pct_of_oracle']:3d} / "
                             f"{c['at_least_best_fixed']:3d} / "
                             f"{c['more_than_5pct_behind_best_fixed']:2d}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
