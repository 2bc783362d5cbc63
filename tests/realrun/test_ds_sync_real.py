"""DS-Sync in real runs (gloo on CPU, 2-4 ranks, a few steps of a tiny model)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
from _spawn import run_ranks
from torch.nn.parallel import DistributedDataParallel as DDP

from realrun.ds_sync import GroupAverager, ds_sync_step, grouping_label
from sim.entry import main
from sim.rundir import read_run
from sim.sync import group_of, groups_at

STEPS = 6


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))


def _batch(rank: int, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(5, 8, generator=g), torch.randint(0, 3, (5,), generator=g)


def _train(rank: int, world: int, groups: int, every: int, plain: bool) -> dict[str, Any]:
    ddp = DDP(_model())
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    loss_fn = torch.nn.functional.cross_entropy
    avg = GroupAverager(world, rank, groups, every, seed=11)
    after: list[list[float]] = []
    for step in range(STEPS):
        if plain:
            x, y = _batch(rank, step)
            loss_fn(ddp(x), y).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        else:
            ds_sync_step(ddp, opt, loss_fn, _batch(rank, step), avg, step)
        flat = torch.cat([p.detach().reshape(-1) for p in ddp.module.parameters()])
        # Every rank's parameters, to check that the members of each group agree.
        every_rank = [torch.zeros_like(flat) for _ in range(world)]
        dist.all_gather(every_rank, flat)
        after.append([float(t.sum()) for t in every_rank])
    return {
        "params": [p.detach().clone() for p in ddp.module.parameters()],
        "history": list(avg.history),
        "sums": after,
    }


def _ranks(world: int, groups: int, every: int, plain: bool) -> list[dict[str, Any]]:
    return run_ranks(_train, world, groups, every, plain)


def _plain_then_one_group(rank: int, world: int) -> tuple[dict[str, Any], dict[str, Any]]:
    # Both runs in the same ranks (one spawn: most of this test's time is starting ranks);
    # each run builds its own model, optimiser and averager from the same seeds.
    return _train(rank, world, 1, 1, True), _train(rank, world, 1, 3, False)


@pytest.mark.parametrize("world", [2, 4])
def test_one_group_equals_plain_allreduce(world: int) -> None:
    both = run_ranks(_plain_then_one_group, world)
    plain = [b[0] for b in both]
    ds = [b[1] for b in both]
    for p_rank, d_rank in zip(plain, ds, strict=True):
        for a, b in zip(p_rank["params"], d_rank["params"], strict=True):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert all(h == ["0," + ",".join(str(r) for r in range(1, world))] * STEPS
               for h in (r["history"] for r in ds))


def test_every_rank_holds_the_same_grouping_and_groups_reach_consensus() -> None:
    world, g, k = 4, 2, 2
    ranks = _ranks(world, g, k, False)
    want = [grouping_label(groups_at(s, world, g, k, 11)) for s in range(STEPS)]
    assert all(r["history"] == want for r in ranks)
    assert len(set(want)) > 1  # the groups were reshuffled
    for step in range(STEPS):
        sums = ranks[0]["sums"][step]
        for grp in groups_at(step, world, g, k, 11):
            vals = [sums[r] for r in grp]
            assert max(vals) - min(vals) <= 1e-4 * max(1.0, abs(vals[0]))
    # Groups differ from each other (no global consensus): DS-Sync really is grouped.
    last = ranks[0]["sums"][-1]
    a = group_of(0, groups_at(STEPS - 1, world, g, k, 11))
    other = next(r for r in range(world) if r not in a)
    assert last[a[0]] != last[other]


@pytest.mark.parametrize(
    ("extra", "msg"),
    [
        (["--nproc", "4", "--groups", "3", "--sync", "ds-sync"], "must divide"),
        (["--nproc", "2", "--groups", "0", "--sync", "ds-sync"], "--groups must be >= 1"),
        (["--nproc", "2", "--shuffle-every", "0", "--sync", "ds-sync"], "--shuffle-every"),
        (["--nproc", "2", "--groups", "2"], "need --sync ds-sync"),
        (["--nproc", "2", "--sync", "ds-sync", "--policy", "fixed"], "needs --policy dense"),
    ],
)
def test_bad_sync_flags_fail_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], msg: str
) -> None:
    out = tmp_path / "r"
    argv = ["real", "--workload", "digits-mlp", "--emulation", "none", "--out", str(out), *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and msg in err[0], err
    assert not out.exists()


@pytest.mark.slow
def test_real_ds_sync_run_records_the_agreed_grouping(tmp_path: Path) -> None:
    out = tmp_path / "r"
    argv = ["real", "--workload", "digits-mlp", "--nproc", "4", "--steps", "6", "--emulation",
            "none", "--eval-every", "6", "--sync", "ds-sync", "--groups", "2",
            "--shuffle-every", "2", "--seed", "3", "--out", str(out), "--quiet"]
    assert main(argv) == 0
    rec, meta = read_run(out)
    want = [grouping_label(groups_at(s, 4, 2, 2, 3)) for s in range(6)]
    assert rec["grouping"].tolist() == want
    assert rec["grouping_agreed"].all()
    assert (rec["groups"] == 2).all() and meta["config"]["sync"] == "ds-sync"
