"""Write the seventh held-out set's two trace files from real data, each used in a way no other
set uses (``benchmarks/data/heldout7-*.csv``; deterministic).

* ``heldout7-parallel-ferry-car-fast.csv``: two real throughput traces as two parallel paths
  (link aggregation: the bandwidth is the SUM of ``heldout2-norway-ferry-1-x1000.csv`` and
  ``heldout-norway-car-1-x1000.csv``, the latency the larger of theirs, 1 ms), replayed
  ``SPEEDUP`` times faster than recorded (a sample about every quarter second; every other
  imported trace keeps the recorded time axis, and ``heldout6-series-fcc-metro`` takes the
  lesser of two paths in series).
* ``heldout7-geo-jitter.csv``: one link stepping through ``PAIRS`` Skyplane region pairs of
  either network tier (drawn with seed ``SEED``), ``HOLD_S`` seconds each, looping, with the
  latency jittering every ``JITTER_DT_S`` seconds as the pair's ping statistics say: a normal
  draw around ``avg_rtt`` with ``mdev_rtt``, clipped to ``[min_rtt, max_rtt]``, halved (every
  other geo trace uses one mean RTT per pair and ignores ``max_rtt`` and ``mdev_rtt``); the
  bandwidth is the pair's iperf3 ``throughput_received / 8``.

Usage: ``python benchmarks/make_heldout7_traces.py [OUT_DIR]``.
"""

from __future__ import annotations

import csv
import random
import sys
from pathlib import Path

from heldout_rows import read_rows as _read
from heldout_rows import state_at as _at
from heldout_rows import write_traces

from traces.importers.skyplane import skyplane_pairs

_ROOT = Path(__file__).resolve().parent.parent
_SKYPLANE = _ROOT / "traces" / "data" / "skyplane"
SEED = 9905
SPEEDUP = 4.0
DURATION_S = 1800.0
PARALLEL = ("heldout2-norway-ferry-1-x1000.csv", "heldout-norway-car-1-x1000.csv")
PAIRS = 16
HOLD_S = 25.0
JITTER_DT_S = 0.5


def parallel_lines() -> list[str]:
    """Lines of ``heldout7-parallel-ferry-car-fast.csv``."""
    traces = [(p / SPEEDUP, [(t / SPEEDUP, lat, bw) for t, lat, bw in rows])
              for p, rows in (_read(name) for name in PARALLEL)]
    times: set[float] = set()
    for period, rows in traces:
        k = 0
        while k * period < DURATION_S:
            times.update(k * period + r[0] for r in rows if k * period + r[0] < DURATION_S)
            k += 1
    lines = [
        "# description: seventh held-out benchmark trace (never tuned on): two real throughput "
        f"traces as parallel paths, bandwidth = the SUM of {PARALLEL[0]} and {PARALLEL[1]} "
        f"(each x1000, each looping on its own period), latency = the larger of theirs, both "
        f"replayed {SPEEDUP:g}x faster than recorded",
        "# source: Pensieve cooked traces (hongzimao/pensieve, MIT, commit a49b2ac); HSDPA "
        "dataset of Riiser et al. (MMSys 2013: norway-ferry-1, norway-car-1); derived by "
        "benchmarks/make_heldout7_traces.py",
        "# name: heldout7-parallel-ferry-car-fast",
        f"# period_s: {DURATION_S:g}",
        "time_s,latency_s,bandwidth_Bps",
    ]
    last: tuple[float, float] | None = None
    for t in sorted(times):
        links = [_at(period, rows, t) for period, rows in traces]
        link = (max(lat for lat, _ in links), sum(bw for _, bw in links))
        if link != last:
            lines.append(f"{t!r},{link[0]!r},{link[1]!r}")
            last = link
    return lines


def _rtt_stats() -> dict[tuple[str, str], tuple[float, float, float, float]]:
    """``(min, avg, max, mdev)`` RTT in ms per directed region pair (first row of each;
    ``mdev`` 0 where the matrix leaves it empty)."""
    out: dict[tuple[str, str], tuple[float, float, float, float]] = {}
    with open(_SKYPLANE / "latency.csv", newline="") as fh:
        for row in csv.DictReader(fh):
            key = (row["src_region"], row["dst_region"])
            if key in out or not (row["min_rtt"] and row["avg_rtt"] and row["max_rtt"]):
                continue
            out[key] = (float(row["min_rtt"]), float(row["avg_rtt"]), float(row["max_rtt"]),
                        float(row["mdev_rtt"] or 0.0))
    return out


def geo_jitter_lines() -> list[str]:
    """Lines of ``heldout7-geo-jitter.csv``."""
    pairs = skyplane_pairs(_SKYPLANE, tier="any")
    stats = _rtt_stats()
    keys = sorted(k for k in pairs if k in stats and stats[k][2] > stats[k][0])
    rng = random.Random(SEED)
    chosen = rng.sample(keys, PAIRS)
    lines = [
        "# description: seventh held-out benchmark trace (never tuned on): one link stepping "
        f"through {PAIRS} Skyplane region pairs (either tier), {HOLD_S:g} s each, looping; "
        f"latency every {JITTER_DT_S:g} s a normal draw around the pair's avg_rtt with its "
        "mdev_rtt, clipped to [min_rtt, max_rtt], halved; bandwidth = iperf3 "
        "throughput_received/8",
        "# source: Skyplane measurements (Apache-2.0), the reduced matrices bundled in "
        f"traces/data/skyplane; pairs and jitter drawn with seed {SEED} by "
        "benchmarks/make_heldout7_traces.py: " + "; ".join(f"{s}>{d}" for s, d in chosen),
        "# name: heldout7-geo-jitter",
        f"# period_s: {PAIRS * HOLD_S:g}",
        "time_s,latency_s,bandwidth_Bps",
    ]
    steps = int(round(HOLD_S / JITTER_DT_S))
    for k, pair in enumerate(chosen):
        lo, avg, hi, mdev = stats[pair]
        bw_Bps = pairs[pair][1]
        for j in range(steps):
            rtt_ms = min(hi, max(lo, rng.gauss(avg, mdev)))
            lines.append(f"{k * HOLD_S + j * JITTER_DT_S:g},{rtt_ms * 1e-3 / 2.0!r},{bw_Bps!r}")
    return lines


def main(argv: list[str] | None = None) -> int:
    return write_traces(sys.argv[1:] if argv is None else argv,
                        {"heldout7-parallel-ferry-car-fast.csv": parallel_lines, "heldout7-geo-jitter.csv": geo_jitter_lines})


if __name__ == "__main__":
    sys.exit(main())
