"""Built-in real workloads: determinism, sharding, shapes, evaluation, errors."""

from __future__ import annotations

import pytest
import torch

from realrun.workloads import get_workload, parameter_count, workload_names
from sim.errors import InputError

NAMES = ["char-lstm", "digits-cnn", "digits-mlp"]


def test_names_listed() -> None:
    assert workload_names() == NAMES


def test_unknown_workload_is_input_error() -> None:
    with pytest.raises(InputError, match="unknown workload 'nope'"):
        get_workload("nope")


@pytest.mark.parametrize("name", NAMES)
def test_build_model_deterministic_and_leaves_global_rng(name: str) -> None:
    wl = get_workload(name)
    state = torch.random.get_rng_state()
    a, b, c = wl.build_model(1), wl.build_model(1), wl.build_model(2)
    assert torch.equal(state, torch.random.get_rng_state())
    pa, pb, pc = (torch.cat([p.flatten() for p in m.parameters()]) for m in (a, b, c))
    assert torch.equal(pa, pb)
    assert not torch.equal(pa, pc)


@pytest.mark.parametrize("name", NAMES)
def test_batches_deterministic_and_trainable(name: str) -> None:
    wl = get_workload(name)
    it1 = wl.batches(1, 4, 8, 5)
    it2 = wl.batches(1, 4, 8, 5)
    other = wl.batches(0, 4, 8, 5)
    for _ in range(3):
        (x1, y1), (x2, y2), (x3, _) = next(it1), next(it2), next(other)
        assert torch.equal(x1, x2) and torch.equal(y1, y2)
        assert not torch.equal(x1, x3)
        assert x1.shape[0] == 8
    model = wl.build_model(0)
    loss = wl.loss_fn(model(x1), y1)
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())
    metrics = wl.evaluate(model)
    assert set(metrics) == {"loss", "accuracy"}
    assert 0.0 <= metrics["accuracy"] <= 1.0 and metrics["loss"] > 0
    assert model.training  # evaluate restores train mode


def test_digit_shards_are_disjoint_and_cover_epoch() -> None:
    wl = get_workload("digits-mlp")
    world, bs = 3, 16
    seen: list[torch.Tensor] = []
    for rank in range(world):
        it = wl.batches(rank, world, bs, 9)
        n_batches = (1438 // world) // bs
        seen.extend(next(it)[0] for _ in range(n_batches))
    rows = torch.cat(seen)
    # Distinct training images appear once per epoch across ranks (duplicates in the data set
    # itself are rare; allow none beyond those already identical in the raw data).
    assert rows.shape[0] == world * ((1438 // world) // bs) * bs
    assert torch.unique(rows, dim=0).shape[0] >= rows.shape[0] - 5


def test_parameter_counts() -> None:
    counts = {n: parameter_count(get_workload(n).build_model(0)) for n in NAMES}
    assert counts["digits-mlp"] == 64 * 128 + 128 + 128 * 10 + 10
    assert counts["digits-cnn"] == 160 + 4640 + 512 * 64 + 64 + 650
    assert counts["char-lstm"] > 50_000


@pytest.mark.parametrize(
    ("rank", "world", "bs"), [(4, 4, 8), (-1, 2, 8), (0, 0, 8), (0, 2, 0), (0, 1, 10_000)]
)
def test_bad_sharding_is_input_error(rank: int, world: int, bs: int) -> None:
    with pytest.raises(InputError):
        next(get_workload("digits-mlp").batches(rank, world, bs, 0))


def test_short_training_improves_digits() -> None:
    wl = get_workload("digits-mlp")
    model = wl.build_model(0)
    opt = wl.make_optimizer(model.parameters())
    before = wl.evaluate(model)["loss"]
    it = wl.batches(0, 1, 32, 0)
    for _ in range(60):
        x, y = next(it)
        opt.zero_grad()
        wl.loss_fn(model(x), y).backward()
        opt.step()
    assert wl.evaluate(model)["loss"] < before
