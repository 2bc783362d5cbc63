"""Every rank takes the same decisions; the hook state survives a checkpoint round trip."""

from __future__ import annotations

import io

import torch
from _spawn import run_ranks
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from realrun.emulation import HookEmulator
from realrun.hook import CompressionHookState, compression_hook
from realrun.traceplayer import TracePlayer
from sim.control import make_policy
from traces.model import PiecewiseTrace


def _model() -> nn.Module:
    torch.manual_seed(1)
    return nn.Sequential(nn.Linear(30, 20), nn.ReLU(), nn.Linear(20, 4))


def _make(rank: int, world: int, policy: str, **params: object) -> tuple[DDP, CompressionHookState]:
    model = _model()
    names = {id(p): n for n, p in model.named_parameters()}
    ddp = DDP(model, bucket_cap_mb=0.002)
    # A slow emulated link (2 ms latency, 1 MB/s) so comm dominates and the controller acts.
    player = TracePlayer(PiecewiseTrace.constant(0.002, 1e6))
    player.start()
    state = CompressionHookState(
        controller=make_policy(policy, seed=3, **params), world_size=world, rank=rank,
        emulator=HookEmulator("hook", player), seed=3, param_names=names,
    )
    ddp.register_comm_hook(state, compression_hook)
    return ddp, state


def _train(ddp: DDP, state: CompressionHookState, opt: torch.optim.Optimizer,
           gen: torch.Generator, steps: int) -> None:
    for _ in range(steps):
        x = torch.randn(16, 30, generator=gen)
        y = torch.randint(0, 4, (16,), generator=gen)
        opt.zero_grad()
        nn.functional.cross_entropy(ddp(x), y).backward()
        opt.step()
        state.end_iteration(iter_s=0.001)


def _decisions(rank: int, world: int) -> list[float]:
    ddp, state = _make(rank, world, "dc2-aimd", min_density=0.01, target_s=0.001,
                      collective="allgather")
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    _train(ddp, state, opt, torch.Generator().manual_seed(rank), 10)
    return [h.decision.density for h in state.history]


def test_every_rank_takes_the_same_decisions() -> None:
    d0, d1 = run_ranks(_decisions, 2)
    assert d0 == d1
    assert len(set(d0)) > 1  # the controller did move: the comparison means something


def _checkpoint(rank: int, world: int) -> dict[str, object]:
    params = {"density": 0.05, "collective": "allgather"}
    gen = torch.Generator().manual_seed(10 + rank)
    a, sa = _make(rank, world, "fixed", **params)
    opt_a = torch.optim.SGD(a.parameters(), lr=0.1)
    _train(a, sa, opt_a, gen, 6)
    buf = io.BytesIO()
    torch.save({"model": a.module.state_dict(), "hook": sa.state_dict()}, buf)
    # Continue the original, and a fresh copy restored from the checkpoint, on the same data.
    gen_state = gen.get_state()
    _train(a, sa, opt_a, gen, 4)
    buf.seek(0)
    ck = torch.load(buf, weights_only=False)
    b, sb = _make(rank, world, "fixed", **params)
    b.module.load_state_dict(ck["model"])
    sb.load_state_dict(ck["hook"])
    opt_b = torch.optim.SGD(b.parameters(), lr=0.1)
    gen.set_state(gen_state)
    _train(b, sb, opt_b, gen, 4)
    residual_keys = sorted(sa.memory.state_dict()["residuals"])
    return {
        "same_params": all(
            torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True)
        ),
        "same_residuals": all(
            torch.equal(sa.memory.residual(k), sb.memory.residual(k)) for k in residual_keys
        ),
        "n_residuals": len(residual_keys),
        "steps": (sa.step, sb.step),
    }


def test_error_feedback_state_survives_checkpoint() -> None:
    for r in run_ranks(_checkpoint, 2):
        assert r["n_residuals"] >= 1
        assert r["same_residuals"]
        assert r["same_params"]
        assert r["steps"] == (10, 10)
