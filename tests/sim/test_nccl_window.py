"""The bundled ``nccl`` transport keeps two channels' buffers in flight per link.

NCCL duplicates a ring's channels after the ring search, and every channel has its own 4 MiB
Simple buffer of 8 slots, so a link carries 8 MiB per round trip at least. Whether a ring
allreduce is bandwidth-bound or window-bound on a long link follows from that figure alone.
"""

from __future__ import annotations

import pytest

from sim.collectives import schedule as sc
from sim.stepwise_net import StepwiseNetwork
from sim.topology import flat_topology
from sim.transports import TRANSPORTS
from traces.model import PiecewiseTrace, TraceSet

_MiB = float(1 << 20)


def _ring_s(n: int, m: float, lat_s: float, bw_Bps: float) -> float:
    tp = TRANSPORTS["nccl"]
    net = StepwiseNetwork(flat_topology(n, TraceSet.single(PiecewiseTrace.constant(lat_s, bw_Bps))),
                          tp)
    return net.run(net.compile(sc.ring_allreduce_schedule(n, m)), 0.0)


def test_in_flight_bytes_are_two_channels_of_nccl_buffers() -> None:
    tp = TRANSPORTS["nccl"]
    assert tp.chunk_bytes == 4 * _MiB / 8  # NCCL_BUFFSIZE / NCCL_STEPS
    assert tp.slots * tp.chunk_bytes == 2 * 4 * _MiB  # two channels' 4 MiB buffers


@pytest.mark.parametrize("n", [4, 16])
def test_bandwidth_bound_below_8_mib_per_round_trip(n: int) -> None:
    # 5 Gbit/s x (2 x 5 ms) = 6.25 MB in flight needed: two channels' 8 MiB suffice
    bw, m = 5e9 / 8, 256 * _MiB
    t = _ring_s(n, m, 5e-3, bw)
    wire = 2 * (n - 1) / n * m / bw
    assert wire < t < 1.05 * wire + 0.05


@pytest.mark.parametrize("n", [4, 16])
def test_window_bound_above_8_mib_per_round_trip(n: int) -> None:
    # 5 Gbit/s x (2 x 20 ms) = 25 MB needed: 8 MiB per round trip caps the link near 1.6 Gbit/s
    bw, m, d = 5e9 / 8, 256 * _MiB, 20e-3
    tp = TRANSPORTS["nccl"]
    chunk_s = tp.chunk_bytes / bw
    window_Bps = tp.slots * tp.chunk_bytes / (chunk_s + 2 * (d + tp.hop_latency_s))
    t = _ring_s(n, m, d, bw)
    capped = 2 * (n - 1) / n * m / window_Bps
    assert capped < t < 1.1 * capped + 0.1
    assert t > 2.5 * (2 * (n - 1) / n * m / bw)
