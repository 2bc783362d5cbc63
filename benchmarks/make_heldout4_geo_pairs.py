"""Write ``benchmarks/data/heldout4-geo-pairs.csv``: the fourth held-out set's inter-region trace.

Unlike ``geo-8region`` and ``heldout3-geo-8region-b`` (one constant link per region, the mean
over its paths to the others), this trace is one link that steps through single Skyplane region
*pairs*: eight directed PREMIUM-tier pairs drawn with seed 9604 from every pair measured in both
bundled matrices, each held for ``HOLD_S`` seconds in turn, looping (as if the job's exchange
moved from one pair of sites to the next). Latency is the pair's mean RTT / 2, bandwidth its
measured throughput / 8 (``traces.importers.skyplane.skyplane_pairs``).

Usage: ``python benchmarks/make_heldout4_geo_pairs.py [OUT]`` (deterministic).
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

from traces.importers.skyplane import skyplane_pairs

_ROOT = Path(__file__).resolve().parent.parent
SEED = 9604
PAIRS = 8
HOLD_S = 30.0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0]) if args else _ROOT / "benchmarks" / "data" / "heldout4-geo-pairs.csv"
    pairs = skyplane_pairs(_ROOT / "traces" / "data" / "skyplane")
    chosen = random.Random(SEED).sample(sorted(pairs), PAIRS)
    lines = [
        "# description: fourth held-out benchmark trace (never tuned on): one link stepping "
        f"through {PAIRS} single Skyplane region pairs, {HOLD_S:g} s each, looping; latency = "
        "the pair's mean RTT/2, bandwidth = its iperf3 throughput/8",
        "# source: Skyplane measurements (Apache-2.0), the reduced matrices bundled in "
        f"traces/data/skyplane; pairs drawn with seed {SEED} by "
        "benchmarks/make_heldout4_geo_pairs.py: " + "; ".join(f"{s}->{d}" for s, d in chosen),
        "# name: heldout4-geo-pairs",
        f"# period_s: {PAIRS * HOLD_S:g}",
        "time_s,latency_s,bandwidth_Bps",
    ]
    for k, pair in enumerate(chosen):
        lat_s, bw_Bps = pairs[pair]
        lines.append(f"{k * HOLD_S:g},{lat_s!r},{bw_Bps!r}")
    out.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
