"""Plot a trace set: latency and bandwidth over time on two stacked axes (human units)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

from .model import TraceSet

__all__ = ["plot_traces", "default_horizon_s"]

#: Links drawn at most (a legend of hundreds of regions helps nobody).
MAX_LINKS = 12


def default_horizon_s(ts: TraceSet) -> float:
    """One period (or up to the last breakpoint plus 10 %) of the longest link; 1 s if constant."""
    longest = max(t.duration_s for t in ts.links.values())
    if longest <= 0:
        return 1.0
    loops = any(t.period_s is not None for t in ts.links.values())
    return longest if loops else longest * 1.1


def _rate_unit(max_Bps: float) -> tuple[float, str]:
    bits = max_Bps * 8
    if bits >= 1e9:
        return 1e9 / 8, "Gbit/s"
    if bits >= 1e6:
        return 1e6 / 8, "Mbit/s"
    return 1e3 / 8, "kbit/s"


def plot_traces(
    ts: TraceSet, out: str | os.PathLike[str], *, horizon_s: float | None = None
) -> None:
    """Write a PNG (or any matplotlib format, by suffix) of ``ts`` to ``out``, atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    horizon = default_horizon_s(ts) if horizon_s is None else float(horizon_s)
    labels = ts.labels[:MAX_LINKS]
    max_bw = max(float(ts.links[k].bandwidth_Bps.max()) for k in labels)
    scale, unit = _rate_unit(max_bw)
    fig, (ax_lat, ax_bw) = plt.subplots(2, 1, sharex=True, figsize=(9, 5.5))
    try:
        for lab in labels:
            tr = ts.links[lab].unrolled(horizon)
            t = np.append(tr.time_s[tr.time_s < horizon], horizon)
            idx = np.searchsorted(tr.time_s, t, side="right") - 1
            label = None if lab == "*" else lab
            ax_lat.step(t, tr.latency_s[idx] * 1e3, where="post", label=label, lw=1.2)
            ax_bw.step(t, tr.bandwidth_Bps[idx] / scale, where="post", label=label, lw=1.2)
        ax_lat.set_ylabel("latency (ms, one way)")
        ax_bw.set_ylabel(f"bandwidth ({unit})")
        ax_bw.set_xlabel("time (s)")
        ax_lat.set_ylim(bottom=0)
        ax_bw.set_ylim(bottom=0)
        ax_lat.set_title(
            ts.name + ("" if len(labels) == len(ts.links) else f" (first {len(labels)} links)")
        )
        if len(labels) > 1:
            ax_lat.legend(fontsize="small", ncol=2)
        for ax in (ax_lat, ax_bw):
            ax.grid(alpha=0.3)
        fig.tight_layout()
        path = Path(out)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=path.suffix)
        os.close(fd)
        try:
            fig.savefig(tmp, dpi=110)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
    finally:
        plt.close(fig)
