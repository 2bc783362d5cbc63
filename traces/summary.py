"""Summary statistics of traces and the human units used to print them.

Everything is computed in SI units; :func:`format_rate` and :func:`format_latency` convert to
human units for display only (Gbit/s = 10^9 bit/s).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from .model import PiecewiseTrace, TraceSet

__all__ = ["LinkSummary", "summarize_link", "summarize", "format_rate", "format_latency"]


@dataclass(frozen=True)
class LinkSummary:
    """Statistics of one link's trace (SI units).

    ``duration_s`` is one period for a looping trace and the last breakpoint for a holding one;
    means are time-weighted over ``[0, duration_s]`` (the single state for a constant trace),
    minima and maxima are over every state.
    """

    link: str
    name: str
    segments: int
    duration_s: float
    loops: bool
    latency_min_s: float
    latency_mean_s: float
    latency_max_s: float
    bandwidth_min_Bps: float
    bandwidth_mean_Bps: float
    bandwidth_max_Bps: float
    loss_max: float

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


def _weights(tr: PiecewiseTrace) -> np.ndarray:
    """Time each state lasts within one duration (sums to the duration; 1 for a constant)."""
    end = tr.duration_s
    if end <= 0:
        w = np.zeros(tr.n_segments)
        w[-1] = 1.0
        return w
    edges = np.append(tr.time_s, end)
    return np.diff(edges)


def summarize_link(link: str, tr: PiecewiseTrace) -> LinkSummary:
    """Statistics of one trace."""
    w = _weights(tr)
    if w.sum() <= 0:  # a holding trace whose only timed state is the last: weight it alone
        w = np.zeros(tr.n_segments)
        w[-1] = 1.0
    lat, bw = tr.latency_s, tr.bandwidth_Bps
    # Bandwidth mean as bytes carried / time, the figure a transfer actually sees on average.
    bw_mean = float(np.sum(w * bw) / np.sum(w))
    return LinkSummary(
        link=link,
        name=tr.name,
        segments=tr.n_segments,
        duration_s=float(tr.duration_s),
        loops=tr.period_s is not None,
        latency_min_s=float(lat.min()),
        latency_mean_s=float(np.sum(w * lat) / np.sum(w)),
        latency_max_s=float(lat.max()),
        bandwidth_min_Bps=float(bw.min()),
        bandwidth_mean_Bps=bw_mean,
        bandwidth_max_Bps=float(bw.max()),
        loss_max=float(tr.loss.max()),
    )


def summarize(ts: TraceSet) -> list[LinkSummary]:
    """One summary per link, in the set's order."""
    return [summarize_link(lab, tr) for lab, tr in ts.links.items()]


def format_rate(bandwidth_Bps: float) -> str:
    """``1.25e9`` -> ``"10 Gbit/s"`` (decimal prefixes on bits per second)."""
    bits = bandwidth_Bps * 8.0
    for factor, unit in ((1e9, "Gbit/s"), (1e6, "Mbit/s"), (1e3, "kbit/s")):
        if bits >= factor:
            return f"{bits / factor:.4g} {unit}"
    return f"{bits:.4g} bit/s"


def format_latency(latency_s: float) -> str:
    """``0.0015`` -> ``"1.5 ms"``."""
    return f"{latency_s * 1e3:.4g} ms"
