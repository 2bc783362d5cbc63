"""Transports: how a collective library moves a schedule's bytes (for the stepwise fidelity).

A :class:`Transport` is a named parameter set:

- ``chunk_bytes``: each step's message is cut into chunks of this size that flow through the
  schedule's steps as a pipeline (0: one message per step, no pipelining);
- ``slots``: chunks in flight per connection; a link then carries at most ``slots`` chunks per
  chunk time plus round trip (0: unlimited);
- ``base_latency_s``: paid once per collective (kernel launch, protocol set-up);
- ``hop_latency_s``: added to every step's network latency (software per hop);
- ``bandwidth_efficiency``: the fraction of a link's bandwidth a transfer reaches;
- ``host_copy_Bps``: staging through host memory (device to host before, host to device after;
  0: none);
- ``window_bytes``: a TCP window: one connection carries at most ``window / RTT`` (0: none);
- ``hop_floor_s``: a step takes at least this long: per-hop software time (a process waking up
  and being scheduled, the library's hand-off) that *overlaps* the transfer, since the kernel
  moves the bytes while the process waits (0: none). ``hop_latency_s`` is the additive
  alternative; ``compctl calibrate`` fits one or the other, whichever matches better;
- ``allgather_efficiency``: the bandwidth efficiency of allgather schedules, where the
  library's allgather reaches a different fraction of the link than its allreduce (0: the
  same as ``bandwidth_efficiency``);
- ``allgather_efficiency_per_doubling``: how the allgather efficiency changes per doubling of
  a step's transfer time at the link's rate (its bytes over the link bandwidth): measured
  through tbf-shaped veth links, gloo's 2-rank allgather reached about 0.75 of the rate on
  transfers of 5 ms and 0.6 on transfers of 300 ms, at 25 and at 100 Mbit/s alike. A step of
  ideal time ``t`` moves at the allgather efficiency plus this times
  ``log2(t / allgather_reference_s)``, kept in [0.02, 1] (0: the same for every transfer; may
  be negative);
- ``allgather_reference_s``: the transfer time at which the allgather efficiency holds as
  given (only used with a non-zero ``allgather_efficiency_per_doubling``);
- ``call_per_tensor``: 1 where every tensor of a payload travels in its own collective call, as
  compctl's real hook sends a sparse payload (one ``all_gather`` of the values, one of the
  indices, and before them one of the counts where ranks keep different counts): each call
  pays the base latency, the per-hop latency or floor of each step, and moves its own bytes at
  its own size's efficiency (0: one call carries the whole payload). The calls of one step
  share the link latency of that step (the netns emulation sleeps one collective's latency per
  exchange); a link with real latency would add it once more per extra call.
- ``message_bytes``: fixed wire bytes every message of a step carries beyond its payload
  (TCP/IP and Ethernet headers of its last, partly filled segment, the ACKs of the reverse flow
  on the same shaped egress, the library's own control messages): a step's link carries its
  messages' bytes plus this many per message, so small messages run slower than their payload
  alone predicts at low link rates (0: none; ``compctl calibrate --fit-message-bytes``).

- ``burst_s`` / ``burst_bytes``: a token-bucket shaper's burst on every link (Linux ``tbf``, as
  the netns emulation shapes: :func:`realrun.netns.tbf_args`): the bucket holds
  ``max(burst_s x rate, burst_bytes)`` bytes and refills at the link's rate while the link idles,
  and what it holds leaves at once. So the first step of a collective that starts after an idle
  link (an iteration's first collective, after the compute) moves that many of its bytes without
  waiting for the rate: a sparse exchange of a few bucket sizes runs markedly faster than its
  bytes over the rate (2 ranks at 50 Mbit/s: 30 KB of top-k in 6.6 ms, 1 ms of it the bucket's
  6 KB). Only the simulator's iterations credit it (by the compute time before the collective,
  the least the link idled); a collective priced alone (:func:`sim.transport_fit.predict_s`, a
  microbenchmark's calls back to back) gets none (0: no shaper burst).
The six fields above are left out of :meth:`Transport.to_dict` and written calibration files
at their defaults, so outputs that do not use them stay byte for byte as before.

Bundled sets (sources; none of the values is fitted to a measurement here):

- ``ideal``: the plain alpha-beta model (no chunks, no extra latency): the stepwise level then
  reproduces the closed forms of :mod:`sim.collectives` on uniform constant links.
- ``nccl``: NCCL's Simple protocol for rings as its public tuning model describes it
  (``src/graph/tuning.cc``; REFERENCES.md section 7): base latency 8.4 us, per-hop network latency
  14 us; a 4 MiB buffer per connection in ``NCCL_STEPS = 8`` slots, so 512 KiB chunks. A ring
  runs on at least two channels, each with its own connection and buffer: after the ring search
  NCCL duplicates every channel (``ncclTopoPostset`` in ``src/graph/connect.cc``: ``nChannels =
  min(MAXCHANNELS, nChannels * 2)``), so a link carries at least 2 x 8 = 16 chunks in flight
  (8 MiB). Until 2026-11-25 this set had 8 (one channel's buffer), which capped a link at 4 MiB
  per round trip: half of what NCCL keeps in flight.
- ``gloo``: gloo's ring allreduce defaults (public source; REFERENCES.md section 7): 1 MiB
  segments, two in flight, CUDA tensors staged through host memory (PCIe 3.0 x16, about 12 GB/s
  usable of its 15.75 GB/s), over TCP with Linux's default maximum receive window
  (``net.ipv4.tcp_rmem`` max, 6 MiB).

Calibration files (``--calibration FILE``, JSON or TOML) override any parameter of any set, or
add a set, with this fixed schema::

    {"schema": "compctl-transports/1",
     "transports": {"nccl": {"hop_latency_s": 2e-05, "bandwidth_efficiency": 0.9}}}

Keys are the field names above (SI units); unknown keys or sets without a bundled base must
give every field. ``compctl calibrate`` (:mod:`sim.transport_fit`) writes the same schema.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from sim.errors import InputError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 ships no tomllib
    import tomli as tomllib

__all__ = [
    "Transport",
    "TRANSPORTS",
    "OPTIONAL_DEFAULTS",
    "CALIBRATION_SCHEMA",
    "get_transport",
    "load_calibration",
]

#: The ``schema`` value of a calibration file.
CALIBRATION_SCHEMA = "compctl-transports/1"

_MiB = float(1 << 20)


@dataclass(frozen=True)
class Transport:
    """One transport's parameters (see the module docstring); SI units."""

    name: str
    chunk_bytes: float = 0.0
    slots: int = 0
    base_latency_s: float = 0.0
    hop_latency_s: float = 0.0
    bandwidth_efficiency: float = 1.0
    host_copy_Bps: float = 0.0
    window_bytes: float = 0.0
    hop_floor_s: float = 0.0
    allgather_efficiency: float = 0.0
    allgather_efficiency_per_doubling: float = 0.0
    allgather_reference_s: float = 0.01
    call_per_tensor: int = 0
    message_bytes: float = 0.0
    burst_s: float = 0.0
    burst_bytes: float = 0.0

    def __post_init__(self) -> None:
        for f in fields(self):
            if f.name == "name":
                continue
            v = getattr(self, f.name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise InputError(f"transport {self.name}: {f.name} must be a number, got {v!r}")
            if v < 0 and f.name != "allgather_efficiency_per_doubling":
                raise InputError(f"transport {self.name}: {f.name} must be >= 0, got {v!r}")
        if not 0.0 < self.bandwidth_efficiency <= 1.0:
            raise InputError(
                f"transport {self.name}: bandwidth_efficiency must be in (0, 1], "
                f"got {self.bandwidth_efficiency!r}"
            )
        if self.allgather_efficiency > 1.0:
            raise InputError(
                f"transport {self.name}: allgather_efficiency must be in [0, 1] (0: as "
                f"bandwidth_efficiency), got {self.allgather_efficiency!r}"
            )
        if int(self.slots) != self.slots:
            raise InputError(f"transport {self.name}: slots must be an integer")
        if abs(self.allgather_efficiency_per_doubling) > 1.0:
            raise InputError(
                f"transport {self.name}: allgather_efficiency_per_doubling must be in [-1, 1], "
                f"got {self.allgather_efficiency_per_doubling!r}"
            )
        if self.allgather_reference_s <= 0:
            raise InputError(f"transport {self.name}: allgather_reference_s must be > 0")
        if self.call_per_tensor not in (0, 1):
            raise InputError(
                f"transport {self.name}: call_per_tensor must be 0 or 1, got "
                f"{self.call_per_tensor!r}"
            )

    def allgather_efficiency_at(self, transfer_s: float) -> float:
        """The bandwidth efficiency of an allgather step whose bytes take ``transfer_s`` at the
        link's full rate (0: the transport's ``bandwidth_efficiency``, when no allgather
        model is set)."""
        slope = self.allgather_efficiency_per_doubling
        if slope == 0.0:
            return self.allgather_efficiency
        base = self.allgather_efficiency or self.bandwidth_efficiency
        ratio = max(transfer_s, 1e-9) / self.allgather_reference_s
        return min(1.0, max(MIN_EFFICIENCY, base + slope * math.log2(ratio)))

    def burst_credit_bytes(self, bandwidth_Bps: np.ndarray, idle_s: float) -> np.ndarray:
        """Bytes a shaper's bucket holds on links of ``bandwidth_Bps`` after ``idle_s`` seconds
        idle: ``min(max(burst_s x rate, burst_bytes), idle_s x rate)`` (0 without a burst)."""
        if (self.burst_s <= 0.0 and self.burst_bytes <= 0.0) or idle_s <= 0.0:
            return np.zeros_like(bandwidth_Bps, dtype=float)
        size = np.maximum(bandwidth_Bps * self.burst_s, self.burst_bytes)
        return np.minimum(size, bandwidth_Bps * idle_s)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready parameters (for run metadata); the size and per-call fields only where
        they are not at their defaults."""
        out = asdict(self)
        for key, default in OPTIONAL_DEFAULTS.items():
            if out[key] == default:
                del out[key]
        return out


#: The lowest efficiency the size-dependent allgather model gives.
MIN_EFFICIENCY = 0.02

#: Fields written only when not at these defaults (run metadata, calibration files).
OPTIONAL_DEFAULTS: dict[str, float] = {
    "allgather_efficiency_per_doubling": 0.0,
    "allgather_reference_s": 0.01,
    "call_per_tensor": 0,
    "message_bytes": 0.0,
    "burst_s": 0.0,
    "burst_bytes": 0.0,
}


#: The bundled transports.
TRANSPORTS: dict[str, Transport] = {
    "ideal": Transport("ideal"),
    "nccl": Transport(
        "nccl",
        chunk_bytes=4 * _MiB / 8,
        slots=2 * 8,  # two channels (NCCL duplicates the ring's channels) x NCCL_STEPS slots
        base_latency_s=8.4e-6,
        hop_latency_s=14e-6,
    ),
    "gloo": Transport(
        "gloo",
        chunk_bytes=_MiB,
        slots=2,
        host_copy_Bps=12e9,
        window_bytes=6 * _MiB,
    ),
}


def _read(path: str) -> Any:
    p = Path(path)
    try:
        text = p.read_bytes()
    except OSError as exc:
        raise InputError(f"calibration file {path}: {exc.strerror or exc}") from None
    try:
        if p.suffix.lower() == ".toml":
            return tomllib.loads(text.decode("utf-8"))
        return json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        kind = p.suffix[1:] or "JSON"
        raise InputError(f"calibration file {path}: not valid {kind}: {exc}") from None


def load_calibration(path: str) -> dict[str, Transport]:
    """The bundled transports with ``path``'s overrides applied (see the module docstring)."""
    doc = _read(path)
    if not isinstance(doc, dict) or doc.get("schema") != CALIBRATION_SCHEMA:
        raise InputError(f"calibration file {path}: 'schema' must be {CALIBRATION_SCHEMA!r}")
    extra = sorted(set(doc) - {"schema", "transports", "note", "source"})
    if extra:
        raise InputError(f"calibration file {path}: unknown key {extra[0]!r}")
    sets = doc.get("transports", {})
    if not isinstance(sets, dict):
        raise InputError(f"calibration file {path}: 'transports' must be a table")
    known = {f.name for f in fields(Transport)} - {"name"}
    out = dict(TRANSPORTS)
    for name, params in sets.items():
        if not isinstance(params, dict):
            raise InputError(f"calibration file {path}: transports.{name} must be a table")
        bad = sorted(set(params) - known)
        if bad:
            raise InputError(
                f"calibration file {path}: transports.{name}: unknown parameter {bad[0]!r}; "
                f"known: {', '.join(sorted(known))}"
            )
        base = out.get(name, Transport(name))
        try:
            out[name] = replace(base, **params)
        except TypeError as exc:
            raise InputError(f"calibration file {path}: transports.{name}: {exc}") from None
    return out


def get_transport(name: str, calibration: str | None = None) -> Transport:
    """The transport ``name``, from the bundled sets or ``calibration``'s."""
    sets = TRANSPORTS if calibration is None else load_calibration(calibration)
    if name not in sets:
        raise InputError(f"unknown transport {name!r}; known: {', '.join(sorted(sets))}")
    return sets[name]
