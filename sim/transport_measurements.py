"""Measured collective times for the transport fit (:mod:`sim.transport_fit`): the point type,
reading them from a CSV or from nccl-tests' ``all_reduce_perf`` output, writing them, and a
point's ideal transfer time at its link's rate."""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass
from pathlib import Path

from sim.errors import InputError

__all__ = ["OPS", "Measurement", "read_csv", "read_nccl_tests", "write_csv", "transfer_s"]


#: What a measurement timed: an allreduce of ``bytes`` per rank, or an allgather of ``bytes``
#: from every rank.
OPS = ("allreduce", "allgather")


@dataclass(frozen=True)
class Measurement:
    """One measured allreduce: ``size_bytes`` per rank over ``ranks`` ranks took ``time_s``."""

    ranks: int
    size_bytes: float
    time_s: float
    bandwidth_Bps: float | None = None
    op: str = "allreduce"
    #: How long the links idled before each timed call (median; the microbenchmark's barrier
    #: and loop between calls), or ``None`` where not measured. A token-bucket shaper's bucket
    #: refills meanwhile (:meth:`sim.transports.Transport.burst_credit_bytes`).
    idle_s: float | None = None

    def check(self, where: str) -> None:
        """Raise :class:`InputError` (naming ``where``) unless the point is usable."""
        if self.ranks < 2:
            raise InputError(f"{where}: ranks must be >= 2, got {self.ranks}")
        if not math.isfinite(self.size_bytes) or self.size_bytes <= 0:
            raise InputError(f"{where}: bytes must be > 0, got {self.size_bytes}")
        if not math.isfinite(self.time_s) or self.time_s <= 0:
            raise InputError(f"{where}: seconds must be > 0, got {self.time_s}")
        if self.op not in OPS:
            raise InputError(f"{where}: op must be one of {', '.join(OPS)}, got {self.op!r}")
        bw = self.bandwidth_Bps
        if bw is not None and not (math.isfinite(bw) and bw > 0):
            raise InputError(f"{where}: bandwidth_Bps must be > 0, got {bw}")
        idle = self.idle_s
        if idle is not None and not (math.isfinite(idle) and idle >= 0):
            raise InputError(f"{where}: idle_s must be >= 0, got {idle}")


def _text(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or exc
        raise InputError(f"measurements {path}: {reason}") from None


def read_csv(path: str) -> list[Measurement]:
    """Points of a CSV with the header ``ranks,bytes,seconds`` and optionally ``bandwidth_Bps``,
    ``op`` and ``idle_s`` (any column order; an empty bandwidth or idle cell means none)."""
    rows = list(csv.reader(_text(path).splitlines()))
    rows = [r for r in rows if r and any(c.strip() for c in r)]
    if not rows:
        raise InputError(f"measurements {path}: empty file")
    head = [c.strip().lower() for c in rows[0]]
    need = ("ranks", "bytes", "seconds")
    missing = [k for k in need if k not in head]
    if missing:
        raise InputError(f"measurements {path}: header must name ranks, bytes, seconds; "
                         f"missing {missing[0]!r}")
    col = {k: head.index(k) for k in need}
    bw_col = head.index("bandwidth_bps") if "bandwidth_bps" in head else None
    op_col = head.index("op") if "op" in head else None
    idle_col = head.index("idle_s") if "idle_s" in head else None
    out = []
    for i, row in enumerate(rows[1:], start=2):
        where = f"measurements {path} line {i}"
        try:
            bw_cell = row[bw_col].strip() if bw_col is not None else ""
            op = (row[op_col].strip() if op_col is not None else "") or "allreduce"
            idle_cell = row[idle_col].strip() if idle_col is not None else ""
            m = Measurement(int(row[col["ranks"]]), float(row[col["bytes"]]),
                            float(row[col["seconds"]]), float(bw_cell) if bw_cell else None, op,
                            float(idle_cell) if idle_cell else None)
        except (ValueError, IndexError):
            raise InputError(f"{where}: expected integer ranks and numeric bytes, seconds"
                             "(, bandwidth_Bps, idle_s)") from None
        m.check(where)
        out.append(m)
    if not out:
        raise InputError(f"measurements {path}: no data rows")
    return out


_RANK_LINE = re.compile(r"^#\s+Rank\s+\d+\s")


def read_nccl_tests(path: str, ranks: int | None = None) -> list[Measurement]:
    """Points of nccl-tests' ``all_reduce_perf`` output: the out-of-place time of every size.

    The column positions and the time unit (us or ms) come from the file's header lines
    (:mod:`sim.nccl_tests_output`). The rank count is the number of ``#  Rank N ...`` lines
    unless ``ranks`` is given.
    """
    from sim.nccl_tests_output import read_rows

    where = f"measurements {path}"
    lines = _text(path).splitlines()
    n = ranks if ranks is not None else sum(1 for ln in lines if _RANK_LINE.match(ln))
    if n < 2:
        raise InputError(f"{where}: no rank count (no '#  Rank' lines; "
                         "give --ranks) or fewer than 2 ranks")
    out = []
    for i, size_bytes, time_s in read_rows(lines, where):
        if size_bytes == 0:
            continue
        m = Measurement(n, size_bytes, time_s)
        m.check(f"{where} line {i}")
        out.append(m)
    if not out:
        raise InputError(f"{where}: no all_reduce_perf data rows")
    return out


def write_csv(path: str, points: list[Measurement]) -> None:
    """Write ``points`` as a CSV :func:`read_csv` reads back (atomically)."""
    from compctl_base.atomic_files import atomic_write_bytes

    if any(m.idle_s is not None for m in points):
        lines = ["ranks,bytes,seconds,bandwidth_Bps,op,idle_s"]
        lines += [f"{m.ranks},{m.size_bytes:.0f},{m.time_s!r},"
                  f"{'' if m.bandwidth_Bps is None else repr(m.bandwidth_Bps)},{m.op},"
                  f"{'' if m.idle_s is None else repr(m.idle_s)}" for m in points]
    elif any(m.op != "allreduce" for m in points):
        lines = ["ranks,bytes,seconds,bandwidth_Bps,op"]
        lines += [f"{m.ranks},{m.size_bytes:.0f},{m.time_s!r},"
                  f"{'' if m.bandwidth_Bps is None else repr(m.bandwidth_Bps)},{m.op}"
                  for m in points]
    elif any(m.bandwidth_Bps is not None for m in points):
        lines = ["ranks,bytes,seconds,bandwidth_Bps"]
        lines += [f"{m.ranks},{m.size_bytes:.0f},{m.time_s!r},"
                  f"{'' if m.bandwidth_Bps is None else repr(m.bandwidth_Bps)}" for m in points]
    else:
        lines = ["ranks,bytes,seconds"]
        lines += [f"{m.ranks},{m.size_bytes:.0f},{m.time_s!r}" for m in points]
    atomic_write_bytes(path, ("\n".join(lines) + "\n").encode())


def transfer_s(m: Measurement) -> float:
    """A point's ideal transfer time: the bytes a rank sends (ring allreduce ``2 (n-1)/n`` of
    its message, ring allgather ``n-1`` messages) at its link's rate (0 if it names none)."""
    if not m.bandwidth_Bps:
        return 0.0
    n = m.ranks
    sent = (n - 1) * m.size_bytes if m.op == "allgather" else 2.0 * (n - 1) / n * m.size_bytes
    return float(sent / m.bandwidth_Bps)
