"""Linux ``ping`` output -> a latency trace.

Reply lines look like ``64 bytes from HOST (IP): icmp_seq=1 ttl=56 time=24.1 ms``, optionally
prefixed by ``[EPOCH]`` when ping ran with ``-D``. Latency is the one-way latency ``RTT / 2`` by
default (``rtt=True`` keeps the full round trip). Timestamps come from the ``[EPOCH]`` prefixes
when every reply has one, otherwise from ``(icmp_seq - first icmp_seq) * interval_s`` (ping's
``-i``, default 1 s; sequence numbers that wrap at 65536 are unwrapped).

Lost probes (``no answer yet`` lines of ``ping -O``, ``Destination ... Unreachable`` errors, or
sequence numbers that never reply) add no sample: the last measured latency holds until the next
reply, and the number lost is logged. Duplicate replies (``DUP!``) are ignored. The header,
statistics and ``rtt min/avg/max/mdev`` summary lines are recognised and skipped; any other line
is an error, so a file that is not ping output is never half-read.

Ping measures no bandwidth: the ``bandwidth_Bps`` option sets a constant one (required).
The trace loops with period ``last time + interval_s``, as measured traces do.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

import numpy as np

from compctl_base.errors import InputError

from ..model import PiecewiseTrace, TraceSet
from .sourcefile import positive_option, read_text_lines

__all__ = ["import_ping"]

log = logging.getLogger(__name__)

_EPOCH = re.compile(r"^\[(?P<epoch>[0-9]+(?:\.[0-9]*)?)\]\s*(?P<rest>.*)$")
_REPLY = re.compile(r"bytes from .*?icmp_seq=(?P<seq>\S+?)\s.*?time[=<](?P<time>\S+)\s*ms")
_SEQ = re.compile(r"icmp_seq[= ](?P<seq>[0-9]+)")
_SKIP = (
    re.compile(r"^PING\s"),
    re.compile(r"^---\s.*statistics\s*---$"),
    re.compile(r"^\d+ packets transmitted"),
    re.compile(r"^(rtt|round-trip) min/avg/max"),
    re.compile(r"^pipe \d+$"),
)
_LOST = (
    re.compile(r"no answer yet for icmp_seq="),
    re.compile(r"^Request timeout for icmp_seq"),
    re.compile(r"^From .*icmp_seq=\d+ "),
)


def import_ping(
    path: str | os.PathLike[str],
    *,
    bandwidth_Bps: float,
    rtt: bool = False,
    interval_s: float = 1.0,
    name: str | None = None,
) -> TraceSet:
    """Read ``ping`` output; one link with latency from the replies, looping."""
    bw = positive_option("bandwidth_Bps", bandwidth_Bps)
    interval = positive_option("interval_s", interval_s)
    lines = read_text_lines(path, "ping output")
    samples: list[tuple[float | None, int, float]] = []  # (epoch, seq, rtt_s)
    seen: set[int] = set()
    lost = 0
    for lineno, text in lines:
        epoch: float | None = None
        m = _EPOCH.match(text)
        if m:
            epoch = float(m.group("epoch"))
            text = m.group("rest")
        if any(p.search(text) for p in _SKIP):
            continue
        if "bytes from" in text:
            r = _REPLY.search(text)
            if r is None:
                raise InputError(f"{path}:{lineno}: reply line without icmp_seq and time: {text!r}")
            try:
                seq = int(r.group("seq"))
                rtt_ms = float(r.group("time"))
            except ValueError:
                raise InputError(
                    f"{path}:{lineno}: malformed icmp_seq or time in {text!r}"
                ) from None
            if not np.isfinite(rtt_ms) or rtt_ms < 0:
                raise InputError(f"{path}:{lineno}: time must be >= 0 ms, got {rtt_ms!r}")
            if "DUP!" in text or seq in seen:
                continue
            seen.add(seq)
            samples.append((epoch, seq, rtt_ms * 1e-3))
            continue
        if any(p.search(text) for p in _LOST):
            lost += 1
            continue
        raise InputError(f"{path}:{lineno}: not a line of ping output: {text!r}")
    if not samples:
        raise InputError(f"{path}: no ping replies (every probe lost, or not ping output)")
    epochs = [s[0] for s in samples]
    if all(e is not None for e in epochs):
        t = np.asarray(epochs, dtype=np.float64)
    else:
        seqs = np.asarray([s[1] for s in samples], dtype=np.int64)
        # icmp_seq is 16 bits and wraps; a drop by more than half the range is a wrap.
        wraps = np.concatenate([[0], np.cumsum(np.diff(seqs) < -32768)])
        t = (seqs + 65536 * wraps).astype(np.float64) * interval
    t = t - t[0]
    if np.any(np.diff(t) <= 0):
        row = int(np.flatnonzero(np.diff(t) <= 0)[0]) + 1
        raise InputError(f"{path}: reply {row + 1} is not later than the one before it")
    lat = np.asarray([s[2] for s in samples]) * (1.0 if rtt else 0.5)
    expected = int(round(t[-1] / interval)) + 1
    missing = max(0, expected - len(samples))
    if lost or missing:
        log.info("%s: %d probes without reply (%d reported lost)", path, max(lost, missing), lost)
    trace = PiecewiseTrace(
        t,
        lat,
        np.full(len(t), bw),
        period_s=float(t[-1] + interval),
        name=name or Path(path).stem,
    )
    return TraceSet.single(trace)
