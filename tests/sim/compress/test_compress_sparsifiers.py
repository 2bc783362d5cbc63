"""Exact top-k, shared-seed random-k, and the sparse helpers used by communication hooks."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.compress.algorithms.randomk import random_indices
from sim.compress.base import generator_for, k_for, make_compressor, sparse_from, values_at
from sim.compress.kernels.sparse import indices_above


def test_topk_matches_torch_topk_selection() -> None:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(100_003, generator=gen)
    for density in (0.5, 0.01, 0.0001):
        c = make_compressor("topk").compress(x, density)
        values, idx = c.tensors
        k = k_for(x.numel(), density)
        expected = torch.topk(x.abs(), k).indices
        assert idx.dtype == torch.int32
        assert set(idx.tolist()) == set(expected.tolist())
        torch.testing.assert_close(values, x[idx.long()])


def test_randomk_same_seed_same_indices_on_every_rank() -> None:
    ranks = [torch.randn(50_000, generator=torch.Generator().manual_seed(r)) for r in range(4)]
    idx = [make_compressor("randomk", seed=7).compress(x, 0.01, key="layer1", step=3).ctx["indices"] for x in ranks]
    for other in idx[1:]:
        assert torch.equal(idx[0], other)
    later = make_compressor("randomk", seed=7).compress(ranks[0], 0.01, key="layer1", step=4).ctx["indices"]
    other_key = make_compressor("randomk", seed=7).compress(ranks[0], 0.01, key="layer2", step=3).ctx["indices"]
    assert not torch.equal(idx[0], later)
    assert not torch.equal(idx[0], other_key)


def test_randomk_allreduce_of_values_equals_mean_of_decompressed() -> None:
    ranks = [torch.randn(10_000, generator=torch.Generator().manual_seed(r)) for r in range(3)]
    comps = [make_compressor("randomk", seed=1) for _ in ranks]
    cs = [c.compress(x, 0.05, key=0, step=0) for c, x in zip(comps, ranks, strict=True)]
    summed = cs[0].with_tensors([sum(c.tensors[0] for c in cs) / 3])
    expected = comps[0].aggregate([comp.decompress(c) for comp, c in zip(comps, cs, strict=True)])
    torch.testing.assert_close(comps[0].decompress(summed), expected)


@settings(max_examples=40, deadline=None)
@given(numel=st.integers(1, 5000), frac=st.floats(0.0001, 1.0), seed=st.integers(0, 2**31))
def test_random_indices_are_distinct_sorted_and_in_range(numel: int, frac: float, seed: int) -> None:
    k = k_for(numel, frac)
    idx = random_indices(numel, k, generator_for(seed, "x", 0), torch.device("cpu"))
    assert idx.numel() == k
    assert torch.unique(idx).numel() == k
    assert bool((idx[1:] > idx[:-1]).all())
    assert int(idx.min()) >= 0 and int(idx.max()) < numel


def test_random_indices_are_uniform() -> None:
    """Chi-square over 10 bins of 20 draws of 500 of 10,000 indices (p < 1e-4 would fail)."""
    counts = torch.zeros(10)
    for step in range(20):
        idx = random_indices(10_000, 500, generator_for(0, 0, step), torch.device("cpu"))
        counts += torch.bincount(idx // 1000, minlength=10).float()
    expected = counts.sum() / 10
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 33.7  # chi-square(9) 99.99th percentile


@settings(max_examples=40, deadline=None)
@given(numel=st.integers(1, 3000), threshold=st.floats(0.0, 3.0), seed=st.integers(0, 1000))
def test_indices_above_equals_plain_nonzero(numel: int, threshold: float, seed: int) -> None:
    a = torch.randn(numel, generator=torch.Generator().manual_seed(seed)).abs()
    assert torch.equal(indices_above(a, threshold), torch.nonzero(a > threshold).squeeze(1))


def test_values_at_and_sparse_from_support_artopk() -> None:
    """AR-Topk: the owner's indices, every rank's own values, summed like an allreduce."""
    owner = torch.tensor([0.0, 5.0, -1.0, 0.2, -7.0])
    other = torch.tensor([1.0, 1.0, 1.0, 1.0, 1.0])
    c = make_compressor("topk").compress(owner, 0.4)
    idx = c.tensors[1]
    total = values_at(owner, idx) + values_at(other, idx)
    dense = sparse_from(idx, total, 5)
    assert dense.tolist() == [0.0, 6.0, 0.0, 0.0, -6.0]
    acc = sparse_from(idx, values_at(other, idx), 5, out=sparse_from(idx, values_at(owner, idx), 5))
    assert torch.equal(acc, dense)


def test_threshold_estimators_send_all_nonzeros_when_few() -> None:
    x = torch.zeros(10_000)
    x[[3, 70, 900]] = torch.tensor([1.0, -2.0, 0.5])
    for name in ("sidco-exp", "sidco-gp", "sidco-gamma", "dgc", "gaussiank", "redsync"):
        c = make_compressor(name).compress(x, 0.01)
        assert sorted(c.tensors[1].tolist()) == [3, 70, 900], name


def test_dgc_never_sends_more_than_k() -> None:
    x = torch.randn(100_000, generator=torch.Generator().manual_seed(3))
    for density in (0.1, 0.01, 0.001):
        c = make_compressor("dgc").compress(x, density)
        assert 0 < c.kept <= k_for(x.numel(), density)
