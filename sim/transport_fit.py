"""Fitting a transport's parameters to measured allreduce times (``compctl calibrate``).

Measurements are ``(ranks, bytes, seconds)`` points: one allreduce of ``bytes`` per rank over
``ranks`` ranks took ``seconds``. They come from a CSV (header ``ranks,bytes,seconds``), from
nccl-tests' ``all_reduce_perf`` text output (out-of-place time), or from the gloo
microbenchmark in :mod:`realrun.allreduce_bench`. A point may also name the bandwidth of the
link it was measured on (CSV column ``bandwidth_Bps``; the netns microbenchmark sets it to the
tbf rate): when every point does, the fit is *against those links* (below).

The model is the simulator's own: every point is predicted by running the collective's schedule
at the stepwise level (:class:`sim.stepwise_net.StepwiseNetwork`) on the flat cluster under a
candidate transport, so a fitted file means exactly what the simulator will do with it. Three
parameters are fitted by :func:`scipy.optimize.least_squares` on relative residuals: the
once-per-collective ``base_latency_s``, the per-step ``hop_latency_s`` and the bandwidth a
transfer reaches. The per-step time is fitted twice, as an additive ``hop_latency_s`` and as a
``hop_floor_s`` that overlaps the transfer (on an oversubscribed CPU a rank's wake-up overlaps
the kernel's receiving of its bytes); the better fit on the fitted points is kept. The bandwidth becomes ``bandwidth_efficiency`` relative to the link bandwidth
the user will simulate with (or, without one, the fitted bandwidth is the link's and the
efficiency is 1). The other parameters (chunking, slots, host copy, window) are held at the base
transport's values. With a single rank count the base and per-hop latencies cannot be told
apart (every point has the same number of steps): the base latency is then held at 0.

Points that name their link bandwidth (measured on shaped links, possibly several rates) are
predicted each on its own link, and the third parameter is ``bandwidth_efficiency`` itself:
the fraction of the shaped rate a transfer reaches (TCP/IP and Ethernet headers, ACKs sharing
the shaped egress, the congestion controller's pacing). A file fitted this way applies to a
simulation of any link rate, as the trace gives it. Such points may also time allgathers
(``op`` allgather: ``bytes`` from every rank, the simulator's ``allgather`` schedule); a fourth
parameter, ``allgather_efficiency``, is then fitted for them.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from sim.errors import InputError

from .transport_doc import calibration_document, dump_document
from .transports import Transport

__all__ = [
    "Measurement",
    "FitResult",
    "read_csv",
    "read_nccl_tests",
    "write_csv",
    "predict_s",
    "transfer_s",
    "fit_transport",
    "calibration_document",
    "dump_document",
]


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


def _text(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or exc
        raise InputError(f"measurements {path}: {reason}") from None


def read_csv(path: str) -> list[Measurement]:
    """Points of a CSV with the header ``ranks,bytes,seconds`` and optionally ``bandwidth_Bps``
    (any column order; an empty bandwidth cell means none)."""
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
    out = []
    for i, row in enumerate(rows[1:], start=2):
        where = f"measurements {path} line {i}"
        try:
            bw_cell = row[bw_col].strip() if bw_col is not None else ""
            op = (row[op_col].strip() if op_col is not None else "") or "allreduce"
            m = Measurement(int(row[col["ranks"]]), float(row[col["bytes"]]),
                            float(row[col["seconds"]]), float(bw_cell) if bw_cell else None, op)
        except (ValueError, IndexError):
            raise InputError(f"{where}: expected integer ranks and numeric bytes, seconds"
                             "(, bandwidth_Bps)") from None
        m.check(where)
        out.append(m)
    if not out:
        raise InputError(f"measurements {path}: no data rows")
    return out


_RANK_LINE = re.compile(r"^#\s+Rank\s+\d+\s")


def read_nccl_tests(path: str, ranks: int | None = None) -> list[Measurement]:
    """Points of nccl-tests' ``all_reduce_perf`` output: the out-of-place time of every size.

    The rank count is the number of ``#  Rank N ...`` lines unless ``ranks`` is given.
    """
    text = _text(path)
    lines = text.splitlines()
    n = ranks if ranks is not None else sum(1 for ln in lines if _RANK_LINE.match(ln))
    if n < 2:
        raise InputError(f"measurements {path}: no rank count (no '#  Rank' lines; "
                         "give --ranks) or fewer than 2 ranks")
    out = []
    for i, ln in enumerate(lines, start=1):
        tok = ln.split()
        if not tok or ln.lstrip().startswith("#") or not tok[0].isdigit():
            continue
        # size count type redop [root] | time algbw busbw #wrong | time algbw busbw #wrong
        if len(tok) < 12:
            raise InputError(f"measurements {path} line {i}: not an all_reduce_perf data row")
        try:
            m = Measurement(n, float(tok[0]), float(tok[-8]) / 1e6)
        except ValueError:
            raise InputError(
                f"measurements {path} line {i}: not an all_reduce_perf data row") from None
        if m.size_bytes == 0:
            continue
        m.check(f"measurements {path} line {i}")
        out.append(m)
    if not out:
        raise InputError(f"measurements {path}: no all_reduce_perf data rows")
    return out


def write_csv(path: str, points: list[Measurement]) -> None:
    """Write ``points`` as a CSV :func:`read_csv` reads back (atomically)."""
    from compctl_base.atomic_files import atomic_write_bytes

    if any(m.op != "allreduce" for m in points):
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


def predict_s(
    tp: Transport,
    ranks: int,
    size_bytes: float,
    *,
    latency_s: float,
    bandwidth_Bps: float,
    collective: str = "ring",
) -> float:
    """The simulator's time for one ``collective`` of ``size_bytes`` per rank over ``ranks``
    ranks on the flat cluster of constant links (``latency_s``, ``bandwidth_Bps``) under ``tp``."""
    from sim.collectives import schedule_for
    from sim.compress.spec import Payload
    from traces.model import PiecewiseTrace, TraceSet

    from .stepwise_net import StepwiseNetwork
    from .topology import flat_topology

    link = TraceSet.single(PiecewiseTrace.constant(latency_s, bandwidth_Bps))
    net = StepwiseNetwork(flat_topology(ranks, link), tp)
    cs = net.compile(schedule_for(collective, ranks, Payload(size_bytes)))
    return float(net.run(cs, 0.0))


def transfer_s(m: Measurement) -> float:
    """A point's ideal transfer time: the bytes a rank sends (ring allreduce ``2 (n-1)/n`` of
    its message, ring allgather ``n-1`` messages) at its link's rate (0 if it names none)."""
    if not m.bandwidth_Bps:
        return 0.0
    n = m.ranks
    sent = (n - 1) * m.size_bytes if m.op == "allgather" else 2.0 * (n - 1) / n * m.size_bytes
    return float(sent / m.bandwidth_Bps)


@dataclass
class FitResult:
    """A fitted transport with its residuals."""

    transport: Transport
    link_bandwidth_Bps: float
    link_latency_s: float
    fitted_bandwidth_Bps: float
    base_held: bool
    points: list[dict[str, Any]]
    latency_model: str = "additive"

    def summary(self) -> dict[str, Any]:
        """Fit quality over the fitted and the held-out points."""
        out: dict[str, Any] = {}
        for key, sel in (("fit", False), ("held_out", True)):
            rel = [abs(p["rel_error"]) for p in self.points if p["held_out"] == sel]
            if rel:
                out[key] = {"points": len(rel),
                            "rms_rel_error": math.sqrt(sum(r * r for r in rel) / len(rel)),
                            "mean_abs_rel_error": sum(rel) / len(rel),
                            "max_abs_rel_error": max(rel)}
        return out


def fit_transport(
    points: list[Measurement],
    base: Transport,
    *,
    link_latency_s: float = 0.0,
    link_bandwidth_Bps: float | None = None,
    collective: str = "ring",
    fit_max_bytes: float | None = None,
    fit_ranks: set[int] | None = None,
    hold: Callable[[Measurement], bool] | None = None,
    allgather_by_size: bool = False,
    call_per_tensor: bool = False,
    min_transfer_s: float = 0.0,
) -> FitResult:
    """Fit ``base``'s latencies and bandwidth efficiency to ``points`` (module docstring).

    Points above ``fit_max_bytes``, with a rank count outside ``fit_ranks`` or for which
    ``hold`` is true are held out: not fitted on, but predicted and reported (``held_out``).
    When every point names its link bandwidth, each is predicted on that link and the
    efficiency is fitted directly (``link_bandwidth_Bps`` must then be ``None``).

    ``allgather_by_size``: with allgather points of three transfer times or more (bytes over
    the link rate), the allgather efficiency is fitted as a function of the transfer time
    (``allgather_efficiency`` at the reference time, a power of two seconds near the geometric
    mean of the fitted points', plus ``allgather_efficiency_per_doubling``). ``call_per_tensor`` sets the transport field of that
    name (the measured library is driven one call per tensor, as compctl's real hook does).

    ``min_transfer_s`` (points on shaped links only): the bandwidth efficiencies are fitted on
    the points whose ideal transfer (a rank's bytes at its link's rate, :func:`transfer_s`)
    takes at least this long; then the per-step and base latencies on every fitted point, the
    efficiencies held. A token-bucket shaper passes its burst at once (tbf in netns mode: 1 ms
    of traffic), so shorter transfers run faster than the sustained rate and, fitted with the
    long ones, pull the efficiencies up (2 ranks, netns: allgather 0.82-0.89 fitted on all
    points, 0.65 on transfers >= 2 ms, the efficiency the sparse exchange reaches in training).
    """
    import numpy as np
    from scipy.optimize import least_squares

    if not points:
        raise InputError("no measurements to fit")
    shaped = [m.bandwidth_Bps is not None for m in points]
    per_point = all(shaped)
    if any(shaped) and not per_point:
        raise InputError("some measurements name their link bandwidth and some do not; "
                         "fit them separately")
    if per_point and link_bandwidth_Bps is not None:
        raise InputError("the measurements name their link bandwidths: give no --link-gbps")

    def held(m: Measurement) -> bool:
        return (fit_max_bytes is not None and m.size_bytes > fit_max_bytes) or (
            fit_ranks is not None and m.ranks not in fit_ranks) or (
            hold is not None and hold(m))

    train = [m for m in points if not held(m)]
    if len(train) < 2:
        raise InputError(f"only {len(train)} measurement(s) left to fit on; need at least 2")
    if not (math.isfinite(min_transfer_s) and min_transfer_s >= 0):
        raise InputError(f"the minimum transfer time must be >= 0, got {min_transfer_s!r}")
    long_train = train
    if min_transfer_s > 0:
        if not per_point:
            raise InputError("a minimum transfer time needs measurements that name their link "
                             "rates (netns measurements or a bandwidth_Bps column)")
        long_train = [m for m in train if transfer_s(m) >= min_transfer_s]
        ops_left = {m.op for m in long_train}
        if len(long_train) < 2 or ops_left != {m.op for m in train}:
            raise InputError(f"too few measurements with transfers of at least "
                             f"{min_transfer_s * 1e3:g} ms to fit the efficiencies on "
                             f"({len(long_train)}; every operation needs some)")
    base_held = len({m.ranks for m in train}) < 2
    gathers = any(m.op == "allgather" for m in train)
    if any(m.op == "allgather" for m in points) and not per_point:
        raise InputError("allgather measurements need their link rates (netns measurements or "
                         "a bandwidth_Bps column)")
    unit = replace(base, bandwidth_efficiency=1.0, allgather_efficiency=0.0,
                   allgather_efficiency_per_doubling=0.0,
                   call_per_tensor=1 if call_per_tensor else 0)
    ag = 3 if not base_held else 2  # index of the allgather efficiency in x
    ag_times = sorted({m.size_bytes / float(m.bandwidth_Bps or 1.0)
                       for m in train if m.op == "allgather"})
    by_size = allgather_by_size and per_point and len(ag_times) >= 3
    if by_size:
        mean_log2 = sum(math.log2(t) for t in ag_times) / len(ag_times)
        unit = replace(unit, allgather_reference_s=float(2.0 ** round(mean_log2)))

    def transport_for(x: np.ndarray, model: str) -> tuple[Transport, float]:
        """The candidate transport and, for unshaped points, the link bandwidth."""
        b_s = 0.0 if base_held else float(x[2]) * 1e-6
        hop_s = float(x[1]) * 1e-6
        tp = replace(unit, base_latency_s=b_s, hop_latency_s=hop_s if model == "additive"
                     else 0.0, hop_floor_s=hop_s if model == "overlap" else 0.0)
        if per_point:
            return replace(tp, bandwidth_efficiency=min(1.0, float(x[0])),
                           allgather_efficiency=min(1.0, float(x[ag])) if gathers else 0.0,
                           allgather_efficiency_per_doubling=float(x[ag + 1]) if by_size
                           else 0.0), 0.0
        return tp, float(x[0]) * 1e9

    def predict(m: Measurement, x: np.ndarray, model: str) -> float:
        tp, bw = transport_for(x, model)
        return predict_s(tp, m.ranks, m.size_bytes, latency_s=link_latency_s,
                         bandwidth_Bps=m.bandwidth_Bps or bw,
                         collective="allgather" if m.op == "allgather" else collective)

    # Start from the largest point's bus bandwidth and the smallest point's time per step.
    big = max(train, key=lambda m: m.size_bytes)
    small = min(train, key=lambda m: m.size_bytes)
    bw0 = 2.0 * (big.ranks - 1) / big.ranks * big.size_bytes / big.time_s
    per_step0 = small.time_s / (2.0 * (small.ranks - 1))
    if per_point:
        lo, hi = [1e-6, 0.0], [1.0, np.inf]
        first = min(1.0, bw0 / float(big.bandwidth_Bps or bw0))
    else:
        lo, hi = [1e-9, 0.0], [np.inf, np.inf]
        first = bw0 / 1e9
    if not base_held:
        lo, hi = lo + [0.0], hi + [np.inf]
    if gathers:
        lo, hi = lo + [1e-6], hi + [1.0]
    if by_size:
        lo, hi = lo + [-0.25], hi + [0.25]
    # Two per-hop latency models (sim.transports): additive (hop_latency_s) and overlapping
    # the transfer (hop_floor_s); the one with the smaller residual on the fitted points wins
    # (additive on a tie).
    best: tuple[float, str, np.ndarray] | None = None
    # The efficiencies' places in x (the rest are latencies): with min_transfer_s they are
    # fitted on long transfers first, then held while the latencies are fitted on every point.
    eff_idx = [0] + ([ag] if gathers else []) + ([ag + 1] if by_size else [])

    def solve(pts: list[Measurement], x_start: np.ndarray, free: list[int],
              model: str) -> np.ndarray:
        def resid(z: np.ndarray) -> np.ndarray:
            x = x_start.copy()
            x[free] = z
            return np.array([predict(m, x, model) / m.time_s - 1.0 for m in pts])

        sol = least_squares(resid, x_start[free], bounds=(np.array(lo)[free],
                                                           np.array(hi)[free]),
                            x_scale="jac", method="trf", xtol=1e-12, ftol=1e-12, gtol=1e-12,
                            max_nfev=2000)
        x = x_start.copy()
        x[free] = sol.x
        return x

    for model, hop0 in (("additive", 0.5 * per_step0), ("overlap", per_step0)):
        x0 = np.array([first, hop0 * 1e6] + ([] if base_held else [0.5 * hop0 * 1e6])
                      + ([first] if gathers else []) + ([0.0] if by_size else []))
        every = list(range(len(x0)))
        x = solve(long_train, x0, every, model)
        if min_transfer_s > 0:
            x = solve(train, x, [i for i in every if i not in eff_idx], model)
        cost = float(np.sum(np.array([predict(m, x, model) / m.time_s - 1.0
                                      for m in train]) ** 2))
        if best is None or cost < best[0] * (1.0 - 1e-6) - 1e-18:
            best = (cost, model, x)
    assert best is not None
    _, latency_model, x_best = best
    tp, bw = transport_for(x_best, latency_model)
    if per_point:
        link_bw = bw = 0.0
    else:
        link_bw = bw if link_bandwidth_Bps is None else link_bandwidth_Bps
        eff = bw / link_bw
        if eff > 1.0 + 1e-9:
            raise InputError(f"the fitted bandwidth ({bw * 8 / 1e9:.3f} Gbit/s) exceeds the "
                             f"link bandwidth given ({link_bw * 8 / 1e9:.3f} Gbit/s); give a "
                             "larger one")
        tp = replace(tp, bandwidth_efficiency=min(1.0, eff))
    rows = []
    for m in points:
        pred = predict_s(tp, m.ranks, m.size_bytes, latency_s=link_latency_s,
                         bandwidth_Bps=m.bandwidth_Bps or link_bw,
                         collective="allgather" if m.op == "allgather" else collective)
        rows.append({"ranks": m.ranks, "op": m.op, "bytes": m.size_bytes,
                     "measured_s": m.time_s,
                     "predicted_s": pred, "rel_error": pred / m.time_s - 1.0,
                     "held_out": held(m), "bandwidth_Bps": m.bandwidth_Bps})
    return FitResult(tp, link_bw, link_latency_s, bw, base_held, rows, latency_model)
