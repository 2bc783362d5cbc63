"""What the oracle's ``schedule=best`` costs and gains against its windowed schedule alone
(``schedule=piecewise``), measured in the same run.

``schedule=best`` plans the windowed schedule, then replays the planner that re-plans on the
present link at every change (:func:`sim.control.policies.oracle_myopic.time_without_foresight`)
on the true future, and follows the faster. The replay is the extra cost; where it wins, the
run takes the replay's recorded decisions (nothing is planned twice).

Cases: time-to-target table scenarios (analytic fidelity, the table's target and grid), chosen
for what they exercise: a constant link (no change points), a bundled step schedule, and random
walks of the held-out sets at 8, 64 and 1,024 workers (where re-planning beats the windows).
Per case: wall seconds of each simulation (``--repeat`` calls each, the median), their ratio,
each one's time to target, and the schedule ``best`` followed.

Usage::

    python benchmarks/bench_oracle_schedule.py [--repeat N] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

import tta_table as tt

from sim.control.policies.oracle import OraclePolicy

#: (trace, workload, workers): the cases (module docstring).
CASES = (
    ("const:lat_ms=2,bw_gbps=1", "resnet50", 64),
    ("seed003-steps", "resnet50", 64),
    ("walk:seed=10602,lat_ms=4,bw_gbps=3,bandwidth_sigma=0.35,lat_sigma_ms=1,"
     "min_latency_ms=1,dt_s=0.8,duration_s=1800", "bert-base", 8),
    ("walk:seed=10603,lat_ms=20,bw_gbps=0.3,bandwidth_sigma=0.15,lat_sigma_ms=5,"
     "min_latency_ms=10,dt_s=3,duration_s=1800", "bert-base", 64),
    ("walk:seed=10602,lat_ms=4,bw_gbps=3,bandwidth_sigma=0.35,lat_sigma_ms=1,"
     "min_latency_ms=1,dt_s=0.8,duration_s=1800", "lstm-ptb", 1024),
)


def _one(trace: str, workload: str, workers: int, schedule: str
         ) -> tuple[float, float, str | None]:
    """Wall seconds, time to target and the schedule followed, for one oracle run."""
    followed: list[str | None] = []
    decide = OraclePolicy.decide

    def spy(self: OraclePolicy, obs: Any) -> Any:
        out = decide(self, obs)
        if not followed:
            followed.append(self.followed)
        return out

    OraclePolicy.decide = spy  # type: ignore[method-assign]
    try:
        target = tt.target_progress(workload)
        t0 = time.perf_counter()
        rec = tt._run(trace, workload, workers, "oracle", int(6 * target),
                      (("target_progress", target), ("schedule", schedule)))
        tta = tt.tta_s(rec, target)
        wall = time.perf_counter() - t0
    finally:
        OraclePolicy.decide = decide  # type: ignore[method-assign]
    return wall, tta, followed[0] if followed else None


def main(argv: list[str] | None = None) -> int:
    """Run every case both ways and print the table (``--json``: the rows)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--repeat", type=int, default=1, help="calls per case and schedule")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(argv)
    rows = []
    for trace, workload, workers in CASES:
        row: dict[str, Any] = {"trace": trace, "workload": workload, "workers": workers}
        for schedule in ("piecewise", "best"):
            runs = [_one(trace, workload, workers, schedule) for _ in range(max(1, args.repeat))]
            row[f"{schedule}_wall_s"] = statistics.median(r[0] for r in runs)
            row[f"{schedule}_tta_s"] = runs[0][1]
            if schedule == "best":
                row["followed"] = runs[0][2]
        row["cost_ratio"] = row["best_wall_s"] / row["piecewise_wall_s"]
        row["tta_ratio"] = row["best_tta_s"] / row["piecewise_tta_s"]
        rows.append(row)
        if not args.json:
            sys.stdout.write(
                f"{trace[:34]:<34} {workload:<9} {workers:>5}  piecewise {row['piecewise_wall_s']:7.1f} s"
                f"  best {row['best_wall_s']:7.1f} s  x{row['cost_ratio']:.2f}  time to target "
                f"x{row['tta_ratio']:.4f} ({row['followed']})\n")
            sys.stdout.flush()
    if args.json:
        sys.stdout.write(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
