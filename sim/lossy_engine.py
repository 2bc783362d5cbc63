"""The loss model inside the engines: step groups from each fidelity level's collectives.

Analytic level: a collective with ``n_alpha`` latency terms and ``n_bytes`` on the pacing link is
``S = round(n_alpha)`` steps of ``n_bytes / S`` bytes, each moving one message per worker at
once; the per-packet loss is the constant one or the pacing link's ``loss`` at the start.

Stepwise level: every phase of the routed schedule is a group of ``repeats`` steps whose messages
are the phase's routed messages; a message's loss combines its path's links
(``1 - prod(1 - loss_link)``, each link's ``loss`` from its own trace at the start; on the flat
cluster a trace's loss is end to end, split between the sender's up and the receiver's down
link as its latency is), or is the constant per-path loss. A step's loss-free time is the
pipeline's step under the link states at the start, and a packet's time is the MTU over the
slowest link of the phase.

Either way the engine's own loss-free time of the collective is the base, so zero loss without
a deadline changes nothing, bit for bit (a Hypothesis test checks it).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from sim.control.world import run_streams
from sim.lossy import LossParams, LossyOutcome, StepGroup, lossy_collective, packets_of
from traces.model import PiecewiseTrace

if TYPE_CHECKING:
    from .stepwise_net import CompiledSchedule, StepwiseNetwork

__all__ = ["LossTally", "LossyLinks", "loss_rng"]


def loss_rng(seed: int) -> np.random.Generator:
    """The loss process's own stream of a run's seed (the fourth child; the others are the
    policy's, the stragglers' and the stepwise pauses')."""
    return np.random.default_rng(run_streams(seed)["loss"])


class LossTally:
    """Packet counts of one iteration's collectives."""

    __slots__ = ("packets", "delivered", "retx", "dropped", "min_frac")

    def __init__(self) -> None:
        self.packets = 0
        self.delivered = 0
        self.retx = 0
        self.dropped = 0
        self.min_frac = 1.0

    def add(self, out: LossyOutcome) -> None:
        """Count ``out``."""
        self.packets += out.packets
        self.delivered += out.delivered
        self.retx += out.retx
        self.dropped += out.dropped
        self.min_frac = min(self.min_frac, out.min_message_frac)

    @property
    def delivered_frac(self) -> float:
        """Fraction of the iteration's packets delivered (1 with no traffic)."""
        return self.delivered / self.packets if self.packets else 1.0

    @property
    def dropped_frac(self) -> float:
        """Fraction dropped unsent past a deadline: the lowest-priority packets (the rest of
        the undelivered ones were lost at random on the links)."""
        return self.dropped / self.packets if self.packets else 0.0


class LossyLinks:
    """A run's loss process: its parameters and random stream.

    Args:
        params: the loss process and transport.
        rng: the run's loss stream (:func:`loss_rng`).
        n_workers: messages per step at the analytic level.
    """

    def __init__(self, params: LossParams, rng: np.random.Generator, n_workers: int) -> None:
        self.params = params
        self.rng = rng
        self.n_workers = n_workers

    def _loss_of(self, link: PiecewiseTrace, t_s: float) -> float:
        p = self.params
        if p.packet_loss is not None:
            return p.packet_loss
        return link.state_at(t_s)[2] if p.trace_loss else 0.0

    def analytic(
        self, n_alpha: float, n_bytes: float, base_s: float, link: PiecewiseTrace, t_s: float
    ) -> LossyOutcome:
        """One collective at the analytic level started at absolute time ``t_s``."""
        steps = int(round(n_alpha)) if n_alpha > 0 else 0
        if steps == 0 or n_bytes <= 0:
            return lossy_collective((), self.params, self.rng, base_s=base_s)
        lat = link.latency_at(t_s)
        bw = link.bandwidth_at(t_s)
        k = packets_of(n_bytes / steps, self.params.mtu_bytes)
        m = self.n_workers
        group = StepGroup(
            steps,
            base_s / steps,
            min(lat, base_s / steps),
            self.params.mtu_bytes / bw,
            np.full(m, k, dtype=np.int64),
            np.full(m, self._loss_of(link, t_s)),
        )
        return lossy_collective((group,), self.params, self.rng, base_s=base_s)

    def stepwise(
        self, net: StepwiseNetwork, cs: CompiledSchedule, start_s: float, base_s: float
    ) -> LossyOutcome:
        """One routed collective at the stepwise level started at ``start_s``."""
        from .stepwise_net import _step_times

        key, lat, bw, _ = net.states.at(start_s)
        link_loss = self._link_loss(net, start_s)
        groups = []
        mtu = self.params.mtu_bytes
        for ph in cs.phases:
            d, x = net._cost(ph, key, lat, bw)
            step_s, _ = _step_times(d, x, cs.chunks, net.transport.slots)
            k = np.ceil(ph.msg_bytes / mtu).astype(np.int64)
            if self.params.packet_loss is not None:
                p = np.full(len(k), self.params.packet_loss)
            else:
                keep = np.where(ph.paths >= 0, 1.0 - link_loss[np.maximum(ph.paths, 0)], 1.0)
                p = 1.0 - keep.prod(axis=1)
            packet_s = mtu / float(bw[ph.links].min())
            groups.append(StepGroup(ph.repeats, step_s, min(d, step_s), packet_s, k, p))
        return lossy_collective(groups, self.params, self.rng, base_s=base_s)

    def _link_loss(self, net: StepwiseNetwork, t_s: float) -> np.ndarray:
        topo = net.topo
        out = np.zeros(topo.n_links)
        if not self.params.trace_loss:
            return out
        for lid in np.flatnonzero(topo.trace_of >= 0):
            loss = topo.traces[int(topo.trace_of[lid])].state_at(t_s)[2]
            scale = 1.0 if topo.trace_latency_scale is None else topo.trace_latency_scale[lid]
            # A share ``scale`` of an end-to-end loss: (1 - l)^scale survives this link.
            out[lid] = 1.0 - math.pow(1.0 - loss, scale)
        return out
