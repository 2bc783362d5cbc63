"""One table row per invocation of ``bench_real_tta.py``: the numbers the report's tables give.

Usage: ``python benchmarks/real_tta_table.py RUN.json[=KEEP_DIR] ... [--policy NAME ...]
[--json] [--runs-csv FILE]``. Each argument is one invocation's ``--json`` output; ``=KEEP_DIR`` names the folder
its ``--keep`` wrote (default: the JSON's path without ``.json``). Per invocation and per
adaptive policy it reports the best fixed density in hindsight (mean over seeds and each seed),
the second best and how far behind it ran, the policy's time to target per seed and its ratio to
the best fixed density, iterations to the target per seed, the share of slow-phase iterations
(the trace's lowest bandwidth) up to the target run at a density above the grid's least, and the
decision seconds per iteration on the critical path. Last, per policy, the mean of the ratios over
invocations and its standard error. ``--runs-csv`` also writes one row per run, fixed densities
included, with its median compute time up to the target and whether that marks it disturbed.
The runs are read, not re-run; nothing here is timed.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_real_tta import _target_index  # noqa: E402


def _tag(name: str) -> str:
    """The folder-name stem ``bench_real_tta.py`` gives a policy entry."""
    return name.replace(" ", "_").replace(":", "_").replace("=", "")


def run_stats(records: Any, target_loss: float, least_density: float) -> dict[str, float]:
    """Iterations to the target and the slow-phase share above ``least_density`` of one run."""
    i = _target_index(records, target_loss)
    part = records if i is None else records.iloc[: i + 1]
    slow = part[part["bandwidth_Bps"] == records["bandwidth_Bps"].min()]
    above = float((slow["density"] > least_density * (1 + 1e-9)).mean()) if len(slow) else 0.0
    return {"iterations": math.nan if i is None else float(i + 1), "slow_above": above}


def invocation(path: Path, keep: Path, policies: list[str] | None) -> dict[str, Any]:
    """The row of one invocation (see the module docstring)."""
    import pandas as pd

    data = json.loads(path.read_text())
    means: dict[str, float] = data["mean_s"]
    fixed = sorted((v, k) for k, v in means.items() if k.startswith("fixed"))
    (best_s, best), (second_s, second) = fixed[0], fixed[1]
    least = min(float(k.split()[1]) for k in means if k.startswith("fixed"))
    names = policies or [k for k in means if not k.startswith("fixed")]
    row: dict[str, Any] = {
        "invocation": path.stem, "load_1min": data["load_1min"],
        "best_fixed": best, "best_fixed_s": best_s, "best_fixed_seeds_s": data["times_s"][best],
        "second_fixed": second, "second_over_best": second_s / best_s - 1.0, "policies": {},
    }
    for name in names:
        per_seed = []
        for seed in data["seeds"]:
            records = pd.read_parquet(keep / f"{_tag(name)}_s{seed}_r0" / "records.parquet")
            per_seed.append(run_stats(records, data["target_loss"], least))
        row["policies"][name] = {
            "mean_s": means[name], "seeds_s": data["times_s"][name],
            "over_best": means[name] / best_s,
            "iterations": [s["iterations"] for s in per_seed],
            "slow_above": [s["slow_above"] for s in per_seed],
            "decide_ms": 1e3 * data["exposed_decide_s"][name],
        }
    row["fixed_decide_ms"] = [1e3 * v for k, v in data["exposed_decide_s"].items()
                              if k.startswith("fixed")]
    return row


#: Median compute seconds per iteration above which a run counts as disturbed (the I rounds'
#: largest, over 84 runs on the idle development VM, was 3.21 ms).
DISTURBED_COMPUTE_S = 3.3e-3


def run_rows(path: Path, keep: Path) -> list[dict[str, Any]]:
    """One row per run of an invocation, fixed densities included: its time and iterations to
    the target and, up to the target, its median compute and iteration seconds and whether it
    was disturbed (:data:`DISTURBED_COMPUTE_S`)."""
    import pandas as pd

    data = json.loads(path.read_text())
    out = []
    for name, by_seed in data["runs_s"].items():
        for seed, times in by_seed.items():
            for rep, t in enumerate(times):
                records = pd.read_parquet(keep / f"{_tag(name)}_s{seed}_r{rep}"
                                          / "records.parquet")
                i = _target_index(records, data["target_loss"])
                part = records if i is None else records.iloc[: i + 1]
                compute = float(part["compute_s"].median())
                out.append({"invocation": path.stem, "policy": name, "seed": int(seed),
                            "repeat": rep, "time_to_target_s": t,
                            "iterations_to_target": math.nan if i is None else i + 1,
                            "compute_median_s": compute,
                            "iter_median_s": float(part["iter_s"].median()),
                            "disturbed": compute > DISTURBED_COMPUTE_S})
    return out


def _markdown(rows: list[dict[str, Any]]) -> str:
    lines = []
    for r in rows:
        lo, hi = r["load_1min"]
        seeds = " / ".join(f"{x:.3f}" for x in r["best_fixed_seeds_s"])
        cells = [r["invocation"], f"{lo:.2f}-{hi:.2f}",
                 f"{r['best_fixed'].split()[1]}: {r['best_fixed_s']:.3f} ({seeds})",
                 f"{r['second_fixed'].split()[1]}, +{100 * r['second_over_best']:.2f}%"]
        for p in r["policies"].values():
            seeds = " / ".join(f"{x:.3f}" for x in p["seeds_s"])
            cells += [f"{p['mean_s']:.3f} ({seeds})", f"{p['over_best']:.3f}x",
                      "/".join(f"{x:.0f}" for x in p["iterations"]),
                      "/".join(f"{100 * x:.0f}" for x in p["slow_above"]) + "%",
                      f"{p['decide_ms']:.3f} ms"]
        fd = r["fixed_decide_ms"]
        cells.append(f"{min(fd):.3f}-{max(fd):.3f} ms")
        lines.append("| " + " | ".join(cells) + " |")
    for name in rows[0]["policies"]:
        ratios = [r["policies"][name]["over_best"] for r in rows if name in r["policies"]]
        if len(ratios) == 1:
            lines.append(f"{name}: one invocation, {ratios[0]:.3f}x (no standard error)")
            continue
        se = statistics.stdev(ratios) / math.sqrt(len(ratios))
        lines.append(f"{name}: mean over {len(ratios)} invocations "
                     f"{statistics.fmean(ratios):.3f}x (standard error {se:.3f})")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="RUN.json[=KEEP_DIR], one per invocation")
    parser.add_argument("--policy", action="append", help="adaptive policy entries to report "
                        "(default: every one in the JSON)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--runs-csv", metavar="FILE",
                        help="also write one row per run (fixed densities included): time and "
                             "iterations to target, median compute and iteration seconds, "
                             f"disturbed (median compute > {DISTURBED_COMPUTE_S * 1e3:g} ms)")
    args = parser.parse_args(argv)
    rows = []
    per_run: list[dict[str, Any]] = []
    for spec in args.runs:
        js, _, keep = spec.partition("=")
        path = Path(js)
        if not path.is_file():
            sys.stderr.write(f"real_tta_table: no such file: {path}\n")
            return 2
        folder = Path(keep) if keep else path.with_suffix("")
        rows.append(invocation(path, folder, args.policy))
        if args.runs_csv:
            per_run.extend(run_rows(path, folder))
    if args.runs_csv:
        import pandas as pd

        from compctl_base.atomic_files import atomic_path

        with atomic_path(args.runs_csv) as tmp:
            pd.DataFrame(per_run).to_csv(tmp, index=False)
    sys.stdout.write(json.dumps(rows, indent=1) + "\n" if args.json else _markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
