"""One collective at the stepwise level on constant links: what ``compctl cost --fidelity
stepwise`` prints beside the closed form.

The cluster is the flat one (every rank its own link of the given latency and bandwidth) unless
a topology file is given; the schedule is :func:`sim.collectives.schedule_for`'s; the transport
decides chunking and extra latencies (:mod:`sim.transports`).
"""

from __future__ import annotations

from typing import Any

from sim.collectives import schedule_for
from sim.compress.spec import Payload
from traces.model import PiecewiseTrace, TraceSet

from .stepwise_net import StepwiseNetwork
from .topology import Topology, flat_topology, load_topology
from .transports import get_transport

__all__ = ["stepwise_collective"]


def stepwise_collective(
    collective: str,
    workers: int,
    payload: Payload,
    *,
    latency_s: float,
    bandwidth_Bps: float,
    transport: str = "ideal",
    calibration: str | None = None,
    topology: str | None = None,
    gpus_per_node: int = 1,
    intra_latency_s: float = 5e-6,
    intra_bandwidth_Bps: float = 100e9,
) -> dict[str, Any]:
    """``{"time_s", "chunks", "steps", "transport"}`` of one collective started at time 0."""
    tp = get_transport(transport, calibration)
    link = TraceSet.single(PiecewiseTrace.constant(latency_s, bandwidth_Bps))
    topo: Topology
    if topology is None:
        topo = flat_topology(
            workers,
            link,
            gpus_per_node=gpus_per_node,
            intra_latency_s=intra_latency_s,
            intra_bandwidth_Bps=intra_bandwidth_Bps,
        )
    else:
        from traces.bundled import resolve_trace

        topo = load_topology(topology, workers, resolve_trace)
        gpus_per_node = topo.gpus_per_node
    net = StepwiseNetwork(topo, tp)
    sched = schedule_for(collective, workers, payload, gpus_per_node=gpus_per_node)
    cs = net.compile(sched)
    return {
        "time_s": net.run(cs, 0.0),
        "chunks": cs.chunks,
        "steps": sched.steps,
        "transport": tp.name,
    }
