"""Mahimahi packet-delivery traces -> a looping bandwidth trace.

Format: one integer per line, the millisecond at which one packet of 1500 bytes may be
delivered; lines are non-decreasing, repeats mean several packets in the same millisecond, and
the file loops (after the last line, the schedule restarts shifted by the last timestamp). There
is no latency in the format: the ``latency_s`` option (default 0) sets a constant one.

Bandwidth is obtained by binning opportunities into windows of ``window_s`` (default 100 ms):
``bandwidth = packets * packet_bytes / window``. A window without any opportunity is an outage,
which the piecewise model (bandwidth > 0) represents by ``outage_Bps`` (default 1 byte/s: in
practice nothing moves until the outage ends).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from compctl_base.errors import InputError

from ..model import PiecewiseTrace, TraceSet
from .sourcefile import non_negative_option, positive_option, read_text_lines

__all__ = ["import_mahimahi", "MAHIMAHI_PACKET_BYTES"]

#: Bytes per delivery opportunity in mahimahi (an MTU-sized packet).
MAHIMAHI_PACKET_BYTES = 1500


def import_mahimahi(
    path: str | os.PathLike[str],
    *,
    window_s: float = 0.1,
    latency_s: float = 0.0,
    packet_bytes: int = MAHIMAHI_PACKET_BYTES,
    outage_Bps: float = 1.0,
    name: str | None = None,
) -> TraceSet:
    """Read a mahimahi trace; one link, looping with the file's period (its last timestamp)."""
    window = positive_option("window_s", window_s)
    lat = non_negative_option("latency_s", latency_s)
    pkt = positive_option("packet_bytes", packet_bytes)
    floor = positive_option("outage_Bps", outage_Bps)
    lines = read_text_lines(path, "mahimahi trace")
    ms = np.empty(len(lines), dtype=np.int64)
    prev = -1
    for k, (lineno, text) in enumerate(lines):
        try:
            v = int(text)
        except ValueError:
            raise InputError(
                f"{path}:{lineno}: expected an integer millisecond, got {text!r}"
            ) from None
        if v < 0:
            raise InputError(f"{path}:{lineno}: negative timestamp {v}")
        if v < prev:
            raise InputError(f"{path}:{lineno}: timestamp {v} is before the previous one {prev}")
        ms[k] = prev = v
    period_s = float(ms[-1]) / 1000.0
    if period_s <= 0:
        raise InputError(f"{path}: the last timestamp must be > 0 ms (it is the loop period)")
    # The opportunity at the last timestamp coincides with the start of the next loop.
    t = np.mod(ms.astype(np.float64) / 1000.0, period_s)
    n_win = max(1, math.ceil(period_s / window - 1e-9))
    starts = np.arange(n_win, dtype=np.float64) * window
    idx = np.minimum((t / window).astype(np.int64), n_win - 1)
    counts = np.bincount(idx, minlength=n_win).astype(np.float64)
    widths = np.minimum(starts + window, period_s) - starts
    bw = np.where(counts > 0, counts * pkt / widths, floor)
    label = name or Path(path).stem
    trace = PiecewiseTrace(starts, np.full(n_win, lat), bw, period_s=period_s, name=label)
    return TraceSet.single(trace)
