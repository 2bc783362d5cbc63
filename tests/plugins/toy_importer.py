"""A toy trace importer in one file: ``time_s,bandwidth_mbps`` lines. A package would expose
this module under the ``compctl.trace_importers`` entry-point group."""

from __future__ import annotations

from pathlib import Path

from compctl_base.errors import InputError
from traces.importers import register_importer
from traces.model import PiecewiseTrace, TraceSet


def import_toy_csv(path: str, *, latency_s: float | None = None, name: str | None = None) -> TraceSet:
    """One link: bandwidth steps from ``time_s,bandwidth_mbps`` lines, constant latency."""
    times, bws = [], []
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        try:
            t, mbps = (float(v) for v in line.split(","))
        except ValueError:
            raise InputError(f"{path}:{n}: expected time_s,bandwidth_mbps") from None
        times.append(t)
        bws.append(mbps * 1e6 / 8)
    lat = 0.0 if latency_s is None else latency_s
    label = name or Path(path).stem
    trace = PiecewiseTrace(times, [lat] * len(times), bws, name=label)
    return TraceSet({"*": trace}, name=label)


register_importer("toy-csv", import_toy_csv)
