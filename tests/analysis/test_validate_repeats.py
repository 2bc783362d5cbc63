"""Combining repeated calibration fits (analysis.validate_repeats)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from analysis.validate import Calibration
from analysis.validate_repeats import NUMERIC_FIELDS, median_calibration, spread_order
from sim.errors import InputError


def _cal(scale: float, lat: float, name: str) -> Calibration:
    return Calibration(compute_scale=scale, extra_latency_s=lat, fitted_on=name,
                       compress_scale=2 * scale, agreement_s=abs(lat), rank_wait_s=scale / 10)


def test_one_slow_repeat_does_not_move_the_median() -> None:
    fast = [_cal(1.00, 1e-4, "a"), _cal(1.02, 2e-4, "b")]
    slow = _cal(1.40, 9e-3, "slow")
    m = median_calibration([fast[0], slow, fast[1]])
    assert m.compute_scale == 1.02
    assert m.extra_latency_s == 2e-4
    assert m.compress_scale == 2.04
    assert m.fitted_on == "a | slow | b"
    assert median_calibration(fast, name="x").compute_scale == pytest.approx(1.01)
    assert median_calibration(fast, name="x").fitted_on == "x"


def test_every_numeric_field_is_combined() -> None:
    assert set(NUMERIC_FIELDS) == {"compute_scale", "extra_latency_s", "compress_scale",
                                   "overhead_s", "agreement_s", "rank_wait_s"}
    one = _cal(1.3, -2e-4, "only")
    assert median_calibration([one]) == one


def test_no_calibration_is_an_input_error() -> None:
    with pytest.raises(InputError):
        median_calibration([])


def test_spread_order_nine_and_six() -> None:
    cal = [f"c{i}" for i in range(9)]
    val = [f"v{j}" for j in range(6)]
    order = spread_order(cal, val)
    assert order[0] == "c0" and order[-1] == "c8"
    # the calibration repeats (3 runs each) straddle the validated runs
    assert order.index("c3") > order.index("v0") and order.index("c5") < order.index("v5")


@given(st.integers(0, 12), st.integers(0, 12))
def test_spread_order_keeps_both_orders(nc: int, nv: int) -> None:
    cal = [("c", i) for i in range(nc)]
    val = [("v", j) for j in range(nv)]
    order = spread_order(cal, val)
    assert [x for x in order if x[0] == "c"] == cal
    assert [x for x in order if x[0] == "v"] == val
    # every item sits within half a place of the middle of its equal share
    for pos, (kind, i) in enumerate(order):
        n_self = nc if kind == "c" else nv
        assert abs(pos + 0.5 - (i + 0.5) * len(order) / n_self) <= 0.5 + 1e-9
