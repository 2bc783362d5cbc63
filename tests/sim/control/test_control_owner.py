"""AR-Topk index owner: STAR round robin and VAR largest smoothed norm."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.control.owner import VarOwner, make_owner_rule, star_owner


@given(st.integers(1, 512), st.integers(0, 10_000))
def test_star_visits_every_rank_once_per_round(n: int, start: int) -> None:
    owners = [star_owner(start + k, n) for k in range(n)]
    assert sorted(owners) == list(range(n))


def test_var_picks_largest_smoothed_norm() -> None:
    v = VarOwner(4, weight=0.5)
    assert v.owner(2) == 2  # round robin before any norm
    v.update([1.0, 5.0, 2.0, 0.0])
    assert v.owner(0) == 1
    # A single spike on rank 3 does not beat rank 1's history at weight 0.5 ...
    v.update([1.0, 5.0, 2.0, 9.0])
    assert v.owner(0) == 1
    # ... a sustained one does.
    v.update([1.0, 5.0, 2.0, 9.0])
    assert v.owner(0) == 3
    sm = v.smoothed_norms
    assert sm is not None and np.allclose(sm, [1.0, 5.0, 2.0, 6.75])


def test_var_ties_go_to_the_lowest_rank() -> None:
    v = VarOwner(3)
    v.update([2.0, 2.0, 1.0])
    assert v.owner(7) == 0


def test_var_rejects_bad_input() -> None:
    v = VarOwner(3)
    with pytest.raises(ValueError):
        v.update([1.0, 2.0])
    with pytest.raises(ValueError):
        v.update([1.0, -2.0, 0.0])
    with pytest.raises(ValueError):
        VarOwner(0)
    with pytest.raises(ValueError):
        star_owner(-1, 4)


def test_make_owner_rule() -> None:
    assert make_owner_rule("star", 4) is None
    assert isinstance(make_owner_rule("var", 4), VarOwner)
    with pytest.raises(ValueError, match="unknown owner rule"):
        make_owner_rule("random", 4)
