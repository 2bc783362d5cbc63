"""Rows of the imported held-out trace files, for the scripts that combine them into new sets.

``make_heldout6_traces.py`` .. ``make_heldout8_traces.py`` read imported traces from
``benchmarks/data`` and sample them on a common time axis (all read and sample the same way),
then write their two files the same way (:func:`write_traces`).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from pathlib import Path

#: where the held-out trace files live
DATA_DIR = Path(__file__).resolve().parent / "data"

Row = tuple[float, float, float]


def read_rows(name: str) -> tuple[float, list[Row]]:
    """``(period_s, [(time_s, latency_s, bandwidth_Bps), ...])`` of an imported trace file."""
    lines = (DATA_DIR / name).read_text().splitlines()
    period = float(next(x for x in lines if x.startswith("# period_s:")).split(":")[1])
    rows = lines[lines.index("time_s,latency_s,bandwidth_Bps") + 1:]
    out: list[Row] = []
    for row in rows:
        t, lat, bw = (float(x) for x in row.split(","))
        out.append((t, lat, bw))
    return period, out


def state_at(period: float, rows: list[Row], t: float) -> tuple[float, float]:
    """``(latency, bandwidth)`` of a looping piecewise-constant trace at time ``t``."""
    i = bisect.bisect_right([r[0] for r in rows], t % period) - 1
    return rows[max(i, 0)][1], rows[max(i, 0)][2]


def write_traces(argv: list[str], files: dict[str, Callable[[], list[str]]]) -> int:
    """Write each ``name: lines()`` of ``files`` into the folder ``argv[0]`` (default
    :data:`DATA_DIR`), one line per row; the scripts' ``main``."""
    out = Path(argv[0]) if argv else DATA_DIR
    for name, lines in files.items():
        (out / name).write_text("\n".join(lines()) + "\n")
    return 0
