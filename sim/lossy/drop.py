"""The bounded-loss drop rule on a real gradient: packets, priorities, losses, the bound.

A flattened bucket is cut into packets of ``packet_numel`` consecutive entries (an MTU of
payload). Each packet has a priority from its layer and its magnitude:

    priority = mean(g^2 over the packet) * (2 - layer / n_layers)

so front layers (needed first by the next forward pass) count up to twice as much as the last one
and, within a layer, large entries come first (DLCP and MLT tag packets by layer and magnitude).
A seeded loss process loses each packet with probability ``p``; the bounded-loss transport then

1. repairs (re-sends) the highest-priority lost packets until at most ``floor(F * packets)`` are
   missing: the loss within the bound is accepted whatever it hit;
2. past a deadline, drops the lowest-priority packets still delivered, as far as the bound
   allows, in the fraction ``deadline_frac`` of the packets (how much of the transfer the
   deadline cut; 0 when it did not fire).

The missing packets' entries are lost (zeroed in what the rank contributes). With ``p = 0`` and
no deadline nothing is touched, so the result equals the plain exchange exactly.

Pure numpy (real runs pass a CPU tensor's ``numpy()`` view).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["DropResult", "drop_mask", "packet_priorities"]


@dataclass(frozen=True)
class DropResult:
    """Which packets arrive.

    Attributes:
        delivered: boolean per packet.
        lost_random: packets lost on the link and not repaired.
        repaired: packets lost and re-sent to stay within the bound.
        dropped_deadline: packets dropped past the deadline (lowest priority).
    """

    delivered: np.ndarray
    lost_random: int
    repaired: int
    dropped_deadline: int

    @property
    def delivered_frac(self) -> float:
        """Fraction of packets delivered."""
        n = len(self.delivered)
        return float(self.delivered.sum()) / n if n else 1.0


def packet_priorities(
    values: np.ndarray, layer_of: np.ndarray, n_layers: int, packet_numel: int
) -> np.ndarray:
    """Priority of each packet of the flat gradient ``values`` (entry ``i`` in layer
    ``layer_of[i]``, layers numbered from the model's input side)."""
    n = len(values)
    n_pkt = -(-n // packet_numel) if n else 0
    if n_pkt == 0:
        return np.zeros(0)
    sq = np.square(values.astype(np.float64, copy=False))
    idx = np.arange(n) // packet_numel
    energy = np.bincount(idx, weights=sq, minlength=n_pkt)
    count = np.bincount(idx, minlength=n_pkt)
    first_layer = layer_of[np.arange(n_pkt) * packet_numel]
    weight = 2.0 - first_layer / max(n_layers, 1)
    return energy / count * weight


def drop_mask(
    priorities: np.ndarray,
    loss: float,
    bound: float,
    rng: np.random.Generator,
    *,
    deadline_frac: float = 0.0,
) -> DropResult:
    """Apply the rule (module docstring) to packets of the given ``priorities``."""
    n = len(priorities)
    delivered = np.ones(n, dtype=bool)
    if n == 0:
        return DropResult(delivered, 0, 0, 0)
    lost = rng.random(n) < loss if loss > 0 else np.zeros(n, dtype=bool)
    allow = int(np.floor(bound * n + 1e-9))
    n_lost = int(lost.sum())
    repaired = 0
    if n_lost > allow:
        # Re-send the highest-priority lost packets (stable order: ties by position).
        lost_idx = np.flatnonzero(lost)
        order = lost_idx[np.argsort(-priorities[lost_idx], kind="stable")]
        repaired = n_lost - allow
        lost[order[:repaired]] = False
    delivered &= ~lost
    dropped = 0
    if deadline_frac > 0:
        room = allow - int((~delivered).sum())
        want = int(np.floor(min(deadline_frac, 1.0) * n + 1e-9))
        dropped = max(0, min(room, want))
        if dropped:
            alive = np.flatnonzero(delivered)
            order = alive[np.argsort(priorities[alive], kind="stable")]
            delivered[order[:dropped]] = False
    return DropResult(delivered, int(lost.sum()), repaired, dropped)
