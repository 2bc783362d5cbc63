"""The drop rule on a flat gradient (shared by real runs): bound, priorities, determinism."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.lossy.drop import drop_mask, packet_priorities


@settings(max_examples=80, deadline=None)
@given(
    n=st.integers(0, 300),
    loss=st.floats(0.0, 0.9),
    bound=st.floats(0.0, 0.9),
    deadline_frac=st.floats(0.0, 1.0),
    seed=st.integers(0, 2**32 - 1),
)
def test_never_below_the_bound(
    n: int, loss: float, bound: float, deadline_frac: float, seed: int
) -> None:
    prio = np.random.default_rng(seed).random(n)
    out = drop_mask(prio, loss, bound, np.random.default_rng(seed), deadline_frac=deadline_frac)
    missing = int((~out.delivered).sum())
    assert missing <= int(np.floor(bound * n + 1e-9))
    assert missing == out.lost_random + out.dropped_deadline
    assert out.delivered_frac >= 1 - bound - 1e-12


def test_no_loss_no_deadline_touches_nothing() -> None:
    out = drop_mask(np.arange(50.0), 0.0, 0.2, np.random.default_rng(0))
    assert out.delivered.all() and out.repaired == 0


def test_repairs_the_highest_priority_and_drops_the_lowest() -> None:
    prio = np.arange(100.0)  # packet i has priority i
    out = drop_mask(prio, 0.5, 0.05, np.random.default_rng(3))
    kept_lost = np.flatnonzero(~out.delivered)
    assert len(kept_lost) == 5 and out.repaired > 0
    # Every repaired packet outranks every packet left missing.
    lost_first = np.random.default_rng(3).random(100) < 0.5
    repaired = np.flatnonzero(lost_first & out.delivered)
    assert repaired.min() > kept_lost.max()
    cut = drop_mask(prio, 0.0, 0.1, np.random.default_rng(0), deadline_frac=0.5)
    assert np.array_equal(np.flatnonzero(~cut.delivered), np.arange(10))


def test_priorities_weigh_magnitude_and_front_layers() -> None:
    vals = np.concatenate([np.full(10, 1.0), np.full(10, 1.0), np.full(10, 3.0)])
    layers = np.array([0] * 10 + [1] * 20)
    p = packet_priorities(vals, layers, 2, 10)
    assert p[0] > p[1]  # same magnitude, front layer first
    assert p[2] > p[0]  # larger entries first
    assert len(packet_priorities(np.zeros(0), np.zeros(0, dtype=int), 1, 10)) == 0
