"""Run-to-run noise of the netns allreduce microbenchmark: the same points measured twice.

Usage: ``python benchmarks/netns_allreduce_noise.py RUN1.csv RUN2.csv [RUN1b.csv RUN2b.csv ...]``
(pairs of measurement CSVs as ``bench_netns_allreduce.py --save-cal/--save-held`` write them,
the two of a pair taken in separate runs of the same points).

For every point (ranks, op, link rate, size) present in both files of a pair, the relative
difference of the second run's time from the first's; summarised per rank count over the small
messages (1-8 KiB) and the large ones (128 KiB and up): the median and largest absolute
difference. A model fitted on one run cannot be expected to predict the other closer than
these differences, so they are the reachable floor of the "within 10% per message size" bar.
"""

from __future__ import annotations

import argparse
import statistics
import sys

from sim.transport_measurements import Measurement, read_csv

SMALL_MAX_BYTES = 8 * 1024
LARGE_MIN_BYTES = 128 * 1024


def _key(m: Measurement) -> tuple[int, str, float, float]:
    return (m.ranks, m.op, float(m.bandwidth_Bps or 0.0), m.size_bytes)


def differences(first: list[Measurement], second: list[Measurement]
                ) -> list[tuple[tuple[int, str, float, float], float]]:
    """``(point, second / first - 1)`` for every point measured in both runs."""
    base = {_key(m): m.time_s for m in first}
    return [(_key(m), m.time_s / base[_key(m)] - 1.0) for m in second if _key(m) in base]


def summary(diffs: list[tuple[tuple[int, str, float, float], float]]) -> list[str]:
    """One line per rank count and size class: count, median and largest |difference|."""
    out = []
    for n in sorted({k[0] for k, _ in diffs}):
        for name, keep in (("1-8 KiB", lambda b: b <= SMALL_MAX_BYTES),
                           (">= 128 KiB", lambda b: b >= LARGE_MIN_BYTES)):
            xs = [abs(d) for k, d in diffs if k[0] == n and keep(k[3])]
            if xs:
                out.append(f"{n} ranks {name:>10}: {len(xs):2d} points, |difference| median "
                           f"{statistics.median(xs):6.1%}, largest {max(xs):6.1%}, within 10% "
                           f"{sum(x <= 0.1 for x in xs)}/{len(xs)}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", nargs="+", help="RUN1.csv RUN2.csv [more pairs]")
    ap.add_argument("--points", action="store_true", help="print every point's difference")
    a = ap.parse_args()
    if len(a.csv) % 2:
        sys.stderr.write("error: give the measurement CSVs in pairs (run 1, run 2)\n")
        return 2
    diffs = []
    for first, second in zip(a.csv[::2], a.csv[1::2], strict=True):
        diffs += differences(read_csv(first), read_csv(second))
    if not diffs:
        sys.stderr.write("error: no point is in both files of any pair\n")
        return 2
    if a.points:
        for (n, op, bw, size), d in sorted(diffs):
            sys.stdout.write(f"{n} ranks {op:<9} {bw * 8e-6:5.0f} Mbit/s {size:>10.0f} B "
                             f"{d:+7.1%}\n")
    sys.stdout.write("\n".join(summary(diffs)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
