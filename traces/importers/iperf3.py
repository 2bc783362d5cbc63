"""iperf3 ``--json`` reports -> a bandwidth (and, for TCP, latency) trace.

Each entry of ``intervals[]`` has a ``sum`` with ``start``, ``end`` and ``bits_per_second``: one
breakpoint per interval at ``start`` (shifted so the first is 0) with ``bandwidth_Bps =
bits_per_second / 8``. When the interval's TCP ``streams[]`` report ``rtt`` (microseconds, the
kernel's smoothed RTT), latency is the mean over streams of ``rtt / 2`` (one way); otherwise, or
with ``use_rtt=False``, the ``latency_s`` option (default 0) applies. The trace loops with period
``last end - first start``. A report with an ``error`` field, no intervals, or an interval with
zero or negative throughput is an :class:`~compctl_base.errors.InputError` (a stalled interval cannot be a
piecewise-constant bandwidth > 0; trim it from the report if it is expected).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from compctl_base.errors import InputError

from ..input_limits import MAX_JSON_BYTES, check_file_size
from ..model import PiecewiseTrace, TraceSet
from .sourcefile import non_negative_option

__all__ = ["import_iperf3"]


def _num(obj: Any, key: str, where: str) -> float:
    if not isinstance(obj, dict) or key not in obj:
        raise InputError(f"{where}: missing field {key!r}")
    v = obj[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise InputError(f"{where}.{key}: expected a number, got {v!r}")
    return float(v)


def import_iperf3(
    path: str | os.PathLike[str],
    *,
    latency_s: float = 0.0,
    use_rtt: bool = True,
    name: str | None = None,
) -> TraceSet:
    """Read an ``iperf3 --json`` report; one link, looping."""
    lat_opt = non_negative_option("latency_s", latency_s)
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: no such file")
    if p.is_file():
        check_file_size(p, MAX_JSON_BYTES, "iperf3 report")
    try:
        text = p.read_text(encoding="utf-8")
    except (UnicodeDecodeError, IsADirectoryError):
        raise InputError(f"{p}: not a text file (expected iperf3 --json output)") from None
    if not text.strip():
        raise InputError(f"{p}: empty file (expected iperf3 --json output)")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{p}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise InputError(f"{p}: not valid JSON (nested too deeply)") from None
    if not isinstance(doc, dict):
        raise InputError(f"{p}: expected a JSON object (iperf3 --json output)")
    if doc.get("error"):
        raise InputError(f"{p}: iperf3 reported an error: {doc['error']}")
    intervals = doc.get("intervals")
    if not isinstance(intervals, list) or not intervals:
        raise InputError(f"{p}: no intervals[] (is this iperf3 --json output?)")
    starts: list[float] = []
    ends: list[float] = []
    bws: list[float] = []
    lats: list[float] = []
    for i, iv in enumerate(intervals):
        where = f"{p}: intervals[{i}]"
        if not isinstance(iv, dict):
            raise InputError(f"{where}: expected an object")
        s = iv.get("sum")
        start = _num(s, "start", f"{where}.sum")
        end = _num(s, "end", f"{where}.sum")
        bps = _num(s, "bits_per_second", f"{where}.sum")
        if bps <= 0:
            raise InputError(f"{where}.sum.bits_per_second must be > 0, got {bps!r}")
        if end <= start:
            raise InputError(f"{where}.sum: end {end!r} is not after start {start!r}")
        if starts and start < ends[-1] - 1e-9:
            raise InputError(f"{where}.sum: start {start!r} overlaps the previous interval")
        rtts_us = [
            float(st["rtt"])
            for st in iv.get("streams", []) or []
            if isinstance(st, dict) and isinstance(st.get("rtt"), (int, float))
        ]
        if any(r < 0 for r in rtts_us):
            raise InputError(f"{where}.streams: negative rtt")
        lat = float(np.mean(rtts_us)) * 1e-6 / 2.0 if (use_rtt and rtts_us) else lat_opt
        starts.append(start)
        ends.append(end)
        bws.append(bps / 8.0)
        lats.append(lat)
    t = np.asarray(starts) - starts[0]
    trace = PiecewiseTrace(
        t,
        lats,
        bws,
        period_s=float(ends[-1] - starts[0]),
        name=name or p.stem,
    )
    return TraceSet.single(trace)
