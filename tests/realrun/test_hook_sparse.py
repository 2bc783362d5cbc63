"""Sparse exchanges give the exact average computed by hand; ranks agree; state checkpoints."""

from __future__ import annotations

import io

import pytest
import torch
import torch.distributed as dist
from _spawn import run_ranks
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from realrun.hook import CompressionHookState, compression_hook
from sim.control import make_policy
from sim.errors import InputError

NUMEL = 40
DENSITY = 0.1  # k = 4


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Linear(NUMEL, 1, bias=False)  # one parameter -> one bucket of 40 elements


def _step(rank: int, world: int, collective: str) -> dict[str, torch.Tensor]:
    ddp = DDP(_model())
    local = _model()
    state = CompressionHookState(
        controller=make_policy("fixed", density=DENSITY, collective=collective),
        world_size=world, rank=rank, warmup_steps=1,
    )
    ddp.register_comm_hook(state, compression_hook)
    gen = torch.Generator().manual_seed(7 + rank)
    out: dict[str, torch.Tensor] = {}
    for step in range(2):
        x = torch.randn(5, NUMEL, generator=gen)
        local.load_state_dict(ddp.module.state_dict())
        local.zero_grad()
        local(x).pow(2).sum().backward()
        ddp.zero_grad()
        ddp(x).pow(2).sum().backward()
        state.end_iteration(iter_s=0.0)
        mine = local.weight.grad.reshape(-1).clone()
        grads = [torch.empty_like(mine) for _ in range(world)]
        dist.all_gather(grads, mine)
        out[f"grads{step}"] = torch.stack(grads)
        out[f"result{step}"] = ddp.module.weight.grad.reshape(-1).clone()
        with torch.no_grad():
            ddp.module.weight -= 0.01 * ddp.module.weight.grad
    out["residual"] = state.memory.residual(0).clone()
    return out


def _by_hand_allgather(grads: torch.Tensor) -> torch.Tensor:
    k = 4
    out = torch.zeros(NUMEL)
    for g in grads:
        idx = g.abs().topk(k).indices
        out.index_add_(0, idx, g[idx] / grads.shape[0])
    return out


@pytest.mark.parametrize("collective", ["allgather", "artopk-ring"])
def test_sparse_average_is_exact(collective: str) -> None:
    res = run_ranks(_step, 2, collective)
    g1 = res[0]["grads1"]  # step 1 is the first compressed step; residuals start at zero
    if collective == "allgather":
        want = _by_hand_allgather(g1)
    else:
        owner = 1 % 2  # STAR: step mod world size
        idx = g1[owner].abs().topk(4).indices
        want = torch.zeros(NUMEL)
        want[idx] = g1[0][idx] / 2 + g1[1][idx] / 2
    for r in res:
        assert torch.equal(r["result1"], want)
        # step 0 is the dense warm-up: the plain average
        assert torch.equal(r["result0"], r["grads0"][0] / 2 + r["grads0"][1] / 2)
    # error feedback: what a rank did not contribute stays in its residual
    for rank, r in enumerate(res):
        g = g1[rank]
        sent = torch.zeros(NUMEL, dtype=torch.bool)
        if collective == "allgather":
            sent[g.abs().topk(4).indices] = True
        else:
            sent[g1[1].abs().topk(4).indices] = True
        assert torch.equal(r["residual"][sent], torch.zeros(int(sent.sum())))
        assert torch.equal(r["residual"][~sent], g[~sent])


def test_state_rejects_bad_arguments() -> None:
    ctl = make_policy("dense")
    with pytest.raises(InputError, match="warmup_steps"):
        CompressionHookState(controller=ctl, world_size=2, rank=0, warmup_steps=0)
    with pytest.raises(InputError, match="rank"):
        CompressionHookState(controller=ctl, world_size=2, rank=2)
    with pytest.raises(InputError, match="owner"):
        CompressionHookState(controller=ctl, world_size=2, rank=0, owner_rule="best")
