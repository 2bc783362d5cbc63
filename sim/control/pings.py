"""What a latency ping is, in both worlds: a collective of a one-element payload, whose byte
term is nil, so its duration over its latency count is the per-message latency (software
overhead included). The real hook runs ``count`` of them before its first controlled step
(:mod:`realrun.hook.pings`); the simulator prices one at the same step
(``SimConfig.latency_pings``), and each hands the result to its link monitor as the latency
reference (:meth:`sim.control.monitor.LinkMonitor.set_latency_reference`).

With ``ping_every`` ``N`` they run again before every ``N``-th controlled step after the first
(:func:`ping_due`, the one rule of both worlds), and the reference follows each measurement: a
link whose latency wanders is then split by what was measured lately, not at the start.

With ``ping_on_jump`` ``R`` a ping runs only when the monitor's latency estimate has moved by
more than ``R`` times (up or down) since the last ping (or since its first estimate), and the
monitor re-splits its latest measurement at the measured latency
(:meth:`sim.control.monitor.LinkMonitor.anchor_latency`): :class:`LatencyJumpCheck`. A
window of one collective shape on a link that moves within an iteration can book a bandwidth
fall as a latency rise tenfold or more; a plan made on that split picks a collective or
density that pays for it. One ping, when the estimate jumps, tells the two apart.
"""

from __future__ import annotations

__all__ = ["PING_BYTES", "PING_COLLECTIVE", "LatencyJumpCheck", "ping_due"]

#: What a ping is priced as: an allgather ...
PING_COLLECTIVE = "allgather"
#: ... of one float32 element per rank.
PING_BYTES = 4.0


def ping_due(step: int, warmup_steps: int, latency_pings: int, ping_every: int) -> bool:
    """Whether the pings run before ``step`` (0-based, counting warm-up steps): with
    ``latency_pings`` >= 1, before the first controlled step (``warmup_steps``) and, when
    ``ping_every`` is ``N`` >= 1, before every ``N``-th controlled step after it."""
    if latency_pings <= 0 or step < warmup_steps:
        return False
    k = step - warmup_steps
    return k == 0 or (ping_every > 0 and k % ping_every == 0)


class LatencyJumpCheck:
    """When a latency estimate has jumped far enough from the last measured one to be checked
    with a ping (``ping_on_jump``). Deterministic in the estimates it is shown, so every rank
    of a real run, fed the same agreed measurements, pings at the same steps.

    ``ratio``: the factor (> 1) the estimate must move by, either way, since the anchor: the
    latency the last ping measured, or before any ping the first estimate shown.
    """

    def __init__(self, ratio: float) -> None:
        if not (ratio > 1.0 and ratio < float("inf")):
            raise ValueError(f"ping_on_jump must be a finite ratio > 1, got {ratio!r}")
        self.ratio = float(ratio)
        #: The latency the estimates are compared with (``None``: none seen yet).
        self.anchor_s: float | None = None
        #: Pings this check has asked for.
        self.pings = 0

    def due(self, latency_s: float | None) -> bool:
        """Whether the estimate ``latency_s`` (``None`` or <= 0: none yet) calls for a ping;
        the first positive estimate becomes the anchor."""
        if latency_s is None or not latency_s > 0.0:
            return False
        if self.anchor_s is None:
            self.anchor_s = float(latency_s)
            return False
        move = latency_s / self.anchor_s
        return move > self.ratio or move * self.ratio < 1.0

    def measured(self, latency_s: float) -> None:
        """Record a ping's measurement: the new anchor."""
        if not latency_s > 0.0:
            raise ValueError(f"a measured latency must be > 0, got {latency_s!r}")
        self.anchor_s = float(latency_s)
        self.pings += 1
