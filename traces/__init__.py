"""Network traces and gradient traces: formats, importers, generators, bundled data.

Import-light: no SimPy, no torch.
"""

from .bundled import bundled_names, resolve_trace
from .csvio import read_trace, write_trace_csv, write_trace_parquet
from .model import PiecewiseTrace, TraceSet, bottleneck

__all__ = [
    "PiecewiseTrace",
    "TraceSet",
    "bottleneck",
    "bundled_names",
    "resolve_trace",
    "read_trace",
    "write_trace_csv",
    "write_trace_parquet",
]
