"""The agreement metrics a validation reports (its headline is the per-iteration MAPE): closed
forms by hand, which rows they leave out, and :func:`analysis.validate.compare` on aligned
records."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.validate import Calibration, _corr, compare, mape, mdape
from sim.errors import InputError


def test_mape_and_mdape_by_hand() -> None:
    real = np.array([100.0, 200.0, 400.0])
    pred = np.array([110.0, 180.0, 800.0])
    assert mape(real, pred) == pytest.approx((0.1 + 0.1 + 1.0) / 3)
    assert mdape(real, pred) == pytest.approx(0.1)
    assert mape(real, real) == mdape(real, real) == 0.0


def test_rows_without_a_positive_finite_real_value_are_left_out() -> None:
    real = np.array([0.0, 100.0, math.nan, -5.0, 200.0])
    pred = np.array([5.0, 150.0, 1.0, 1.0, math.inf])
    assert mape(real, pred) == pytest.approx(0.5)
    assert mdape(real, pred) == pytest.approx(0.5)
    assert math.isnan(mape(np.array([0.0]), np.array([1.0])))
    assert math.isnan(mdape(np.array([math.nan]), np.array([1.0])))


def test_correlation_needs_three_points_that_vary() -> None:
    a = np.array([1.0, 2.0, 3.0, math.nan])
    assert _corr(a, 2 * a + 1) == pytest.approx(1.0)
    assert _corr(a, -a) == pytest.approx(-1.0)
    assert math.isnan(_corr(a[:2], a[:2]))
    assert math.isnan(_corr(a, np.array([5.0, 5.0, 5.0, 1.0])))
    assert math.isnan(_corr(np.array([5.0, 5.0, 5.0]), np.array([1.0, 2.0, 3.0])))


def _records(iter_s: list[float], comm_s: list[float]) -> pd.DataFrame:
    return pd.DataFrame({"iteration": range(len(iter_s)), "iter_s": iter_s, "comm_s": comm_s})


def test_compare_skips_the_first_iterations_and_aligns_by_iteration() -> None:
    real = _records([9.0, 9.0, 9.0, 1.0, 2.0, 4.0], [9.0, 9.0, 9.0, 0.5, 1.0, 2.0])
    sim = _records([0.0, 0.0, 0.0, 1.1, 1.8, 4.0], [0.0, 0.0, 0.0, 0.5, 1.0, 3.0])
    got = compare(real, sim)  # the first three iterations (start-up) are not compared
    assert got.n == 3
    assert got.mape_iter == pytest.approx((0.1 + 0.1 + 0.0) / 3)
    assert got.mdape_comm == pytest.approx(0.0)
    assert got.real_mean_iter_s == pytest.approx(7.0 / 3)
    assert got.sim_mean_comm_s == pytest.approx(1.5)
    assert compare(real, sim, skip=0).n == 6
    # Only common iterations count: the simulated run's iteration 5 is missing here.
    assert compare(real, sim.iloc[:5], skip=3).n == 2
    with pytest.raises(InputError, match="no common iterations after skipping the first 6"):
        compare(real, sim, skip=6)


@pytest.mark.parametrize("field", ["compute_scale", "compress_scale", "overhead_s",
                                   "agreement_s", "rank_wait_s"])
def test_a_calibration_takes_zero_but_not_a_negative_or_infinite_value(
        tmp_path: Path, field: str) -> None:
    """Zero is a value a fit gives (a compression cost below the noise clamps at 0); below zero
    or not finite, the file is refused. ``extra_latency_s`` may be negative, not infinite."""
    base = {"compute_scale": 1.0, "extra_latency_s": -1e-5}
    p = tmp_path / "cal.json"
    p.write_text(json.dumps({**base, field: 0.0}))
    assert getattr(Calibration.load(p), field) == 0.0
    for bad in (-0.5, "Infinity", "NaN"):
        p.write_text(json.dumps(base)[:-1] + f', "{field}": {bad}}}')
        with pytest.raises(InputError, match="out of range"):
            Calibration.load(p)
    p.write_text('{"compute_scale": 1.0, "extra_latency_s": Infinity}')
    with pytest.raises(InputError, match="out of range"):
        Calibration.load(p)
