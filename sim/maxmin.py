"""Max-min fair sharing of links by flows that each cross several links (progressive filling).

A *flow* crosses a set of links (a row of ``flow_links``: compact link ids, ``-1`` padded) and may
have its own rate cap (a TCP window over its round trip). Its max-min fair rate is what
progressive filling gives: every flow's rate rises together from zero; when a link runs out of
capacity, the flows crossing it keep the rate they have (the link is their bottleneck), and when
a flow reaches its cap it stops there; the others keep rising. The result is the unique
allocation in which no link carries more than its capacity and every flow is either at its cap
or crosses a saturated link on which no flow has a higher rate (Bertsekas and Gallager, *Data
Networks*, 2nd ed., section 6.5.2).

:func:`fair_makespan_s` runs a set of flows that all start together to completion: the rates
are recomputed whenever a flow finishes (its links' capacity goes to the flows left), so the
result is exact for piecewise-constant rates, not a bound.

Vectorised: one round of progressive filling is a few ``bincount`` passes over the flows' link
incidences; there are as many rounds as distinct bottleneck levels, and as many re-allocations
as distinct finishing times.

Pure numpy: no SimPy.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["maxmin_rates", "fair_makespan_s"]

_TIE = 1e-12  # relative: shares within this of the smallest saturate in the same round


def maxmin_rates(
    flow_links: np.ndarray, capacity: np.ndarray, rate_cap: np.ndarray | None = None
) -> np.ndarray:
    """Max-min fair rates (bytes/s) of flows crossing ``flow_links`` of ``capacity`` (bytes/s).

    ``flow_links``: ``(flows, hops)`` compact link ids into ``capacity``, ``-1`` padded (a
    link appears at most once per row). ``rate_cap``: each flow's own cap (``inf``: none). A
    flow that crosses no link and has no cap gets ``inf``.
    """
    links = np.asarray(flow_links, dtype=np.int64)
    if links.ndim != 2:
        raise ValueError("flow_links must be (flows, hops)")
    n_flows, hops = links.shape
    cap = np.asarray(capacity, dtype=float)
    limit = np.full(n_flows, math.inf) if rate_cap is None else np.asarray(rate_cap, float)
    valid = links >= 0
    rows = np.repeat(np.arange(n_flows, dtype=np.int64), hops).reshape(n_flows, hops)[valid]
    cols = links[valid]
    rate = np.zeros(n_flows)
    frozen = np.zeros(n_flows, dtype=bool)
    left = cap.copy()
    level = 0.0
    while not frozen.all():
        live = ~frozen[rows]
        counts = np.bincount(cols[live], minlength=len(cap))
        busy = counts > 0
        share = np.full(len(cap), math.inf)
        share[busy] = np.maximum(left[busy], 0.0) / counts[busy]
        head = limit[~frozen] - level
        inc = min(float(share.min()) if len(share) else math.inf, float(head.min()))
        if not math.isfinite(inc):  # flows on no link and with no cap
            rate[~frozen] = math.inf
            break
        level += inc
        left -= inc * counts
        saturated = busy & (share <= inc * (1.0 + _TIE))
        left[saturated] = 0.0
        stop = np.zeros(n_flows, dtype=bool)
        stop[rows[live & saturated[cols]]] = True
        stop |= ~frozen & (limit - level <= _TIE * max(level, 1e-300))
        stop &= ~frozen
        rate[stop] = level
        frozen |= stop
    return rate


def fair_makespan_s(
    flow_links: np.ndarray,
    sizes_bytes: np.ndarray,
    capacity: np.ndarray,
    rate_cap: np.ndarray | None = None,
) -> float:
    """Time until every flow has sent its ``sizes_bytes`` when all start at once and share the
    links max-min fairly (:func:`maxmin_rates`), re-allocated each time a flow finishes."""
    links = np.asarray(flow_links, dtype=np.int64)
    rem = np.asarray(sizes_bytes, dtype=float).copy()
    caps = None if rate_cap is None else np.asarray(rate_cap, dtype=float)
    alive = rem > 0
    t = 0.0
    while alive.any():
        idx = np.flatnonzero(alive)
        r = maxmin_rates(links[idx], capacity, None if caps is None else caps[idx])
        with np.errstate(divide="ignore"):
            need = np.where(np.isinf(r), 0.0, rem[idx] / r)
        dt = float(need.min())
        t += dt
        done = need <= dt * (1.0 + _TIE)
        rem[idx] = np.where(done, 0.0, rem[idx] - r * dt)
        alive[idx[done]] = False
    return t
