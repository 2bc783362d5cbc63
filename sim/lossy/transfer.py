"""One collective over lossy links: the plain (TCP-like) and the bounded-loss transports.

A collective is a sequence of *steps*; in each step every participating message (one per rank,
or one per routed flow at the stepwise level) moves at the same time, and the step ends when its
slowest message is complete. A message of ``k`` packets (``ceil(bytes / MTU)``) loses each
transmission independently with its path's probability ``p``. Loss-free, a step takes
``step_s`` (the engines' own cost: closed form or pipeline); loss adds:

plain transport (``loss_bound=None``)
    every loss is repaired. A loss with at least :data:`DUPACK_PACKETS` packets after it is
    fast-retransmitted: the step pays one extra round trip; a *tail* loss (among the message's
    last packets) waits for the retransmission timeout ``rto_s``. A retransmission that is lost
    again waits for another timeout. Each repair round also re-sends the missing packets (the
    largest count over the step's messages, at ``packet_s`` each). So with ``M`` messages of
    ``k`` packets a step is slow with probability about ``1 - (1 - p)^(M k)``: many messages
    and large buckets turn a small loss into a heavy tail.

bounded-loss transport (``loss_bound=F``)
    packets leave in priority order and are sent once; a message that delivered fewer than
    ``k - floor(F k)`` re-sends just its deficit, highest priority first (a round trip per
    round, the receiver reports its count; no timeouts), until it has. The lost packets are the
    message's lowest-priority ones (priority is order-independent: any delivered packet is
    useful). Past the deadline, the lowest-priority packets not yet sent are dropped, the same
    fraction ``q`` of every message (as much as the deadline needs, as much as every message's
    bound allows): a step's serialisation shrinks by that fraction. The collective ends at the
    later of the deadline and the end of the bound-limited transfer, and never delivers less
    than ``1 - F`` of any message.

With zero loss and no deadline both transports take exactly the loss-free time and deliver
everything; with ``F = 0`` the bounded transport delivers everything too.

Counts (all messages and steps): ``packets`` of payload; ``sent`` transmissions (``packets -
dropped + retx``); ``lost`` transmissions; ``retx`` re-sends; ``dropped`` never sent. Conservation:
``delivered = sent - lost`` and ``packets = delivered + (lost - retx) + dropped``.

Pure numpy: no SimPy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .params import DUPACK_PACKETS, LossParams

__all__ = ["LossyOutcome", "StepGroup", "lossy_collective", "packets_of"]


def packets_of(nbytes: float, mtu_bytes: int) -> int:
    """Packets needed for ``nbytes`` of payload (0 for an empty message)."""
    return int(math.ceil(nbytes / mtu_bytes)) if nbytes > 0 else 0


@dataclass(frozen=True, eq=False)
class StepGroup:
    """``steps`` identical steps of a collective (one phase of its schedule).

    Attributes:
        steps: number of steps.
        step_s: loss-free duration of one step.
        latency_s: the one-way latency part of ``step_s`` (a repair round costs twice it).
        packet_s: time to send one packet on the step's bottleneck.
        packets: packets of each message of a step, shape ``(M,)``.
        loss: per-packet loss probability of each message's path, shape ``(M,)``.
    """

    steps: int
    step_s: float
    latency_s: float
    packet_s: float
    packets: np.ndarray
    loss: np.ndarray

    @property
    def serial_s(self) -> float:
        """The serialisation part of a step (what dropping packets can shorten)."""
        return max(self.step_s - self.latency_s, 0.0)


@dataclass(frozen=True)
class LossyOutcome:
    """One collective's time and packet counts (see the module docstring)."""

    duration_s: float
    base_s: float
    packets: int
    sent: int
    lost: int
    retx: int
    dropped: int
    min_message_frac: float = 1.0

    @property
    def delivered(self) -> int:
        """Packets delivered."""
        return self.sent - self.lost

    @property
    def delivered_frac(self) -> float:
        """Fraction of the payload's packets delivered (1 for an empty collective)."""
        return self.delivered / self.packets if self.packets else 1.0


def _binom(rng: np.random.Generator, n: np.ndarray, p: np.ndarray) -> np.ndarray:
    return rng.binomial(n, p).astype(np.int64)


def _plain(
    g: StepGroup, params: LossParams, rng: np.random.Generator
) -> tuple[np.ndarray, int, int]:
    """Per-step extra seconds, lost transmissions and re-sends of the plain transport."""
    shape = (g.steps, len(g.packets))
    k = np.broadcast_to(g.packets, shape)
    p = np.broadcast_to(g.loss, shape)
    tail_k = np.minimum(k, DUPACK_PACKETS)
    tail = _binom(rng, tail_k, p)
    body = _binom(rng, k - tail_k, p)
    missing = tail + body
    rtt = 2.0 * g.latency_s
    extra = np.where(tail.any(axis=1), params.rto_s, np.where(body.any(axis=1), rtt, 0.0))
    lost = int(missing.sum())
    retx = 0
    while missing.any():
        extra = extra + missing.max(axis=1) * g.packet_s
        retx += int(missing.sum())
        missing = _binom(rng, missing, p)
        lost += int(missing.sum())
        # A re-sent packet lost again is only noticed by its timeout.
        extra = extra + np.where(missing.any(axis=1), params.rto_s, 0.0)
    return extra, lost, retx


def _bounded(
    g: StepGroup, params: LossParams, rng: np.random.Generator
) -> tuple[np.ndarray, int, int, np.ndarray, np.ndarray]:
    """Per-step extra seconds, lost transmissions, re-sends, unrepaired losses (S, M) and each
    message's allowance ``floor(F k)`` of the bounded transport."""
    shape = (g.steps, len(g.packets))
    k = np.broadcast_to(g.packets, shape)
    p = np.broadcast_to(g.loss, shape)
    allow = np.floor(params.bound * k + 1e-9).astype(np.int64)
    first = _binom(rng, k, p)
    unrepaired = np.minimum(first, allow)
    deficit = first - unrepaired
    lost = int(first.sum())
    retx = 0
    extra = np.zeros(g.steps)
    rtt = 2.0 * g.latency_s
    while deficit.any():
        extra = extra + np.where(deficit.any(axis=1), rtt, 0.0) + deficit.max(axis=1) * g.packet_s
        retx += int(deficit.sum())
        deficit = _binom(rng, deficit, p)
        lost += int(deficit.sum())
    return extra, lost, retx, unrepaired, allow


def lossy_collective(
    groups: Sequence[StepGroup],
    params: LossParams,
    rng: np.random.Generator,
    *,
    base_s: float | None = None,
) -> LossyOutcome:
    """Time and packet counts of one collective made of ``groups`` under ``params``.

    ``base_s`` is the engine's own loss-free time of the collective (default: the groups'
    ``steps * step_s``); the outcome's ``duration_s`` is ``base_s + extra_s``, so zero loss
    without a deadline returns ``base_s`` bit for bit.
    """
    base = 0.0
    extra_s = 0.0
    packets = sent = lost = retx = dropped = 0
    min_frac = 1.0
    bounded = params.bounded
    slack: list[tuple[StepGroup, np.ndarray, np.ndarray]] = []
    for g in groups:
        if g.steps <= 0 or len(g.packets) == 0:
            continue
        n_pkt = int(g.packets.sum()) * g.steps
        packets += n_pkt
        base += g.steps * g.step_s
        if not np.any(g.loss > 0) and not bounded:
            sent += n_pkt
            continue
        if bounded:
            extra, ls, rt, unrep, allow = _bounded(g, params, rng)
            slack.append((g, unrep, allow))
            kept = 1.0 - unrep / np.maximum(g.packets, 1)
            min_frac = min(min_frac, float(kept.min()))
        else:
            extra, ls, rt = _plain(g, params, rng)
        extra_s += float(extra.sum())
        sent += n_pkt + rt
        lost += ls
        retx += rt
    if base_s is None:
        base_s = base
    if bounded and base_s + extra_s > params.deadline_s and slack:
        saved, dropped, min_frac = _cut_at_deadline(
            slack, base_s + extra_s - params.deadline_s, min_frac
        )
        extra_s -= saved
        sent -= dropped
    return LossyOutcome(base_s + extra_s, base_s, packets, sent, lost, retx, dropped, min_frac)


def _cut_at_deadline(
    slack: list[tuple[StepGroup, np.ndarray, np.ndarray]], over_s: float, min_frac: float
) -> tuple[float, int, float]:
    """Drop the same fraction ``q`` of every message's lowest-priority unsent packets, as much
    as ``over_s`` (the time past the deadline) needs and every message's allowance leaves;
    returns (seconds saved, packets dropped, smallest delivered fraction of a message)."""
    serial = sum(g.steps * g.serial_s for g, _, _ in slack)
    if serial <= 0:
        return 0.0, 0, min_frac
    q_need = over_s / serial
    q_room = 1.0
    for g, unrep, allow in slack:
        k = np.maximum(g.packets, 1)
        q_room = min(q_room, float(((allow - unrep) / k).min()))
    q = min(q_need, q_room)
    if q <= 0:
        return 0.0, 0, min_frac
    dropped = 0
    saved = 0.0
    min_frac = 1.0
    for g, unrep, allow in slack:
        k = np.broadcast_to(g.packets, unrep.shape)
        d = np.minimum(np.floor(q * k + 1e-9).astype(np.int64), allow - unrep)
        dropped += int(d.sum())
        kk = np.maximum(k, 1)
        # A step ends with its slowest message: it saves what its least-cut message saved.
        saved += float(np.sum((d / kk).min(axis=1))) * g.serial_s
        min_frac = min(min_frac, float((1.0 - (unrep + d) / kk).min()))
    return saved, dropped, min_frac
