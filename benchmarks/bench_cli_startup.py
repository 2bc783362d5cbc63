"""Start-up cost of the ``compctl`` command: ``compctl --help`` against ``python -c pass``.

Usage: ``python benchmarks/bench_cli_startup.py [--repeats 15] [--json]``

Both are run as fresh processes, alternating, ``--repeats`` times each; the headline is the ratio
of the medians of their wall times, measured in the same run (target: at most 3x). Uses the
``compctl`` console script next to this interpreter when installed, else ``python -m sim.entry``.
The load average at the start and the end is printed with the result, since the machine this is
run on is often shared.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any


def _compctl_command() -> list[str]:
    script = Path(sys.executable).parent / "compctl"
    if script.is_file():
        return [str(script), "--help"]
    return [sys.executable, "-m", "sim.entry", "--help"]


def _wall_s(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def measure(repeats: int) -> dict[str, Any]:
    """Median wall seconds of both commands over ``repeats`` alternating runs, and their ratio."""
    baseline = [sys.executable, "-c", "pass"]
    target = _compctl_command()
    _wall_s(baseline)  # warm the file cache for both before timing
    _wall_s(target)
    load_before = os.getloadavg()
    base_s: list[float] = []
    help_s: list[float] = []
    for _ in range(repeats):
        base_s.append(_wall_s(baseline))
        help_s.append(_wall_s(target))
    load_after = os.getloadavg()
    base_med = statistics.median(base_s)
    help_med = statistics.median(help_s)
    return {
        "date_utc": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.system()}",
        "python": platform.python_version(),
        "command": " ".join(Path(target[0]).name if i == 0 else w for i, w in enumerate(target)),
        "repeats": repeats,
        "python_pass_median_s": base_med,
        "compctl_help_median_s": help_med,
        "ratio": help_med / base_med,
        "load_1min_before_after": [load_before[0], load_after[0]],
    }


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its result (a table, or JSON with ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15, help="runs of each command (default 15)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        sys.stderr.write("bench_cli_startup: error: --repeats must be at least 1\n")
        return 2
    result = measure(args.repeats)
    if args.json:
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
        return 0
    load = result["load_1min_before_after"]
    sys.stdout.write(
        f"{result['date_utc']} UTC, {result['machine']}, Python {result['python']}, "
        f"load {load[0]:.1f} -> {load[1]:.1f}\n"
        f"python -c pass   median {result['python_pass_median_s'] * 1e3:7.1f} ms\n"
        f"{result['command']:<16} median {result['compctl_help_median_s'] * 1e3:7.1f} ms\n"
        f"ratio {result['ratio']:.2f}x over {result['repeats']} runs each (target <= 3x)\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
