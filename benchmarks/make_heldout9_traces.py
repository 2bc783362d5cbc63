"""Write the ninth held-out set's two trace files from real data, each used in a way no other
set uses (``benchmarks/data/heldout9-*.csv``; deterministic).

* ``heldout9-handover-train-fcc.csv``: a HANDOVER between two access networks: every
  ``HOLD_S`` seconds the link switches between the real cellular trace ``HANDOVER[0]`` (its
  latency set to ``CELL_LATENCY_MS``) and the real broadband trace ``HANDOVER[1]`` (latency
  ``WIRED_LATENCY_MS``), each read at the same clock time on its own looping period, bandwidth
  x``SCALE`` more, sampled every ``DT_S`` seconds (every other set uses one source at a time or
  combines two at every instant, in series or in parallel).
* ``heldout9-geo-bidir.csv``: one link stepping through ``PAIRS`` Skyplane region pairs
  measured in BOTH directions (PREMIUM tier, drawn with seed ``SEED``), ``HOLD_S`` seconds each,
  looping: bandwidth the LESSER of the two directions' iperf3 ``throughput_received / 8`` (an
  allreduce sends both ways), latency ``avg_rtt / 2`` (every other geo trace takes one
  direction's throughput or a region mean).

Usage: ``python benchmarks/make_heldout9_traces.py [OUT_DIR]``.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

from heldout_rows import read_rows as _read
from heldout_rows import state_at as _at
from heldout_rows import write_traces

from traces.importers.skyplane import skyplane_pairs

_ROOT = Path(__file__).resolve().parent.parent
_SKYPLANE = _ROOT / "traces" / "data" / "skyplane"
SEED = 9965
HANDOVER = ("heldout2-norway-train-1-x1000.csv", "heldout3-fcc-10367-x1000.csv")
CELL_LATENCY_MS = 6.0
WIRED_LATENCY_MS = 0.3
SCALE = 2.0
HOLD_S = 20.0
DT_S = 1.0
DURATION_S = 1800.0
PAIRS = 10
PAIR_HOLD_S = 45.0


def handover_lines() -> list[str]:
    """Lines of ``heldout9-handover-train-fcc.csv``."""
    sources = [_read(name) for name in HANDOVER]
    lat_s = (CELL_LATENCY_MS * 1e-3, WIRED_LATENCY_MS * 1e-3)
    lines = [
        "# description: ninth held-out benchmark trace (never tuned on): a handover every "
        f"{HOLD_S:g} s between the real cellular trace {HANDOVER[0]} (latency "
        f"{CELL_LATENCY_MS:g} ms) and the real broadband trace {HANDOVER[1]} (latency "
        f"{WIRED_LATENCY_MS:g} ms), each at the same clock time on its own period, bandwidth "
        f"x{SCALE:g} more (x{1000 * SCALE:g} of the measured rate: scaled, not measured), "
        f"sampled every {DT_S:g} s",
        "# source: Pensieve cooked traces (hongzimao/pensieve, MIT, commit a49b2ac); HSDPA "
        "dataset of Riiser et al. (MMSys 2013: norway-train-1) and FCC Measuring Broadband "
        "America (fcc-10367); derived by benchmarks/make_heldout9_traces.py",
        "# name: heldout9-handover-train-fcc",
        f"# period_s: {DURATION_S:g}",
        "time_s,latency_s,bandwidth_Bps",
    ]
    last: tuple[float, float] | None = None
    for k in range(int(round(DURATION_S / DT_S))):
        t = k * DT_S
        which = int(t // HOLD_S) % 2
        bw = _at(*sources[which], t)[1] * SCALE
        link = (lat_s[which], bw)
        if link != last:
            lines.append(f"{t:g},{link[0]!r},{link[1]!r}")
            last = link
    return lines


def bidir_lines() -> list[str]:
    """Lines of ``heldout9-geo-bidir.csv``."""
    pairs = skyplane_pairs(_SKYPLANE)
    both = sorted((a, b) for (a, b) in pairs if a < b and (b, a) in pairs)
    chosen = random.Random(SEED).sample(both, PAIRS)
    lines = [
        "# description: ninth held-out benchmark trace (never tuned on): one link stepping "
        f"through {PAIRS} Skyplane region pairs measured in both directions (PREMIUM tier), "
        f"{PAIR_HOLD_S:g} s each, looping; bandwidth = the lesser of the two directions' iperf3 "
        "throughput_received/8, latency = avg_rtt/2",
        "# source: Skyplane measurements (Apache-2.0), the reduced matrices bundled in "
        f"traces/data/skyplane; pairs drawn with seed {SEED} by "
        "benchmarks/make_heldout9_traces.py: " + "; ".join(f"{a}<>{b}" for a, b in chosen),
        "# name: heldout9-geo-bidir",
        f"# period_s: {PAIRS * PAIR_HOLD_S:g}",
        "time_s,latency_s,bandwidth_Bps",
    ]
    for k, (a, b) in enumerate(chosen):
        lat_s = pairs[(a, b)][0]
        bw = min(pairs[(a, b)][1], pairs[(b, a)][1])
        lines.append(f"{k * PAIR_HOLD_S:g},{lat_s!r},{bw!r}")
    return lines


def main(argv: list[str] | None = None) -> int:
    return write_traces(sys.argv[1:] if argv is None else argv,
                        {"heldout9-handover-train-fcc.csv": handover_lines,
                         "heldout9-geo-bidir.csv": bidir_lines})


if __name__ == "__main__":
    sys.exit(main())
