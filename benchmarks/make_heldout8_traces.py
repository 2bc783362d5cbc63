"""Write the eighth held-out set's two trace files from real data, each used in a way no other
set uses (``benchmarks/data/heldout8-*.csv``; deterministic).

* ``heldout8-car2-reversed-slow.csv``: the real throughput trace
  ``heldout4-norway-car-2-x300.csv`` replayed BACKWARDS in time and ``SLOWDOWN`` times slower
  than recorded, its bandwidth x``SCALE`` more (x1500 in all) and latency ``LATENCY_MS`` ms
  (every other imported trace runs forwards at or above the recorded speed).
* ``heldout8-geo-relay.csv``: one link stepping through ``PATHS`` two-hop Skyplane OVERLAY
  paths ``src > relay > dst`` (three distinct regions of the PREMIUM tier, drawn with seed
  ``SEED``), ``HOLD_S`` seconds each, looping: latency the SUM of both hops' ``min_rtt / 2``,
  bandwidth the LESSER of both hops' iperf3 ``throughput_received / 8`` (every other geo trace
  is a direct path or a region mean and uses ``avg_rtt``).

Usage: ``python benchmarks/make_heldout8_traces.py [OUT_DIR]``.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

from heldout_rows import read_rows as _read
from heldout_rows import write_traces

from traces.importers.skyplane import skyplane_pairs

_ROOT = Path(__file__).resolve().parent.parent
_SKYPLANE = _ROOT / "traces" / "data" / "skyplane"
SEED = 9955
SOURCE = "heldout4-norway-car-2-x300.csv"
SLOWDOWN = 2.0
SCALE = 5.0
LATENCY_MS = 8.0
PATHS = 12
HOLD_S = 35.0


def reversed_lines() -> list[str]:
    """Lines of ``heldout8-car2-reversed-slow.csv``: sample ``k`` of the source (holding from
    ``t_k`` to ``t_{k+1}``, the last to the period) holds, reversed, from ``period - t_{k+1}``."""
    period, rows = _read(SOURCE)
    ends = [r[0] for r in rows[1:]] + [period]
    pieces = sorted((period - end, bw) for (_, _, bw), end in zip(rows, ends, strict=True))
    lines = [
        "# description: eighth held-out benchmark trace (never tuned on): the real throughput "
        f"trace {SOURCE} replayed backwards in time and {SLOWDOWN:g}x slower than recorded, "
        f"bandwidth x{SCALE:g} more (x{300 * SCALE:g} of the measured rate: scaled, not "
        f"measured), latency {LATENCY_MS:g} ms (the source has none)",
        "# source: Pensieve cooked test traces (hongzimao/pensieve, MIT, commit a49b2ac, "
        "test/cooked_test_traces/norway_car_2); HSDPA dataset of Riiser et al. (MMSys 2013); "
        "derived by benchmarks/make_heldout8_traces.py",
        "# name: heldout8-car2-reversed-slow",
        f"# period_s: {period * SLOWDOWN!r}",
        "time_s,latency_s,bandwidth_Bps",
    ]
    for start, bw in pieces:
        lines.append(f"{start * SLOWDOWN!r},{LATENCY_MS * 1e-3!r},{bw * SCALE!r}")
    return lines


def relay_lines() -> list[str]:
    """Lines of ``heldout8-geo-relay.csv``."""
    pairs = skyplane_pairs(_SKYPLANE, rtt="min")
    paths = sorted((a, b, c) for (a, b) in pairs for (b2, c) in pairs
                   if b2 == b and c != a and (a, c) in pairs)
    chosen = random.Random(SEED).sample(paths, PATHS)
    lines = [
        "# description: eighth held-out benchmark trace (never tuned on): one link stepping "
        f"through {PATHS} two-hop Skyplane overlay paths src>relay>dst (PREMIUM tier), "
        f"{HOLD_S:g} s each, looping; latency = the sum of both hops' min_rtt/2, bandwidth = "
        "the lesser of both hops' iperf3 throughput_received/8",
        "# source: Skyplane measurements (Apache-2.0), the reduced matrices bundled in "
        f"traces/data/skyplane; paths drawn with seed {SEED} by "
        "benchmarks/make_heldout8_traces.py: " + "; ".join(f"{a}>{b}>{c}" for a, b, c in chosen),
        "# name: heldout8-geo-relay",
        f"# period_s: {PATHS * HOLD_S:g}",
        "time_s,latency_s,bandwidth_Bps",
    ]
    for k, (a, b, c) in enumerate(chosen):
        (lat1, bw1), (lat2, bw2) = pairs[(a, b)], pairs[(b, c)]
        lines.append(f"{k * HOLD_S:g},{lat1 + lat2!r},{min(bw1, bw2)!r}")
    return lines


def main(argv: list[str] | None = None) -> int:
    return write_traces(sys.argv[1:] if argv is None else argv,
                        {"heldout8-car2-reversed-slow.csv": reversed_lines, "heldout8-geo-relay.csv": relay_lines})


if __name__ == "__main__":
    sys.exit(main())
