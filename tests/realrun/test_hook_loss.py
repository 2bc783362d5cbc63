"""The bounded-loss drop rule in the comm hook on 2 gloo ranks: zero loss equals the plain
hook exactly, delivered never falls below 1 - bound, the seeded loss replays exactly, and error
feedback keeps what was lost."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from _spawn import run_ranks
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from realrun.hook import CompressionHookState, compression_hook
from realrun.hook.loss import BoundedLoss
from sim.control import make_policy
from sim.errors import InputError

BOUND = 0.05


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(32, 48), nn.Tanh(), nn.Linear(48, 10))


def _train(rank: int, world: int, loss: dict[str, Any] | None) -> dict[str, Any]:
    m = DDP(_model(), bucket_cap_mb=0.004)
    state = CompressionHookState(controller=make_policy("dense"), world_size=world, rank=rank,
                                 seed=7)
    if loss is not None:
        order = {id(p): i for i, p in enumerate(m.module.parameters())}
        state.loss = BoundedLoss(seed=7, rank=rank, mtu_bytes=160, layer_of_param=order, **loss)
    m.register_comm_hook(state, compression_hook)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(50 + rank)
    for _ in range(5):
        x = torch.randn(16, 32, generator=gen)
        y = torch.randint(0, 10, (16,), generator=gen)
        opt.zero_grad()
        nn.functional.cross_entropy(m(x), y).backward()
        opt.step()
        state.end_iteration(iter_s=0.0, wait=True)
    state.flush()
    counts = state.loss.step_fractions(5).tolist() if state.loss is not None else None
    return {"params": [p.detach().clone() for p in m.parameters()], "counts": counts}


def _all(rank: int, world: int) -> dict[str, Any]:
    return {
        "plain": _train(rank, world, None),
        "zero": _train(rank, world, {"loss_bound": BOUND, "packet_loss": 0.0}),
        "lossy": _train(rank, world, {"loss_bound": BOUND, "packet_loss": 0.2}),
        "again": _train(rank, world, {"loss_bound": BOUND, "packet_loss": 0.2}),
        "ef": _train(rank, world, {"loss_bound": BOUND, "packet_loss": 0.2,
                                   "error_feedback": True}),
    }


@pytest.fixture(scope="module")
def ranks() -> list[dict[str, Any]]:
    return run_ranks(_all, 2)


def _same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


def test_zero_loss_equals_the_plain_hook_exactly(ranks: list[dict[str, Any]]) -> None:
    for r in ranks:
        assert _same(r["plain"]["params"], r["zero"]["params"])
        assert all(d == n for d, n in r["zero"]["counts"][1:])


def test_delivered_never_below_the_bound_every_step(ranks: list[dict[str, Any]]) -> None:
    for r in ranks:
        counts = r["lossy"]["counts"]
        assert counts[0] == [0, 0]  # the warm-up step is plain allreduce
        for d, n in counts[1:]:
            assert n > 0 and d >= (1 - BOUND) * n - 1e-9
        assert any(d < n for d, n in counts[1:])  # the loss did bite
        assert not _same(r["plain"]["params"], r["lossy"]["params"])


def test_seeded_loss_replays_and_feedback_changes_the_result(
    ranks: list[dict[str, Any]],
) -> None:
    for r in ranks:
        assert _same(r["lossy"]["params"], r["again"]["params"])
        assert r["lossy"]["counts"] == r["again"]["counts"]
        assert not _same(r["lossy"]["params"], r["ef"]["params"])


@pytest.mark.parametrize(
    "kw",
    [{"loss_bound": 1.0, "packet_loss": 0.0}, {"loss_bound": 0.01, "packet_loss": -0.1},
     {"loss_bound": 0.01, "packet_loss": 0.0, "deadline_s": 0.0}],
)
def test_bad_arguments(kw: dict[str, Any]) -> None:
    with pytest.raises(InputError):
        BoundedLoss(**kw)


# ------------------------------------------------------------------ the rule on one rank
def _grad(n: int = 4000) -> torch.Tensor:
    return torch.randn(n, generator=torch.Generator().manual_seed(3))


def test_deadline_drops_the_lowest_priority_up_to_the_bound() -> None:
    bl = BoundedLoss(loss_bound=0.1, packet_loss=0.0, deadline_s=0.01, mtu_bytes=40)
    g = _grad()
    assert bl.apply(g.clone(), 0, [], step=1) == 1.0  # no measurement yet: nothing cut
    bl.last_comm_s = 0.02  # twice the deadline: half the transfer is late, the bound caps it
    assert bl.deadline_fraction() == pytest.approx(0.5)
    out = g.clone()
    frac = bl.apply(out, 0, [], step=2)
    assert frac == pytest.approx(0.9)
    zeroed = (out == 0) & (g != 0)
    # The zeroed packets are the ones with the least energy.
    energy = g.view(-1, 10).square().mean(dim=1)
    cut = zeroed.view(-1, 10).all(dim=1)
    assert energy[cut].max() <= energy[~cut].min()
    bl.last_comm_s = 0.005  # on time: nothing dropped
    assert bl.apply(g.clone(), 0, [], step=3) == 1.0


def test_error_feedback_returns_the_lost_entries_next_step() -> None:
    bl = BoundedLoss(loss_bound=0.2, packet_loss=0.15, error_feedback=True, mtu_bytes=40)
    g = _grad()
    first = g.clone()
    bl.apply(first, 0, [], step=1)
    lost = g - first
    assert lost.abs().sum() > 0
    second = torch.zeros_like(g)
    bl.apply(second, 0, [], step=2)
    # What step 1 lost arrives in step 2 unless step 2 loses it again.
    kept = second != 0
    assert torch.equal(second[kept], lost[kept])
    assert kept.sum() > 0
