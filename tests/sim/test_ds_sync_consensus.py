"""DS-Sync's two-parameter consensus model: identities, monotonicity, saturation, and the
bundled parameters reproducing the reported fit from the saved real runs."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given, settings

from sim.errors import InputError
from sim.sync import ConsensusParams, consensus_distance, groups_at, load_consensus
from sim.sync.calibrate import SlowdownCase, fit_consensus, slowdown_cases, summarise
from sim.sync.consensus import CONSENSUS_PARAMS_FILE

ROOT = Path(__file__).resolve().parents[2]

_shapes = st.sampled_from([(4, 2), (8, 2), (8, 4), (12, 3), (16, 4), (32, 8)])


def _saturation(n: int, g: int, x: float) -> float:
    m = n // g
    return (1.0 / m - 1.0 / n) / (1.0 - (1.0 - x) ** 2)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 64), st.floats(0.0, 50.0), st.floats(0.0, 20.0), st.floats(1e-4, 2.0),
       st.sampled_from([1, 2, 4, 8]))
def test_one_group_costs_nothing(k: int, kappa: float, h: float, lr: float, n: int) -> None:
    p = ConsensusParams(kappa, h, 0.05)
    assert p.slowdown(n, 1, k, lr) == 1.0
    assert consensus_distance(n, 1, k, min(1.0, h * lr)) == 0.0


@settings(max_examples=80, deadline=None)
@given(_shapes, st.integers(1, 400), st.floats(0.0, 1.0))
def test_distance_never_falls_as_the_shuffle_period_grows(
    shape: tuple[int, int], k: int, x: float
) -> None:
    n, g = shape
    d = consensus_distance(n, g, k, x)
    assert 0 < d < math.inf
    assert consensus_distance(n, g, k + 1, x) >= d * (1 - 1e-12)
    assert consensus_distance(n, g, 2 * k + 7, x) >= d * (1 - 1e-12)


@settings(max_examples=80, deadline=None)
@given(_shapes, st.integers(1, 300), st.floats(0.01, 10.0), st.floats(0.0, 5.0),
       st.floats(1e-3, 1.0), st.floats(1.01, 4.0))
def test_cost_grows_with_the_learning_rate(
    shape: tuple[int, int], k: int, kappa: float, h: float, lr: float, factor: float
) -> None:
    n, g = shape
    p = ConsensusParams(kappa, h, 0.05)
    assert p.slowdown(n, g, k, lr * factor) > p.slowdown(n, g, k, lr) > 1.0


@settings(max_examples=60, deadline=None)
@given(_shapes, st.floats(0.01, 1.0), st.integers(1, 10_000))
def test_contraction_bounds_the_distance(shape: tuple[int, int], x: float, k: int) -> None:
    n, g = shape
    m = n // g
    sat = _saturation(n, g, x)
    # Every step of an epoch lies between its start V1 <= (n-1)/n / (1-c) + sat and sat.
    c = (n - m) / (m * (n - 1))
    assert consensus_distance(n, g, k, x) <= sat + (n - 1) / n / (1 - c) + 1e-12
    # Grouped for ever, the distance settles at a / (1 - rho), whatever the period.
    far = consensus_distance(n, g, 10**9, x)
    assert far == pytest.approx(sat, rel=1e-6)


@settings(max_examples=60, deadline=None)
@given(_shapes, st.integers(1, 5000), st.floats(0.0, 1e-3))
def test_small_contractions_join_the_one_parameter_model(
    shape: tuple[int, int], k: int, x: float
) -> None:
    n, g = shape
    d0 = consensus_distance(n, g, k)
    d = consensus_distance(n, g, k, x)
    assert d <= d0 * (1 + 1e-9)
    assert d == pytest.approx(d0, rel=max(1e-9, 3 * x * k))


def test_zero_contraction_is_the_one_parameter_formula_and_bad_values_fail() -> None:
    assert consensus_distance(4, 2, 1, 0.0) == pytest.approx(0.375)
    # rho = 0 (x = 1): every step starts afresh at a = 1/m - 1/n.
    assert consensus_distance(4, 2, 37, 1.0) == pytest.approx(0.25)
    for bad in (-0.1, 1.5, math.nan, math.inf):
        with pytest.raises(InputError):
            consensus_distance(4, 2, 1, bad)
    with pytest.raises(InputError):
        ConsensusParams(1.0, -1.0, 0.05)
    with pytest.raises(InputError):
        ConsensusParams(1.0, 1.0, 0.0)
    with pytest.raises(InputError):
        ConsensusParams(1.0, 1.0, 0.05).slowdown(4, 2, 1, lr=-0.1)
    assert ConsensusParams(1.0, 30.0, 0.05).contraction(0.4) == 1.0


@pytest.mark.parametrize("x", [0.05, 0.3])
def test_monte_carlo_matches_the_contracted_model(x: float) -> None:
    # The process the model describes: pull toward the minimum, local noise, group
    # averaging, uniform reshuffles every k steps.
    n, g, k = 12, 3, 6
    rng = np.random.default_rng(1)
    w = np.zeros(n)
    vals = []
    for t in range(12_000):
        w = (1 - x) * w + rng.standard_normal(n)
        for grp in groups_at(t, n, g, k, 3):
            idx = list(grp)
            w[idx] = w[idx].mean()
        if t > 300:
            vals.append(float(np.mean((w - w.mean()) ** 2)))
    assert np.mean(vals) == pytest.approx(consensus_distance(n, g, k, x), rel=0.06)


def _bundled_cases(entry: dict[str, Any]) -> list[SlowdownCase]:
    merged: dict[float, tuple[list[dict[str, Any]], list[tuple[str, float]], int, int]] = {}
    for spec in entry["calibrated_on"]["runs"]:
        doc = json.loads((ROOT / spec["file"]).read_text())
        targets = [(m, float(v)) for m, _, v in
                   (t.partition(":") for t in spec["targets"].split(","))]
        lr = float(spec["lr"])
        runs = merged.setdefault(lr, ([], targets, doc["nproc"], doc["groups"]))[0]
        runs.extend(doc["runs"])
    cases = []
    for lr, (runs, targets, n, g) in merged.items():
        cases += slowdown_cases(runs, n, g, lr, targets)
    return cases


def test_bundled_parameters_reproduce_the_reported_fit() -> None:
    table = json.loads(CONSENSUS_PARAMS_FILE.read_text())
    entry = table["digits-mlp"]
    params, _ = load_consensus("digits-mlp")
    cases = _bundled_cases(entry)
    fit_on = {(float(lr), int(k)) for lr, _, k in
              (c.partition(":") for c in entry["calibrated_on"]["fit_on"])}
    refit, rms = fit_consensus([c for c in cases if (c.lr, c.shuffle_every) in fit_on],
                               params.lr)
    assert refit.kappa == pytest.approx(params.kappa, rel=1e-3)
    assert refit.curvature == pytest.approx(params.curvature, rel=1e-3)
    assert rms == pytest.approx(entry["fit_rms_log_error"], rel=1e-3)
    got = summarise(cases, params)
    assert got.keys() == entry["by_lr_and_period"].keys()
    for cell, want in entry["by_lr_and_period"].items():
        for key, value in want.items():
            assert got[cell][key] == pytest.approx(value, rel=1e-9), (cell, key)
    # The claim the docs make: held out, the learning-rate-0.4 period 16 is predicted within
    # the seeds' own scatter (mean error <= the noise floor + 0.5 points), and both learning
    # rates' held-out cells have a mean error under 8%.
    for cell, row in got.items():
        lr_s, _, k_s = cell.partition(":")
        if (float(lr_s), int(k_s)) not in fit_on:
            assert row["mean_abs_error"] < 0.08
            assert row["mean_abs_error"] <= row["noise_floor_mean_abs_error"] + 0.005
    assert table["default"]["kappa"] == entry["kappa"]
