"""Synthetic calibration points shared by the transport-fit tests."""

from __future__ import annotations

from sim.transport_fit import Measurement, predict_s
from sim.transports import Transport


def shaped_points(truth: Transport) -> list[Measurement]:
    """Allreduce and allgather times ``truth`` predicts on 2 ranks over 25 and 100 Mbit/s links,
    for 4 KiB, 64 KiB and 1 MiB messages (no added latency)."""
    pts = []
    for mbit in (25, 100):
        bw = mbit * 1e6 / 8
        for size in (4096, 65536, 2**20):
            for op, coll in (("allreduce", "ring"), ("allgather", "allgather")):
                t = predict_s(truth, 2, size, latency_s=0.0, bandwidth_Bps=bw, collective=coll)
                pts.append(Measurement(2, float(size), t, bw, op))
    return pts
