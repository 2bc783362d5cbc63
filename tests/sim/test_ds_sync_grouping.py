"""DS-Sync grouping and consensus model: partition, determinism, locality, identities."""

from __future__ import annotations

import math

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given, settings

from sim.errors import InputError
from sim.sync import (
    ConsensusParams,
    check_sync,
    consensus_distance,
    epoch_of,
    group_of,
    groups_at,
    load_consensus,
    sync_efficiency,
)


@st.composite
def _shapes(draw: st.DrawFn) -> tuple[int, int, int, int, int]:
    m = draw(st.integers(1, 6))
    g = draw(st.integers(1, 6))
    k = draw(st.integers(1, 5))
    step = draw(st.integers(0, 50))
    seed = draw(st.integers(0, 2**31))
    return m * g, g, k, step, seed


@settings(max_examples=80, deadline=None)
@given(_shapes())
def test_groups_partition_the_ranks(shape: tuple[int, int, int, int, int]) -> None:
    n, g, k, step, seed = shape
    groups = groups_at(step, n, g, k, seed)
    assert len(groups) == g
    assert all(len(grp) == n // g for grp in groups)
    assert sorted(r for grp in groups for r in grp) == list(range(n))
    assert all(list(grp) == sorted(grp) for grp in groups)
    assert [grp[0] for grp in groups] == sorted(grp[0] for grp in groups)


@settings(max_examples=60, deadline=None)
@given(_shapes())
def test_grouping_is_a_pure_function_of_seed_and_epoch(
    shape: tuple[int, int, int, int, int],
) -> None:
    n, g, k, step, seed = shape
    a = groups_at(step, n, g, k, seed)
    # Every "rank" computing it on its own gets the same answer.
    assert all(groups_at(step, n, g, k, seed) == a for _ in range(3))
    # Fixed within an epoch.
    first = epoch_of(step, k) * k
    assert groups_at(first, n, g, k, seed) == a
    assert groups_at(first + k - 1, n, g, k, seed) == a


def test_grouping_changes_between_epochs_and_seeds() -> None:
    seen = {groups_at(s, 16, 4, 1, 7) for s in range(20)}
    assert len(seen) > 10
    assert groups_at(0, 16, 4, 1, 7) != groups_at(0, 16, 4, 1, 8)


def test_one_group_is_every_rank_in_order() -> None:
    assert groups_at(5, 6, 1, 3, 11) == ((0, 1, 2, 3, 4, 5),)


def test_group_of() -> None:
    groups = groups_at(3, 8, 2, 1, 0)
    for r in range(8):
        assert r in group_of(r, groups)
    with pytest.raises(InputError):
        group_of(9, groups)


def _domains(nodes: int, gpus: int, nodes_per_rack: int) -> np.ndarray:
    node = np.arange(nodes * gpus) // gpus
    rack = node // nodes_per_rack
    return np.stack([np.zeros_like(node), rack, node], axis=1)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31), st.integers(0, 30))
def test_locality_groups_span_few_nodes(seed: int, step: int) -> None:
    # 4 nodes x 8 ranks, groups of 4: a group lies in one node, or straddles two.
    dom = _domains(4, 8, 2)
    groups = groups_at(step, 32, 8, 1, seed, domains=dom)
    assert sorted(r for grp in groups for r in grp) == list(range(32))
    for grp in groups:
        assert len({int(dom[r, 2]) for r in grp}) <= 2
    straddling = sum(len({int(dom[r, 2]) for r in grp}) > 1 for grp in groups)
    assert straddling <= 4  # at most one group per node boundary in the cyclic order


def test_locality_groups_still_mix_across_nodes() -> None:
    dom = _domains(4, 8, 2)
    crossed = set()
    for step in range(200):
        for grp in groups_at(step, 32, 8, 1, 3, domains=dom):
            nodes = sorted({int(dom[r, 2]) for r in grp})
            if len(nodes) == 2:
                crossed.add(tuple(nodes))
    assert len(crossed) == 6  # every pair of nodes shares a group at some point


@pytest.mark.parametrize(
    ("sync", "n", "g", "k", "msg"),
    [
        ("ds-sync", 8, 3, 1, "must divide"),
        ("ds-sync", 8, 0, 1, "groups must be"),
        ("ds-sync", 8, 2, 0, "shuffle_every must be"),
        ("allreduce", 8, 2, 1, "needs sync ds-sync"),
        ("gossip", 8, 2, 1, "sync must be"),
    ],
)
def test_check_sync_rejects(sync: str, n: int, g: int, k: int, msg: str) -> None:
    with pytest.raises(InputError, match=msg):
        check_sync(sync, n, g, k)


def test_consensus_distance_identities() -> None:
    assert consensus_distance(8, 1, 1) == 0.0
    assert consensus_distance(8, 1, 50) == 0.0
    assert math.isinf(consensus_distance(8, 8, 1))
    # n = 4, g = 2, k = 1: c = 1/3, a = 1/4, V1 = (1/3)(3/4)/(2/3) = 3/8.
    assert consensus_distance(4, 2, 1) == pytest.approx(0.375)
    p = ConsensusParams(kappa=2.0, curvature=0.0, lr=1.0)
    assert sync_efficiency(8, 1, 4, ConsensusParams(5.0, 3.0, 1.0)) == 1.0
    assert sync_efficiency(8, 8, 1, ConsensusParams(5.0, 3.0, 1.0)) == 0.0
    assert sync_efficiency(4, 2, 1, p) == pytest.approx(1 / (1 + 0.75))
    # 1 + kappa lr^2 D: halving the learning rate quarters the cost when h = 0.
    assert sync_efficiency(4, 2, 1, p, lr=0.5) == pytest.approx(1 / (1 + 0.75 / 4))


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 8), st.integers(2, 8), st.integers(1, 20))
def test_consensus_distance_grows_with_groups_and_period(m: int, g: int, k: int) -> None:
    n = m * g
    d = consensus_distance(n, g, k)
    assert 0 < d < math.inf
    assert consensus_distance(n, g, k + 1) > d  # shuffling less often costs more
    if m % 2 == 0 and m > 2:
        assert consensus_distance(n, 2 * g, k) > d  # smaller groups cost more


def test_monte_carlo_matches_the_consensus_model() -> None:
    # Simulate the model's process (local noise, group averaging, uniform reshuffles) and
    # compare its mean consensus distance with the closed form.
    n, g, k = 12, 3, 3
    rng = np.random.default_rng(0)
    x = np.zeros(n)
    vals = []
    for t in range(6000):
        x = x + rng.standard_normal(n)
        for grp in groups_at(t, n, g, k, 5):
            idx = list(grp)
            x[idx] = x[idx].mean()
        if t > 200:
            vals.append(float(np.mean((x - x.mean()) ** 2)))
    assert np.mean(vals) == pytest.approx(consensus_distance(n, g, k), rel=0.08)


def test_kappa_table_has_a_default() -> None:
    params, entry = load_consensus("no-such-workload")
    assert params.kappa >= 0 and params.curvature >= 0 and params.lr > 0
    assert "no-such-workload" in entry["note"]
