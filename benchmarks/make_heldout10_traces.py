"""Write the tenth held-out set's two trace files from real data, each used in a way no other
set uses (``benchmarks/data/heldout10-*.csv``; deterministic).

* ``heldout10-tram-fast.csv``: the real throughput trace ``SOURCE`` replayed ``SPEEDUP`` times
  FASTER than recorded (every sample holds for a ``SPEEDUP``-th of its time; the other sets
  replay a source at its own pace, slower, or backwards), bandwidth x``SCALE`` more, latency
  ``LATENCY_MS``.
* ``heldout10-geo-star.csv``: one link stepping through ``STEPS`` STARS of Skyplane regions
  (PREMIUM tier, drawn with seed ``SEED``), ``HOLD_S`` seconds each, looping: at each step a
  hub region and ``SPOKES`` other regions, the link the star's slowest spoke: latency the
  largest spoke-to-hub ``avg_rtt / 2``, bandwidth the least spoke-to-hub
  ``throughput_received / 8`` (every other geo trace is one pair, a path, a ring or a mesh
  mean).

Usage: ``python benchmarks/make_heldout10_traces.py [OUT_DIR]``.
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
SEED = 10005
SOURCE = "heldout3-norway-tram-1-x1000.csv"
SPEEDUP = 4.0
SCALE = 3.0
LATENCY_MS = 1.2
STEPS = 8
SPOKES = 4
HOLD_S = 50.0


def fast_lines() -> list[str]:
    """Lines of ``heldout10-tram-fast.csv``: sample ``k`` of the source, recorded at ``t_k``,
    holds from ``t_k / SPEEDUP``."""
    period, rows = _read(SOURCE)
    lines = [
        "# description: tenth held-out benchmark trace (never tuned on): the real throughput "
        f"trace {SOURCE} replayed {SPEEDUP:g}x faster than recorded, bandwidth x{SCALE:g} "
        f"more (x{1000 * SCALE:g} of the measured rate: scaled, not measured), latency "
        f"{LATENCY_MS:g} ms (the source has none)",
        "# source: Pensieve cooked traces (hongzimao/pensieve, MIT, commit a49b2ac); HSDPA "
        "dataset of Riiser et al. (MMSys 2013: norway-tram-1); derived by "
        "benchmarks/make_heldout10_traces.py",
        "# name: heldout10-tram-fast",
        f"# period_s: {period / SPEEDUP!r}",
        "time_s,latency_s,bandwidth_Bps",
    ]
    for t, _, bw in rows:
        lines.append(f"{t / SPEEDUP!r},{LATENCY_MS * 1e-3!r},{bw * SCALE!r}")
    return lines


def stars() -> list[tuple[str, tuple[str, ...]]]:
    """The ``STEPS`` stars ``(hub, spokes)`` drawn with ``SEED``: spokes measured to the hub."""
    pairs = skyplane_pairs(_SKYPLANE)
    regions = sorted({a for a, _ in pairs} | {b for _, b in pairs})
    rng = random.Random(SEED)
    out: list[tuple[str, tuple[str, ...]]] = []
    while len(out) < STEPS:
        hub = rng.choice(regions)
        into = sorted(a for a in regions if (a, hub) in pairs)
        if len(into) >= SPOKES:
            out.append((hub, tuple(rng.sample(into, SPOKES))))
    return out


def star_lines() -> list[str]:
    """Lines of ``heldout10-geo-star.csv``."""
    pairs = skyplane_pairs(_SKYPLANE)
    chosen = stars()
    lines = [
        "# description: tenth held-out benchmark trace (never tuned on): one link stepping "
        f"through {STEPS} stars of Skyplane regions (PREMIUM tier), {HOLD_S:g} s each, "
        f"looping; each a hub and {SPOKES} spokes, the link the slowest spoke: latency = the "
        "largest spoke-to-hub avg_rtt/2, bandwidth = the least spoke-to-hub "
        "throughput_received/8",
        "# source: Skyplane measurements (Apache-2.0), the reduced matrices bundled in "
        f"traces/data/skyplane; stars drawn with seed {SEED} by "
        "benchmarks/make_heldout10_traces.py: "
        + "; ".join(f"{hub}<{'+'.join(spokes)}" for hub, spokes in chosen),
        "# name: heldout10-geo-star",
        f"# period_s: {STEPS * HOLD_S:g}",
        "time_s,latency_s,bandwidth_Bps",
    ]
    for k, (hub, spokes) in enumerate(chosen):
        lat_s = max(pairs[(s, hub)][0] for s in spokes)
        bw = min(pairs[(s, hub)][1] for s in spokes)
        lines.append(f"{k * HOLD_S:g},{lat_s!r},{bw!r}")
    return lines


def main(argv: list[str] | None = None) -> int:
    return write_traces(sys.argv[1:] if argv is None else argv,
                        {"heldout10-tram-fast.csv": fast_lines,
                         "heldout10-geo-star.csv": star_lines})


if __name__ == "__main__":
    sys.exit(main())
