"""Write the sixth held-out set's two trace files from real data, each used in a way no other
set uses (``benchmarks/data/heldout6-*.csv``; deterministic).

* ``heldout6-series-fcc-metro.csv``: two real throughput traces in series, as a path through
  two bottlenecks sees them: the bandwidth is the lesser of ``heldout-fcc-13092-x1000.csv``
  (FCC broadband, a sample every 5 s, 250 s looping) and ``heldout-norway-metro-1-x1000.csv``
  (HSDPA, about one sample a second, 315 s looping) at each instant, the latency their sum
  (1 ms each); written for ``DURATION_S`` seconds, the two loops drifting against each other
  (every other imported trace is one source alone).
* ``heldout6-geo-standard-mesh.csv``: one link stepping through the bottlenecks of groups of
  ``GROUP_REGIONS`` Skyplane regions measured on the STANDARD network tier (public-internet
  routing; every other geo trace uses the PREMIUM tier), every group whose directed pairs are
  all measured, in an order drawn with seed ``SEED``, ``HOLD_S`` seconds each, looping: an
  exchange among all members (an allgather) waits for its slowest pair, so the latency is the
  group's largest pair RTT / 2 and the bandwidth its least pair throughput / 8
  (``heldout5-geo-rings`` uses ring hops, ``heldout4-geo-pairs`` single pairs).

Usage: ``python benchmarks/make_heldout6_traces.py [OUT_DIR]``.
"""

from __future__ import annotations

import itertools
import random
import sys
from pathlib import Path

from heldout_rows import read_rows as _read
from heldout_rows import state_at as _at
from heldout_rows import write_traces

from traces.importers.skyplane import skyplane_pairs

_ROOT = Path(__file__).resolve().parent.parent
SEED = 9805
GROUP_REGIONS = 3
HOLD_S = 20.0
DURATION_S = 1800.0
SERIES = ("heldout-fcc-13092-x1000.csv", "heldout-norway-metro-1-x1000.csv")


def series_lines() -> list[str]:
    """Lines of ``heldout6-series-fcc-metro.csv``."""
    traces = [_read(name) for name in SERIES]
    times: set[float] = set()
    for period, rows in traces:
        k = 0
        while k * period < DURATION_S:
            times.update(k * period + r[0] for r in rows if k * period + r[0] < DURATION_S)
            k += 1
    lines = [
        "# description: sixth held-out benchmark trace (never tuned on): two real throughput "
        f"traces in series, bandwidth = the lesser of {SERIES[0]} and {SERIES[1]} (each x1000, "
        "each looping on its own period) at every instant, latency = the sum of theirs",
        "# source: Pensieve cooked traces (hongzimao/pensieve, MIT, commit a49b2ac); FCC "
        "Measuring Broadband America (fcc-13092) and the HSDPA dataset of Riiser et al. (MMSys "
        "2013, norway-metro-1); derived by benchmarks/make_heldout6_traces.py",
        "# name: heldout6-series-fcc-metro",
        f"# period_s: {DURATION_S:g}",
        "time_s,latency_s,bandwidth_Bps",
    ]
    last: tuple[float, float] | None = None
    for t in sorted(times):
        links = [_at(period, rows, t) for period, rows in traces]
        link = (sum(lat for lat, _ in links), min(bw for _, bw in links))
        if link != last:
            lines.append(f"{t!r},{link[0]!r},{link[1]!r}")
            last = link
    return lines


def _groups(pairs: dict[tuple[str, str], tuple[float, float]]) -> list[tuple[str, ...]]:
    """Every group of ``GROUP_REGIONS`` regions whose directed pairs are all measured, in a
    seeded order."""
    regions = sorted({r for pair in pairs for r in pair})
    groups = [g for g in itertools.combinations(regions, GROUP_REGIONS)
              if all(p in pairs for p in itertools.permutations(g, 2))]
    random.Random(SEED).shuffle(groups)
    return groups


def geo_mesh_lines() -> list[str]:
    """Lines of ``heldout6-geo-standard-mesh.csv``."""
    pairs = skyplane_pairs(_ROOT / "traces" / "data" / "skyplane", tier="STANDARD")
    groups = _groups(pairs)
    lines = [
        "# description: sixth held-out benchmark trace (never tuned on): one link stepping "
        f"through the bottlenecks of every group of {GROUP_REGIONS} Skyplane regions measured "
        f"on the STANDARD network tier, {HOLD_S:g} s each, looping; latency = the group's "
        "largest pair RTT/2, bandwidth = its least pair iperf3 throughput/8",
        "# source: Skyplane measurements (Apache-2.0), the reduced matrices bundled in "
        f"traces/data/skyplane, STANDARD tier; group order drawn with seed {SEED} by "
        "benchmarks/make_heldout6_traces.py: " + "; ".join("+".join(g) for g in groups),
        "# name: heldout6-geo-standard-mesh",
        f"# period_s: {len(groups) * HOLD_S:g}",
        "time_s,latency_s,bandwidth_Bps",
    ]
    for k, group in enumerate(groups):
        links = [pairs[p] for p in itertools.permutations(group, 2)]
        lat_s = max(lat for lat, _ in links)
        bw_Bps = min(bw for _, bw in links)
        lines.append(f"{k * HOLD_S:g},{lat_s!r},{bw_Bps!r}")
    return lines


def main(argv: list[str] | None = None) -> int:
    return write_traces(sys.argv[1:] if argv is None else argv,
                        {"heldout6-series-fcc-metro.csv": series_lines, "heldout6-geo-standard-mesh.csv": geo_mesh_lines})


if __name__ == "__main__":
    sys.exit(main())
