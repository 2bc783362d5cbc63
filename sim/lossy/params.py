"""Parameters of the bounded-loss (DLCP-style) transport and of the packet-loss process.

A run with none of these set has no loss model at all (today's lossless links). The loss model is
switched on by a per-packet loss (``packet_loss``, constant, or ``trace_loss`` to read the trace's
``loss`` column) or by a loss bound. Without a bound the transport is *plain*: TCP-like, every
lost packet is retransmitted (a loss followed by at least :data:`DUPACK_PACKETS` packets of the
same message is repaired by fast retransmit, one extra round trip; a loss among a message's last
packets, a *tail loss*, waits for the retransmission timeout ``rto_s``). With a bound ``F`` the
transport is *bounded-loss*: packets are sent once in priority order (layer, then magnitude),
lost packets are retransmitted only while the delivered fraction of a message is below ``1 - F``,
and past the collective's deadline the lowest-priority packets not yet sent are dropped, never
below ``1 - F`` delivered.

Pure Python: no SimPy, torch or pandas.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sim.errors import InputError

__all__ = [
    "DEFAULT_MTU_BYTES",
    "DEFAULT_RTO_S",
    "DUPACK_PACKETS",
    "LossParams",
    "check_fraction",
]

#: Gradient payload of one packet (an Ethernet MTU).
DEFAULT_MTU_BYTES = 1500
#: Retransmission timeout of the plain transport: a datacenter-tuned minimum RTO (Linux's
#: default minimum is 200 ms; lowered values of a few ms are common in clusters).
DEFAULT_RTO_S = 0.005
#: Packets that must follow a loss for fast retransmit (three duplicate ACKs) to repair it.
DUPACK_PACKETS = 3


def check_fraction(name: str, value: object) -> float:
    """``value`` as a float in ``[0, 1)``; :class:`InputError` naming ``name`` otherwise."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok or not math.isfinite(float(value)) or not 0.0 <= float(value) < 1.0:  # type: ignore[arg-type]
        raise InputError(f"{name} must be a number in [0, 1), got {value!r}")
    return float(value)  # type: ignore[arg-type]


@dataclass(frozen=True)
class LossParams:
    """The loss process and the transport that copes with it; SI units.

    Attributes:
        loss_bound: fraction of gradient entries a collective may lose, in ``[0, 1)``; ``None``
            is the plain transport (everything retransmitted).
        deadline_s: per-collective deadline (> 0; ``inf``: none). Needs a loss bound.
        packet_loss: constant per-packet loss probability of a message's path, in ``[0, 1)``;
            ``None`` reads the trace's ``loss`` column when ``trace_loss`` is set (else 0).
        trace_loss: take the per-packet loss from the trace's ``loss`` column.
        mtu_bytes: gradient payload per packet.
        rto_s: retransmission timeout of the plain transport.
    """

    loss_bound: float | None = None
    deadline_s: float = math.inf
    packet_loss: float | None = None
    trace_loss: bool = False
    mtu_bytes: int = DEFAULT_MTU_BYTES
    rto_s: float = DEFAULT_RTO_S

    def __post_init__(self) -> None:
        if self.loss_bound is not None:
            object.__setattr__(self, "loss_bound", check_fraction("loss bound", self.loss_bound))
        if self.packet_loss is not None:
            object.__setattr__(
                self, "packet_loss", check_fraction("packet loss", self.packet_loss)
            )
        d = self.deadline_s
        if isinstance(d, bool) or not isinstance(d, (int, float)) or math.isnan(d) or d <= 0:
            raise InputError(f"deadline must be a number > 0 (inf: none), got {d!r}")
        if math.isfinite(d) and self.loss_bound is None:
            raise InputError("a deadline needs a loss bound (--loss-bound)")
        if self.packet_loss is not None and self.trace_loss:
            raise InputError("give a constant packet loss or the trace's loss column, not both")
        m = self.mtu_bytes
        if isinstance(m, bool) or not isinstance(m, int) or m < 1:
            raise InputError(f"mtu_bytes must be an integer >= 1, got {m!r}")
        r = self.rto_s
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not math.isfinite(r) or r < 0:
            raise InputError(f"rto_s must be a finite number >= 0, got {r!r}")

    @property
    def bounded(self) -> bool:
        """Whether the bounded-loss transport is in use (else the plain one)."""
        return self.loss_bound is not None

    @property
    def bound(self) -> float:
        """The loss bound, 0 for the plain transport."""
        return 0.0 if self.loss_bound is None else self.loss_bound
