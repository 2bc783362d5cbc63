"""A stepwise phase whose messages differ in size, as flows for the exact max-min fair share.

:func:`fair_flows` turns a phase's routed messages into flows over compact links (under
per-flow hashing over several spines a rack uplink becomes one link per spine, each with
``1 / spines`` of its bandwidth, and each message crosses its hashed spine's);
:func:`fair_transfer_s` prices one step of them: every message a flow, the links shared
max-min fairly and re-shared as flows finish (:func:`sim.maxmin.fair_makespan_s`), each flow
capped by the TCP window over its round trip. :mod:`sim.stepwise_net` uses it for phases whose
messages are not all equal; for equal messages the busiest link's drain time is the same
number (``tests/sim/test_maxmin.py``, ``docs/stepwise.md``).

Pure numpy: no SimPy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .maxmin import fair_makespan_s
from .topology import Topology

__all__ = ["FairFlows", "fair_flows", "fair_transfer_s"]

_UPLINK_HOPS = (2, 3)  # the columns of Topology.paths that cross a rack uplink


@dataclass(frozen=True, eq=False)
class FairFlows:
    """A phase's messages as flows over compact links.

    ``flow_links[k]``: compact ids of the links message ``k`` crosses (-1 padded); compact link
    ``j`` is topology link ``link_ids[j]`` at ``scale[j]`` of its bandwidth (``1 / spines`` for
    one spine's share of a rack uplink under per-flow hashing, 1 otherwise).
    """

    flow_links: np.ndarray
    link_ids: np.ndarray
    scale: np.ndarray


def fair_flows(topo: Topology, paths: np.ndarray, src: np.ndarray, dst: np.ndarray) -> FairFlows:
    """The flows of messages ``src -> dst`` routed as ``paths`` (:meth:`Topology.paths`)."""
    keys = paths.copy()
    spines = max(topo.spines, 1)
    if topo.spines > 1 and topo.load_balancing != "spray":
        from sim.lossy.multipath import spine_of

        spine = spine_of(src, dst, spines)
        for col in _UPLINK_HOPS:
            on = keys[:, col] >= 0
            keys[on, col] = topo.n_links + keys[on, col] * spines + spine[on]
    valid = keys >= 0
    uniq, inv = np.unique(keys[valid], return_inverse=True)
    flow_links = np.full(keys.shape, -1, dtype=np.int64)
    flow_links[valid] = inv
    virtual = uniq >= topo.n_links
    link_ids = np.where(virtual, (uniq - topo.n_links) // spines, uniq).astype(np.int64)
    scale = np.where(virtual, 1.0 / spines, 1.0)
    return FairFlows(flow_links, link_ids, scale)


def fair_transfer_s(
    fair: FairFlows,
    msg_bytes: np.ndarray,
    lat_path_s: np.ndarray,
    bandwidth_Bps: np.ndarray,
    window_bytes: float = 0.0,
) -> float:
    """Seconds until every message has arrived: ``msg_bytes`` over the links of ``fair`` at
    ``bandwidth_Bps`` (every topology link's, efficiency applied), shared max-min fairly; with
    ``window_bytes`` each flow is capped at the window over its round trip (``2 x`` its path
    latency ``lat_path_s``)."""
    capacity = bandwidth_Bps[fair.link_ids] * fair.scale
    rate_cap = None
    if window_bytes > 0:
        rtt = 2.0 * lat_path_s
        rate_cap = np.full(len(rtt), np.inf)
        rate_cap[rtt > 0] = window_bytes / rtt[rtt > 0]
    return fair_makespan_s(fair.flow_links, msg_bytes, capacity, rate_cap)
