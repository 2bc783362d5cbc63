"""The calibration file :func:`sim.transport_fit.fit_transport`'s result is written as (the
schema of :mod:`sim.transports`), with a note saying how it was fitted."""

from __future__ import annotations

import json
import math
from dataclasses import fields
from typing import Any, Protocol

from .transports import CALIBRATION_SCHEMA, OPTIONAL_DEFAULTS, Transport

__all__ = ["FittedTransport", "calibration_document", "dump_document"]


class FittedTransport(Protocol):
    """What a fit result gives the document (:class:`sim.transport_fit.FitResult`)."""

    transport: Transport
    link_bandwidth_Bps: float
    link_latency_s: float
    fitted_bandwidth_Bps: float
    base_held: bool
    latency_model: str

    def summary(self) -> dict[str, Any]:
        """Fit quality over the fitted and the held-out points."""
        ...


def calibration_document(fit: FittedTransport, *, source: str) -> dict[str, Any]:
    """The calibration file's content (schema of :mod:`sim.transports`) for ``fit``."""
    params = {f.name: getattr(fit.transport, f.name) for f in fields(fit.transport)
              if f.name != "name" and getattr(fit.transport, f.name)
              != OPTIONAL_DEFAULTS.get(f.name, math.nan)}
    params["slots"] = int(params["slots"])
    if "call_per_tensor" in params:
        params["call_per_tensor"] = int(params["call_per_tensor"])
    if fit.link_bandwidth_Bps > 0:
        note = (f"fitted by compctl calibrate on {source}; simulate with a link bandwidth of "
                f"{fit.link_bandwidth_Bps * 8 / 1e9:.6g} Gbit/s and latency "
                f"{fit.link_latency_s * 1e3:.6g} ms")
    else:
        note = (f"fitted by compctl calibrate on {source}; measured on shaped links of known "
                "rates: bandwidth_efficiency is the fraction of a link's rate reached, for any "
                f"rate; link latency {fit.link_latency_s * 1e3:.6g} ms")
    if fit.latency_model == "overlap":
        note += ("; per-hop time fitted as hop_floor_s (it overlaps the transfer: a step lasts "
                 "at least that long), which matched better than an additive hop_latency_s")
    if fit.base_held:
        note += "; one rank count: base_latency_s held at 0"
    tp = fit.transport
    if tp.allgather_efficiency_per_doubling:
        note += (f"; allgather efficiency {tp.allgather_efficiency:.4g} on transfers of "
                 f"{tp.allgather_reference_s * 1e3:.4g} ms at the link's rate, "
                 f"{tp.allgather_efficiency_per_doubling:+.4g} per doubling of that time")
    if tp.call_per_tensor:
        note += "; one collective call per payload tensor (as compctl's real hook sends them)"
    if tp.burst_s or tp.burst_bytes:
        note += (f"; the links' shaper passes a burst of max({tp.burst_s * 1e3:.4g} ms of "
                 f"traffic, {tp.burst_bytes:.0f} B) at once after idling (set from the shaper, "
                 "not fitted: the microbenchmark's calls run back to back)")
    return {
        "schema": CALIBRATION_SCHEMA,
        "note": note,
        "source": {"measurements": source, "link_bandwidth_Bps": fit.link_bandwidth_Bps,
                   "link_latency_s": fit.link_latency_s,
                   "fitted_bandwidth_Bps": fit.fitted_bandwidth_Bps, **fit.summary()},
        "transports": {fit.transport.name: params},
    }


def dump_document(doc: dict[str, Any]) -> bytes:
    """``doc`` as the bytes of a JSON calibration file."""
    return (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()
