"""The bounded-loss transport applied to real gradients (:mod:`sim.lossy.drop`'s rule).

Each rank cuts its flattened bucket into packets of an MTU of payload, gives each a priority
by layer and magnitude, loses packets by a seeded process (a stream per run seed, step, bucket
and rank, so a run replays exactly), repairs the highest-priority lost packets down to the bound
and, past a deadline, drops the lowest-priority ones up to the bound. The entries of the missing
packets are zeroed in what the rank contributes to the exchange: they are lost for this step.
With ``error_feedback`` they are kept and added to the same bucket's gradient next step (the
residual memory of sparsifiers); without, they are gone.

The deadline needs a transfer time: a rank uses its own measured communication time of the
previous iteration (the union of its collectives' spans); when it exceeded the deadline, the
excess fraction of the packets (at most the bound's room) is dropped this step. Wall-clock
measurements differ between runs, so a run with a deadline is not replayed bit for bit; without
one it is.

Delivered packets are counted per step (:attr:`BoundedLoss.counts`); the trainer sums them
over ranks into the records' ``delivered_frac`` column.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from sim.errors import InputError
from sim.lossy import check_fraction
from sim.lossy.drop import drop_mask, packet_priorities

__all__ = ["BoundedLoss"]


class BoundedLoss:
    """The drop rule of one rank.

    Args:
        loss_bound: fraction of a bucket's packets that may stay missing, in ``[0, 1)``.
        packet_loss: per-packet loss probability of the seeded process, in ``[0, 1)``.
        deadline_s: per-collective deadline (``inf``: none).
        error_feedback: keep the lost entries and add them back next step.
        seed, rank: the loss stream's seed and this rank.
        mtu_bytes: payload bytes per packet.
        layer_of_param: ``id(parameter) -> layer index`` from the model's input side (packets'
            layer priority); parameters not in it count as the last layer.
    """

    def __init__(
        self,
        *,
        loss_bound: float,
        packet_loss: float,
        deadline_s: float = math.inf,
        error_feedback: bool = False,
        seed: int = 0,
        rank: int = 0,
        mtu_bytes: int = 1500,
        layer_of_param: dict[int, int] | None = None,
    ) -> None:
        self.loss_bound = check_fraction("loss bound", loss_bound)
        self.packet_loss = check_fraction("packet loss", packet_loss)
        if math.isnan(deadline_s) or deadline_s <= 0:
            raise InputError(f"deadline must be > 0 (inf: none), got {deadline_s!r}")
        if mtu_bytes < 4:
            raise InputError(f"mtu_bytes must be >= 4, got {mtu_bytes!r}")
        self.deadline_s = float(deadline_s)
        self.error_feedback = bool(error_feedback)
        self.seed = int(seed)
        self.rank = int(rank)
        self.mtu_bytes = int(mtu_bytes)
        self._layer_of = dict(layer_of_param or {})
        self._n_layers = max(self._layer_of.values(), default=0) + 1
        self._layers: dict[tuple[int, int], np.ndarray] = {}
        self._residual: dict[int, torch.Tensor] = {}
        #: Per step: [delivered packets, packets] of this rank.
        self.counts: dict[int, list[int]] = {}
        self.last_comm_s: float | None = None

    def _layer_map(self, index: int, params: list[torch.Tensor], numel: int) -> np.ndarray:
        key = (index, numel)
        got = self._layers.get(key)
        if got is None:
            parts = [
                np.full(p.numel(), self._layer_of.get(id(p), self._n_layers - 1), dtype=np.int64)
                for p in params
            ]
            got = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
            if len(got) != numel:  # padding or an unexpected layout: one layer
                got = np.zeros(numel, dtype=np.int64)
            self._layers[key] = got
        return got

    def deadline_fraction(self) -> float:
        """Share of the transfer past the deadline last step (0 when it was not exceeded)."""
        t = self.last_comm_s
        if t is None or not math.isfinite(self.deadline_s) or t <= self.deadline_s:
            return 0.0
        return (t - self.deadline_s) / t

    def apply(
        self, buf: torch.Tensor, index: int, params: list[torch.Tensor], step: int
    ) -> float:
        """Apply the rule to bucket ``index``'s flat gradient ``buf`` in place; returns the
        delivered fraction of its packets."""
        flat = buf.view(-1)
        n = flat.numel()
        if self.error_feedback and index in self._residual:
            res = self._residual[index]
            if res.numel() == n:
                flat.add_(res)
        per = max(1, self.mtu_bytes // flat.element_size())
        vals = flat.detach().cpu().numpy()
        layers = self._layer_map(index, params, n)
        prio = packet_priorities(vals, layers, self._n_layers, per)
        ss = np.random.SeedSequence([self.seed, step, index, self.rank])
        out = drop_mask(
            prio,
            self.packet_loss,
            self.loss_bound,
            np.random.default_rng(ss),
            deadline_frac=self.deadline_fraction(),
        )
        c = self.counts.setdefault(step, [0, 0])
        c[0] += int(out.delivered.sum())
        c[1] += len(out.delivered)
        missing = ~out.delivered
        if self.error_feedback:
            if missing.any():
                lost = torch.from_numpy(np.repeat(missing, per)[:n]).to(flat.device)
                self._residual[index] = torch.where(lost, flat, torch.zeros_like(flat))
                flat.masked_fill_(lost, 0.0)
            else:
                self._residual.pop(index, None)
        elif missing.any():
            lost = torch.from_numpy(np.repeat(missing, per)[:n]).to(flat.device)
            flat.masked_fill_(lost, 0.0)
        return out.delivered_frac

    def step_fractions(self, steps: int) -> np.ndarray:
        """``(steps, 2)`` array of [delivered, packets] per step (zeros where nothing ran)."""
        out = np.zeros((steps, 2))
        for s, (d, n) in self.counts.items():
            if 0 <= s < steps:
                out[s] = (d, n)
        return out
