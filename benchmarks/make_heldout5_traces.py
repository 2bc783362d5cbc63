"""Write the fifth held-out set's two trace files from real data, each used in a way no other
set uses (``benchmarks/data/heldout5-*.csv``; deterministic).

* ``heldout5-tram-queue.csv``: the bandwidth of ``heldout3-norway-tram-1-x1000.csv`` (Pensieve's
  norway_tram_1, x1000) with a latency that moves with it, as a standing queue of
  ``QUEUE_BYTES`` in front of the link makes it: ``BASE_LATENCY_S + QUEUE_BYTES / bandwidth``
  (every other imported throughput trace carries a constant latency).
* ``heldout5-geo-rings.csv``: one link stepping through the bottlenecks of ``RINGS`` rings of
  ``RING_REGIONS`` Skyplane regions (drawn with seed ``SEED`` among the regions whose every
  directed ring pair is measured in both bundled matrices), ``HOLD_S`` seconds each, looping: a
  ring collective over regions runs at its slowest hop, so the latency is the ring's largest
  pair RTT / 2 and the bandwidth its least pair throughput / 8 (``geo-8region`` and
  ``heldout3-geo-8region-b`` are per-region means, ``heldout4-geo-pairs`` single pairs).

Usage: ``python benchmarks/make_heldout5_traces.py [OUT_DIR]``.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

from traces.importers.skyplane import skyplane_pairs

_ROOT = Path(__file__).resolve().parent.parent
SEED = 9705
RINGS = 8
RING_REGIONS = 4
HOLD_S = 30.0
QUEUE_BYTES = 262_144.0
BASE_LATENCY_S = 1e-3
TRAM = "heldout3-norway-tram-1-x1000.csv"


def tram_queue_lines() -> list[str]:
    """Lines of ``heldout5-tram-queue.csv``."""
    src = (_ROOT / "benchmarks" / "data" / TRAM).read_text().splitlines()
    period = next(line for line in src if line.startswith("# period_s:"))
    rows = src[src.index("time_s,latency_s,bandwidth_Bps") + 1:]
    lines = [
        "# description: fifth held-out benchmark trace (never tuned on): the bandwidth of "
        f"{TRAM} (norway-tram-1 x1000) with a latency that moves with it, as a standing queue "
        f"of {QUEUE_BYTES:g} bytes makes it: {BASE_LATENCY_S:g} s + {QUEUE_BYTES:g} B / "
        "bandwidth",
        "# source: Pensieve cooked traces (hongzimao/pensieve, MIT, commit a49b2ac); HSDPA "
        "dataset of Riiser et al. (MMSys 2013); derived by benchmarks/make_heldout5_traces.py",
        "# name: heldout5-tram-queue",
        period,
        "time_s,latency_s,bandwidth_Bps",
    ]
    for row in rows:
        t, _, bw = row.split(",")
        lines.append(f"{t},{BASE_LATENCY_S + QUEUE_BYTES / float(bw)!r},{bw}")
    return lines


def _rings(pairs: dict[tuple[str, str], tuple[float, float]]) -> list[tuple[str, ...]]:
    """``RINGS`` rings of ``RING_REGIONS`` regions whose every hop is measured (seeded)."""
    rng = random.Random(SEED)
    regions = sorted({r for pair in pairs for r in pair})
    out: list[tuple[str, ...]] = []
    while len(out) < RINGS:
        ring = tuple(rng.sample(regions, RING_REGIONS))
        hops = list(zip(ring, ring[1:] + ring[:1], strict=True))
        if all(h in pairs for h in hops) and ring not in out:
            out.append(ring)
    return out


def geo_rings_lines() -> list[str]:
    """Lines of ``heldout5-geo-rings.csv``."""
    pairs = skyplane_pairs(_ROOT / "traces" / "data" / "skyplane")
    rings = _rings(pairs)
    lines = [
        "# description: fifth held-out benchmark trace (never tuned on): one link stepping "
        f"through the bottlenecks of {RINGS} rings of {RING_REGIONS} Skyplane regions, "
        f"{HOLD_S:g} s each, looping; latency = the ring's largest pair RTT/2, bandwidth = its "
        "least pair iperf3 throughput/8",
        "# source: Skyplane measurements (Apache-2.0), the reduced matrices bundled in "
        f"traces/data/skyplane; rings drawn with seed {SEED} by "
        "benchmarks/make_heldout5_traces.py: " + "; ".join(">".join(r) for r in rings),
        "# name: heldout5-geo-rings",
        f"# period_s: {RINGS * HOLD_S:g}",
        "time_s,latency_s,bandwidth_Bps",
    ]
    for k, ring in enumerate(rings):
        hops = [pairs[h] for h in zip(ring, ring[1:] + ring[:1], strict=True)]
        lat_s = max(lat for lat, _ in hops)
        bw_Bps = min(bw for _, bw in hops)
        lines.append(f"{k * HOLD_S:g},{lat_s!r},{bw_Bps!r}")
    return lines


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0]) if args else _ROOT / "benchmarks" / "data"
    (out / "heldout5-tram-queue.csv").write_text("\n".join(tram_queue_lines()) + "\n")
    (out / "heldout5-geo-rings.csv").write_text("\n".join(geo_rings_lines()) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
