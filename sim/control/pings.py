"""What a latency ping is, in both worlds: a collective of a one-element payload, whose byte
term is nil, so its duration over its latency count is the per-message latency (software
overhead included). The real hook runs ``count`` of them before its first controlled step
(:mod:`realrun.hook.pings`); the simulator prices one at the same step
(``SimConfig.latency_pings``), and each hands the result to its link monitor as the latency
reference (:meth:`sim.control.monitor.LinkMonitor.set_latency_reference`).
"""

from __future__ import annotations

__all__ = ["PING_BYTES", "PING_COLLECTIVE"]

#: What a ping is priced as: an allgather ...
PING_COLLECTIVE = "allgather"
#: ... of one float32 element per rank.
PING_BYTES = 4.0
