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

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from sim.errors import InputError

from .transport_doc import calibration_document, dump_document
from .transport_measurements import (
    Measurement,
    read_csv,
    read_nccl_tests,
    transfer_s,
    write_csv,
)
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


def predict_s(
    tp: Transport,
    ranks: int,
    size_bytes: float,
    *,
    latency_s: float,
    bandwidth_Bps: float,
    collective: str = "ring",
    gap_s: float | None = None,
) -> float:
    """The simulator's time for one ``collective`` of ``size_bytes`` per rank over ``ranks``
    ranks on the flat cluster of constant links (``latency_s``, ``bandwidth_Bps``) under ``tp``:
    one call alone (a shaper's bucket gives it nothing), or with ``gap_s`` one of many calls
    back to back, the links idle ``gap_s`` before each, as the microbenchmark times them
    (:meth:`StepwiseNetwork.run_repeated`: the bucket settles)."""
    from sim.collectives import schedule_for
    from sim.compress.spec import Payload
    from traces.model import PiecewiseTrace, TraceSet

    from .stepwise_net import StepwiseNetwork
    from .topology import flat_topology

    link = TraceSet.single(PiecewiseTrace.constant(latency_s, bandwidth_Bps))
    net = StepwiseNetwork(flat_topology(ranks, link), tp)
    cs = net.compile(schedule_for(collective, ranks, Payload(size_bytes)))
    if gap_s is not None:
        return float(net.run_repeated(cs, gap_s))
    return float(net.run(cs, 0.0))


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
    message_bytes: bool = False,
    spaced_calls: bool = False,
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

    ``message_bytes``: also fit the transport's ``message_bytes`` (fixed wire bytes per message
    of a step, >= 0), with the latencies (on every fitted point, after the efficiencies with
    ``min_transfer_s``); otherwise it stays at the base transport's value.

    ``spaced_calls``: price every point as the microbenchmark times it, one of many calls back
    to back with the links idle for the point's ``idle_s`` before each (its barrier), under
    ``base``'s shaper burst (:func:`predict_s` ``gap_s``): a tbf bucket that refills between
    and within calls lets small calls run faster than the rate, and the fit no longer reads
    that as a higher efficiency or fewer wire bytes. Needs points that name their link rates.
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
    if spaced_calls and not per_point:
        raise InputError("pricing spaced calls needs measurements that name their link rates")

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
    # index of the per-message bytes in x (after the allgather terms), in units of 100 bytes
    mb = ag + (1 if gathers else 0) + (1 if by_size else 0)

    def transport_for(x: np.ndarray, model: str) -> tuple[Transport, float]:
        """The candidate transport and, for unshaped points, the link bandwidth."""
        b_s = 0.0 if base_held else float(x[2]) * 1e-6
        hop_s = float(x[1]) * 1e-6
        tp = replace(unit, base_latency_s=b_s, hop_latency_s=hop_s if model == "additive"
                     else 0.0, hop_floor_s=hop_s if model == "overlap" else 0.0)
        if message_bytes:
            tp = replace(tp, message_bytes=max(float(x[mb]), 0.0) * 100.0)
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
                         collective="allgather" if m.op == "allgather" else collective,
                         gap_s=gap_of(m))

    def gap_of(m: Measurement) -> float | None:
        return (m.idle_s or 0.0) if spaced_calls else None

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
    if message_bytes:
        lo, hi = lo + [0.0], hi + [np.inf]
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
                      + ([first] if gathers else []) + ([0.0] if by_size else [])
                      + ([1.0] if message_bytes else []))
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
                         collective="allgather" if m.op == "allgather" else collective,
                         gap_s=gap_of(m))
        rows.append({"ranks": m.ranks, "op": m.op, "bytes": m.size_bytes,
                     "measured_s": m.time_s,
                     "predicted_s": pred, "rel_error": pred / m.time_s - 1.0,
                     "held_out": held(m), "bandwidth_Bps": m.bandwidth_Bps})
    return FitResult(tp, link_bw, link_latency_s, bw, base_held, rows, latency_model)
