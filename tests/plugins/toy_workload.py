"""A toy real workload in one file: linear regression on seeded random data. A package would
expose this module under the ``compctl.workloads`` entry-point group."""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import nn

from realrun.workloads import Workload, register_workload


def _batches(rank: int, world: int, batch: int, seed: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(seed * 1000 + rank)
    w = torch.arange(1.0, 9.0)
    while True:
        x = torch.randn(batch, 8, generator=gen)
        yield x, x @ w


def _build(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Linear(8, 1)


def _evaluate(model: nn.Module) -> dict[str, float]:
    x, y = next(_batches(99, 1, 64, 0))
    with torch.no_grad():
        loss = float(nn.functional.mse_loss(model(x).squeeze(-1), y))
    return {"loss": loss, "accuracy": float("nan")}


register_workload(Workload(
    name="toy-linear",
    description="Toy: linear regression on seeded random data",
    build_model=_build,
    batches=_batches,
    loss_fn=lambda out, y: nn.functional.mse_loss(out.squeeze(-1), y),
    evaluate=_evaluate,
    default_batch_size=16,
    lr=0.01,
))
