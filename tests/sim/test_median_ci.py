"""The order-statistic interval of a median: textbook ranks, coverage, bad input."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.errors import InputError
from sim.median_ci import median_ci, median_ci_ranks


def _cdf(k: int, n: int) -> float:
    return sum(math.comb(n, i) for i in range(k + 1)) / 2**n


def test_textbook_ranks_for_a_hundred_draws() -> None:
    low, high, coverage = median_ci_ranks(100)
    assert (low, high) == (40, 61)
    assert coverage == pytest.approx(1 - 2 * _cdf(39, 100))


def test_too_few_draws_give_the_whole_range_and_say_its_coverage() -> None:
    assert median_ci_ranks(5) == (1, 5, pytest.approx(1 - 2 / 2**5))
    assert median_ci([3.0, 1.0, 2.0]) == (1.0, 3.0)


@given(st.integers(6, 300), st.sampled_from([0.8, 0.9, 0.95, 0.99]))
def test_the_ranks_are_the_narrowest_symmetric_pair_at_the_level(n: int, level: float) -> None:
    low, high, coverage = median_ci_ranks(n, level)
    assert 1 <= low <= high <= n and low + high == n + 1
    assert coverage == pytest.approx(1 - 2 * _cdf(low - 1, n))
    if coverage < level:  # only when even the extremes fall short
        assert low == 1
    else:
        narrower = 1 - 2 * _cdf(low, n)
        assert low == (n + 1) // 2 or narrower < level


@given(st.lists(st.floats(0.0, 1e3), min_size=1, max_size=200))
def test_the_interval_holds_the_sample_median(xs: list[float]) -> None:
    low, high = median_ci(xs)
    ys = sorted(xs)
    mid = (ys[(len(ys) - 1) // 2] + ys[len(ys) // 2]) / 2
    assert low <= mid <= high


def test_coverage_of_a_skewed_distribution_is_near_the_level() -> None:
    rng = random.Random(0)
    true_median = math.log(2.0)  # exponential with rate 1
    hits = 0
    for _ in range(2000):
        low, high = median_ci([rng.expovariate(1.0) for _ in range(60)])
        hits += low <= true_median <= high
    assert 0.94 <= hits / 2000 <= 0.985


@pytest.mark.parametrize("values", [[], [1.0, math.nan]])
def test_bad_input_is_an_input_error(values: list[float]) -> None:
    with pytest.raises(InputError):
        median_ci(values)
    with pytest.raises(InputError):
        median_ci_ranks(10, 1.5)


@pytest.mark.parametrize("n", range(1, 60))
def test_the_ranks_are_the_brute_force_choice_at_any_level_and_size(n: int) -> None:
    """For every size from 1 and levels from 1% to 99.9%: the largest rank ``l`` up to the
    middle whose interval ``(l, n + 1 - l)`` covers the median with at least the level, or the
    extremes where none does (the search's loop bound and its small-``n`` edges included)."""
    for level in (0.01, 0.1, 0.3, 0.5, 0.8, 0.9, 0.95, 0.99, 0.999):
        ok = [low for low in range(1, (n + 1) // 2 + 1)
              if 1 - 2 * _cdf(low - 1, n) >= level - 1e-12]
        low = max(ok) if ok else 1
        got = median_ci_ranks(n, level)
        assert got[:2] == (low, n + 1 - low)
        assert got[2] == pytest.approx(1 - 2 * _cdf(low - 1, n), rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("level", [0.0, 1.0, -0.5, math.nan])
def test_a_level_outside_the_open_unit_interval_is_an_input_error(level: float) -> None:
    with pytest.raises(InputError, match="confidence level"):
        median_ci_ranks(10, level)
