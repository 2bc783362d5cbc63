"""Pensieve-style throughput logs (``time_s <TAB> Mbit/s``) -> a looping bandwidth trace.

One sample per line: the time in seconds (from 0) and the throughput in Mbit/s (10^6 bit/s),
separated by a tab or spaces. Each sample holds until the next; the trace loops with period
``last time + median sampling interval`` (so the last sample lasts a typical interval). The format
has no latency: the ``latency_s`` option (default 0) sets a constant one. ``scale`` multiplies
the bandwidth (e.g. 1000 turns a cellular Mbit/s trace into a datacenter-scale Gbit/s one while
keeping its shape); the default 1 keeps the real values.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from compctl_base.errors import InputError

from ..model import PiecewiseTrace, TraceSet
from .sourcefile import non_negative_option, positive_option, read_text_lines

__all__ = ["import_pensieve"]


def import_pensieve(
    path: str | os.PathLike[str],
    *,
    latency_s: float = 0.0,
    scale: float = 1.0,
    name: str | None = None,
) -> TraceSet:
    """Read a pensieve throughput trace; one link, looping."""
    lat = non_negative_option("latency_s", latency_s)
    factor = positive_option("scale", scale)
    lines = read_text_lines(path, "pensieve (time_s<TAB>Mbit/s)")
    times: list[float] = []
    mbps: list[float] = []
    for lineno, text in lines:
        if text.startswith("#"):
            continue
        parts = text.split()
        if len(parts) != 2:
            raise InputError(
                f"{path}:{lineno}: expected two fields 'time_s<TAB>Mbit/s', got {len(parts)}"
            )
        try:
            t, v = float(parts[0]), float(parts[1])
        except ValueError:
            raise InputError(f"{path}:{lineno}: non-numeric field in {text!r}") from None
        if not (np.isfinite(t) and np.isfinite(v)):
            raise InputError(f"{path}:{lineno}: non-finite value in {text!r}")
        if v <= 0:
            raise InputError(f"{path}:{lineno}: throughput must be > 0 Mbit/s, got {v!r}")
        if times and t <= times[-1]:
            raise InputError(f"{path}:{lineno}: time {t!r} is not after the previous {times[-1]!r}")
        if not times and t < 0:
            raise InputError(f"{path}:{lineno}: negative time {t!r}")
        times.append(t)
        mbps.append(v)
    if not times:
        raise InputError(f"{path}: no samples")
    t_arr = np.asarray(times) - times[0]  # a log that starts late is shifted to 0
    if len(t_arr) > 1:
        period = float(t_arr[-1] + np.median(np.diff(t_arr)))
    else:
        period = 1.0  # a single sample: a constant link, the period is immaterial
    bw = np.asarray(mbps) * 1e6 / 8.0 * factor
    label = name or Path(path).stem
    trace = PiecewiseTrace(t_arr, np.full(len(t_arr), lat), bw, period_s=period, name=label)
    return TraceSet.single(trace)
