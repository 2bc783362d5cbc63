"""The hook's dense path equals DDP's built-in allreduce bit for bit (2 gloo ranks)."""

from __future__ import annotations

import torch
from _spawn import run_ranks
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from realrun.hook import CompressionHookState, compression_hook
from sim.control import make_policy


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(12, 16), nn.Tanh(), nn.Linear(16, 3))


def _train(rank: int, world: int, steps: int) -> dict[str, object]:
    plain = DDP(_model(), bucket_cap_mb=0.0004)  # tiny buckets: several per step
    hooked = DDP(_model(), bucket_cap_mb=0.0004)
    state = CompressionHookState(
        controller=make_policy("dense"), world_size=world, rank=rank, warmup_steps=1
    )
    hooked.register_comm_hook(state, compression_hook)
    opt_a = torch.optim.SGD(plain.parameters(), lr=0.1)
    opt_b = torch.optim.SGD(hooked.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(100 + rank)
    same = []
    for _ in range(steps):
        x = torch.randn(8, 12, generator=gen)
        y = torch.randint(0, 3, (8,), generator=gen)
        for m, opt in ((plain, opt_a), (hooked, opt_b)):
            opt.zero_grad()
            nn.functional.cross_entropy(m(x), y).backward()
            opt.step()
        state.end_iteration(iter_s=0.0)
        same.append(
            all(
                torch.equal(a.grad, b.grad)
                for a, b in zip(plain.parameters(), hooked.parameters(), strict=True)
            )
        )
    return {
        "same": same,
        "params": [p.detach().clone() for p in hooked.parameters()],
        "decisions": [h.decision for h in state.history],
        "buckets": len(state.history[-1].decision.__dict__),
    }


def test_dense_hook_equals_ddp_default_bit_for_bit() -> None:
    res = run_ranks(_train, 2, 4)
    for r in res:
        assert r["same"] == [True] * 4
    for a, b in zip(res[0]["params"], res[1]["params"], strict=True):
        assert torch.equal(a, b)
    assert res[0]["decisions"] == res[1]["decisions"]
