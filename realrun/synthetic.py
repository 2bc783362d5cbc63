"""Synthetic-data mode: any simulator workload profile as a real DDP model (throughput only).

The model holds one flat parameter per profile layer (the profile's parameter count), so DDP
builds the same buckets the simulator assumes. Compute is emulated, not performed: the forward
pass sleeps ``forward_s`` and the backward pass sleeps each layer's share of ``backward_s``
(by ``compute_weight``) just before that layer's gradient is produced, so buckets become ready
when the profile says. Loss and accuracy mean nothing here and are reported as NaN.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

__all__ = ["SyntheticModel", "synthetic_workload"]


class _SleepInBackward(torch.autograd.Function):
    """Identity whose backward first sleeps ``seconds`` (emulated layer compute)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, seconds: float) -> torch.Tensor:  # type: ignore[override]
        ctx.seconds = seconds
        return x.clone()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:  # type: ignore[override]
        if ctx.seconds > 0:
            time.sleep(ctx.seconds)
        return grad, None


class SyntheticModel(nn.Module):
    """One flat parameter per layer; forward/backward take the profile's compute times."""

    def __init__(self, profile: Any, *, seed: int = 0) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(int(seed))
        self.weights = nn.ParameterList(
            nn.Parameter(torch.randn(n, generator=gen) * 0.01) for n in profile.layer_params
        )
        total_w = sum(profile.layer_weights) or 1.0
        self._bwd_s = [profile.backward_s * w / total_w for w in profile.layer_weights]
        self._fwd_s = float(profile.forward_s)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """A scalar per sample that depends on every parameter."""
        if self._fwd_s > 0:
            time.sleep(self._fwd_s)
        h = x
        for p, s in zip(self.weights, self._bwd_s, strict=True):
            h = _SleepInBackward.apply(h + 1e-3 * p.sum(), s)
        return h


def synthetic_workload(name: str) -> Any:
    """A :class:`~realrun.workloads.Workload` over the simulator profile ``name`` (random data)."""
    from sim.workloads import load_profile

    from .workloads import Workload

    profile = load_profile(name)

    def batches(rank: int, world: int, batch: int, seed: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        gen = torch.Generator().manual_seed(int(seed) * 1000 + rank)
        while True:
            yield torch.randn(batch, 1, generator=gen), torch.zeros(batch, 1)

    def loss_fn(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return ((out - y) ** 2).mean()

    def evaluate(model: nn.Module) -> dict[str, float]:
        return {"loss": float("nan"), "accuracy": float("nan")}

    return Workload(
        name=profile.name,
        description=f"synthetic: {profile.description}",
        build_model=lambda seed: SyntheticModel(profile, seed=seed),
        batches=batches,
        loss_fn=loss_fn,
        evaluate=evaluate,
        default_batch_size=1,
        lr=1e-3,
    )
