"""The comm hook on 2 gloo ranks: dense equals DDP's allreduce bit for bit, sparse exchanges
give the exact average computed by hand, every rank takes the same decisions, and the state
survives a checkpoint round trip.

Starting processes is the slow part, so one spawn runs every scenario (module fixture) and the
tests assert on its results.
"""

from __future__ import annotations

import io
import time
from typing import Any

import pytest
import torch
import torch.distributed as dist
from _spawn import run_ranks
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from realrun.emulation import HookEmulator
from realrun.hook import CompressionHookState, compression_hook
from realrun.traceplayer import TracePlayer
from sim.control import make_policy
from sim.control.types import Decision, Observation
from sim.errors import InputError
from traces.model import PiecewiseTrace

NUMEL = 40
DENSITY = 0.1  # k = 4 of 40


# ------------------------------------------------------------------ scenario: dense == DDP
def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(12, 16), nn.Tanh(), nn.Linear(16, 3))


def _dense(rank: int, world: int) -> dict[str, Any]:
    plain = DDP(_mlp(), bucket_cap_mb=0.0004)  # tiny buckets: several per step
    hooked = DDP(_mlp(), bucket_cap_mb=0.0004)
    state = CompressionHookState(controller=make_policy("dense"), world_size=world, rank=rank)
    hooked.register_comm_hook(state, compression_hook)
    # The same with the agreement deferred to flush() (as the trainer runs static policies).
    deferred = DDP(_mlp(), bucket_cap_mb=0.0004)
    state_d = CompressionHookState(controller=make_policy("dense"), world_size=world, rank=rank,
                                   agree_each_step=False)
    deferred.register_comm_hook(state_d, compression_hook)
    opt_a = torch.optim.SGD(plain.parameters(), lr=0.1)
    opt_b = torch.optim.SGD(hooked.parameters(), lr=0.1)
    opt_c = torch.optim.SGD(deferred.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(100 + rank)
    same = []
    for step in range(4):
        x = torch.randn(8, 12, generator=gen)
        y = torch.randint(0, 3, (8,), generator=gen)
        for m, opt in ((plain, opt_a), (hooked, opt_b), (deferred, opt_c)):
            opt.zero_grad()
            nn.functional.cross_entropy(m(x), y).backward()
            opt.step()
        # Alternate the synchronous and the asynchronous agreement.
        state.end_iteration(iter_s=0.0, wait=step % 2 == 0)
        state_d.end_iteration(iter_s=0.0, wait=False)
        same.append(all(torch.equal(a.grad, b.grad) and torch.equal(a.grad, c.grad)
                        for a, b, c in zip(plain.parameters(), hooked.parameters(),
                                           deferred.parameters(), strict=True)))
    state.flush()
    n_before_flush = len(state_d.history)
    state_d.flush()
    return {"same": same, "params": [p.detach().clone() for p in hooked.parameters()],
            "n_iterations": len(state.history), "n_deferred_before": n_before_flush,
            "deferred": [(h.iteration, h.bytes_sent, h.gain, h.comm_s >= 0)
                         for h in state_d.history],
            "live": [(h.iteration, h.bytes_sent, h.gain, h.comm_s >= 0)
                     for h in state.history]}


# ------------------------------------------------------------------ scenario: sparse by hand
def _linear() -> nn.Module:
    torch.manual_seed(0)
    return nn.Linear(NUMEL, 1, bias=False)  # one parameter -> one bucket of 40 elements


def _sparse(rank: int, world: int, collective: str) -> dict[str, Any]:
    import realrun.hook.exchange.payload as payload_mod

    priced: list[str] = []
    real_terms = payload_mod.collective_terms

    def spy(coll: str, *args: Any) -> Any:
        priced.append(coll)
        return real_terms(coll, *args)

    payload_mod.collective_terms = spy  # type: ignore[assignment]
    try:
        out = _sparse_steps(rank, world, collective)
    finally:
        payload_mod.collective_terms = real_terms  # type: ignore[assignment]
    out["priced"] = priced
    return out


def _sparse_steps(rank: int, world: int, collective: str) -> dict[str, Any]:
    ddp = DDP(_linear())
    local = _linear()
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


# ------------------------------------------------------------------ scenario: decisions, checkpoint
def _small() -> nn.Module:
    torch.manual_seed(1)
    return nn.Sequential(nn.Linear(30, 20), nn.ReLU(), nn.Linear(20, 4))


def _make(rank: int, world: int, policy: str, **params: object) -> tuple[DDP, CompressionHookState]:
    model = _small()
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
        state.end_iteration(iter_s=0.001, wait=False)
    state.flush()  # a launched collective must be waited for before the process group goes


def _decisions(rank: int, world: int) -> list[float]:
    ddp, state = _make(rank, world, "dc2-aimd", min_density=0.01, target_s=0.001,
                       collective="allgather")
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    _train(ddp, state, opt, torch.Generator().manual_seed(rank), 10)
    state.flush()
    return [h.decision.density for h in state.history]


def _checkpoint(rank: int, world: int) -> dict[str, Any]:
    params = {"density": 0.05, "collective": "allgather"}
    gen = torch.Generator().manual_seed(10 + rank)
    a, sa = _make(rank, world, "fixed", **params)
    opt_a = torch.optim.SGD(a.parameters(), lr=0.1)
    _train(a, sa, opt_a, gen, 6)
    buf = io.BytesIO()
    torch.save({"model": a.module.state_dict(), "hook": sa.state_dict()}, buf)
    # Continue the original, and a fresh copy restored from the checkpoint, on the same data.
    # The fresh DDP's first iteration uses its pre-rebuild bucket order: the state must cope.
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
    keys = sorted(sa.memory.state_dict()["residuals"])
    return {
        "same_params": all(torch.equal(p, q)
                           for p, q in zip(a.parameters(), b.parameters(), strict=True)),
        "same_residuals": all(torch.equal(sa.memory.residual(k), sb.memory.residual(k))
                              for k in keys),
        "n_residuals": len(keys),
        "steps": (sa.step, sb.step),
    }


# ------------------------------------------------------------------ scenario: per-bucket collectives
#: How long :class:`_PerBucket` takes to decide.
_DECIDE_SLEEP_S = 0.003


class _PerBucket:
    """A controller that sees the bucket sizes and sends bucket 0 over tree, the rest over ring."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, ...]] = []

    def reset(self, *, seed: int) -> None:
        """Stateless."""

    def decide(self, obs: Observation) -> Decision:
        self.seen.append(obs.bucket_bytes)
        time.sleep(_DECIDE_SLEEP_S)  # a slow decision, for the records' decide_s
        if not obs.bucket_bytes:
            return Decision()
        colls = ("tree",) + ("ring",) * (len(obs.bucket_bytes) - 1)
        return Decision("none", 1.0, "ring", colls)


def _per_bucket(rank: int, world: int) -> dict[str, Any]:
    import realrun.hook.comm_hook as hook_mod

    used: list[tuple[int, str]] = []
    real = hook_mod.dense_async

    def spy(state: Any, cur: Any, buf: torch.Tensor, collective: str) -> Any:
        used.append((cur.iteration, collective))
        return real(state, cur, buf, collective)

    hook_mod.dense_async = spy  # type: ignore[assignment]
    try:
        ctl = _PerBucket()
        torch.manual_seed(0)
        # The last layer (1.1 MB) overflows DDP's 1 MB first bucket: >= 2 buckets after rebuild.
        net = nn.Sequential(nn.Linear(12, 400), nn.Tanh(), nn.Linear(400, 700))
        ddp = DDP(net, bucket_cap_mb=0.5)
        state = CompressionHookState(controller=ctl, world_size=world, rank=rank)
        ddp.register_comm_hook(state, compression_hook)
        gen = torch.Generator().manual_seed(5 + rank)
        for _ in range(4):
            x = torch.randn(8, 12, generator=gen)
            ddp(x).pow(2).sum().backward()
            state.end_iteration(iter_s=0.0)
        state.flush()
    finally:
        hook_mod.dense_async = real  # type: ignore[assignment]
    return {"seen": ctl.seen, "used": used,
            "sizes": [p.numel() * 4 for p in ddp.parameters()],
            "decide_s": [(h.warmup, h.decide_s) for h in state.history]}


def _all(rank: int, world: int) -> dict[str, Any]:
    return {
        "dense": _dense(rank, world),
        "allgather": _sparse(rank, world, "allgather"),
        "allgather-direct": _sparse(rank, world, "allgather-direct"),
        "artopk-ring": _sparse(rank, world, "artopk-ring"),
        "decisions": _decisions(rank, world),
        "checkpoint": _checkpoint(rank, world),
        "per_bucket": _per_bucket(rank, world),
    }


@pytest.fixture(scope="module")
def ranks() -> list[dict[str, Any]]:
    return run_ranks(_all, 2)


# ------------------------------------------------------------------ tests
def test_dense_hook_equals_ddp_default_bit_for_bit(ranks: list[dict[str, Any]]) -> None:
    for r in ranks:
        assert r["dense"]["same"] == [True] * 4
    for a, b in zip(ranks[0]["dense"]["params"], ranks[1]["dense"]["params"], strict=True):
        assert torch.equal(a, b)


def test_deferred_agreement_records_every_iteration_at_flush(
        ranks: list[dict[str, Any]]) -> None:
    for r in ranks:
        d = r["dense"]
        assert d["n_deferred_before"] == 0  # nothing agreed (no collective) before flush()
        assert d["n_iterations"] == 4
        assert d["deferred"] == d["live"]  # same iterations, bytes, gain 1, comm measured
        assert [it for it, *_ in d["deferred"]] == [0, 1, 2, 3]
    assert ranks[0]["dense"]["deferred"] == ranks[1]["dense"]["deferred"]


@pytest.mark.parametrize("collective", ["allgather", "artopk-ring"])
def test_sparse_average_is_exact(ranks: list[dict[str, Any]], collective: str) -> None:
    res = [r[collective] for r in ranks]
    g1 = res[0]["grads1"]  # step 1 is the first compressed step; residuals start at zero
    want = torch.zeros(NUMEL)
    if collective == "allgather":
        for g in g1:  # every rank's own top-4, averaged; rank order as the hook adds them
            idx = g.abs().topk(4).indices
            want.index_add_(0, idx, g[idx] / 2)
        sent_by = [g.abs().topk(4).indices for g in g1]
    else:
        owner = 1 % 2  # STAR: step mod world size
        idx = g1[owner].abs().topk(4).indices
        want[idx] = g1[0][idx] / 2 + g1[1][idx] / 2
        sent_by = [idx, idx]
    for rank, r in enumerate(res):
        assert torch.equal(r["result1"], want)
        # step 0 is the dense warm-up: the plain average
        assert torch.equal(r["result0"], r["grads0"][0] / 2 + r["grads0"][1] / 2)
        # error feedback: what this rank did not contribute stays in its residual
        sent = torch.zeros(NUMEL, dtype=torch.bool)
        sent[sent_by[rank]] = True
        assert torch.equal(r["residual"][sent], torch.zeros(4))
        assert torch.equal(r["residual"][~sent], g1[rank][~sent])


def test_allgather_variants_exchange_alike_and_are_priced_as_chosen(
    ranks: list[dict[str, Any]],
) -> None:
    for r in ranks:
        # torch.distributed runs the same all_gather: the same average, bit for bit ...
        assert torch.equal(r["allgather-direct"]["result1"], r["allgather"]["result1"])
        # ... priced as the decision's collective (step 0 is the dense warm-up).
        assert r["allgather-direct"]["priced"] == ["allgather-direct"]
        assert r["allgather"]["priced"] == ["allgather"]


def test_every_rank_takes_the_same_decisions(ranks: list[dict[str, Any]]) -> None:
    d0, d1 = ranks[0]["decisions"], ranks[1]["decisions"]
    assert d0 == d1
    assert len(set(d0)) > 1  # the controller did move: the comparison means something


def test_error_feedback_state_survives_checkpoint(ranks: list[dict[str, Any]]) -> None:
    for r in ranks:
        ck = r["checkpoint"]
        assert ck["n_residuals"] >= 1
        assert ck["same_residuals"]
        assert ck["same_params"]
        assert ck["steps"] == (10, 10)


def test_hook_uses_each_buckets_own_collective(ranks: list[dict[str, Any]]) -> None:
    for r in ranks:
        pb = r["per_bucket"]
        # After the warm-up iteration the controller sees every bucket's dense bytes...
        sizes = [s for s in pb["seen"] if s]
        assert sizes and sum(sizes[0]) == sum(pb["sizes"]) and len(sizes[0]) > 1
        # ... and the hook sends bucket 0 over tree and the others over ring.
        by_iter: dict[int, list[str]] = {}
        for it, coll in pb["used"]:
            by_iter.setdefault(it, []).append(coll)
        decided = [colls for it, colls in sorted(by_iter.items()) if it >= 2]
        assert decided and all(c[0] == "tree" and set(c[1:]) == {"ring"} for c in decided)
    assert ranks[0]["per_bucket"]["used"] == ranks[1]["per_bucket"]["used"]


def test_state_rejects_bad_arguments() -> None:
    ctl = make_policy("dense")
    with pytest.raises(InputError, match="warmup_steps"):
        CompressionHookState(controller=ctl, world_size=2, rank=0, warmup_steps=0)
    with pytest.raises(InputError, match="rank"):
        CompressionHookState(controller=ctl, world_size=2, rank=2)
    with pytest.raises(InputError, match="owner"):
        CompressionHookState(controller=ctl, world_size=2, rank=0, owner_rule="best")
    with pytest.raises(InputError, match="VAR"):
        CompressionHookState(controller=ctl, world_size=2, rank=0, owner_rule="var",
                             agree_each_step=False)


def test_decision_time_is_recorded_per_iteration(ranks: list[dict[str, Any]]) -> None:
    """``decide_s``: the controller's decide() wall time (the slowest rank's), 0 in warm-up."""
    for r in ranks:
        rows = r["per_bucket"]["decide_s"]
        assert [w for w, _ in rows] == [True, False, False, False]
        assert rows[0][1] == 0.0
        assert all(_DECIDE_SLEEP_S <= d < 1.0 for _, d in rows[1:])
    assert ranks[0]["per_bucket"]["decide_s"] == ranks[1]["per_bucket"]["decide_s"]
