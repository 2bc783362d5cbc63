"""Fitting DS-Sync's consensus parameters, reading targets, labels in the report."""

from __future__ import annotations

import math

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from analysis.load import CHOICE_KEYS, policy_label
from sim.errors import InputError
from sim.sync import ConsensusParams, consensus_distance
from sim.sync.calibrate import (
    SlowdownCase,
    fit_consensus,
    iterations_to,
    predicted_slowdown,
    slowdown_cases,
)


def test_iterations_to_interpolates_and_handles_misses() -> None:
    steps = [10, 20, 30]
    assert iterations_to(steps, [2.0, 1.0, 0.5], 1.5) == pytest.approx(15.0)
    assert iterations_to(steps, [2.0, 1.0, 0.5], 3.0) == 10.0
    assert iterations_to(steps, [2.0, 1.0, 0.5], 0.1) is None
    assert iterations_to(steps, [0.2, 0.6, 0.95], 0.9, "accuracy") == pytest.approx(
        20 + 10 * (0.3 / 0.35)
    )
    with pytest.raises(InputError):
        iterations_to(steps, [1.0], 0.5)
    with pytest.raises(InputError):
        iterations_to(steps, [1.0, 1.0, 1.0], 0.5, "perplexity")


def _case(n: int, g: int, k: int, lr: float, slowdown: float) -> SlowdownCase:
    return SlowdownCase(n, g, k, lr, 0, "loss<=1", 100.0, 100.0 * slowdown)


@settings(max_examples=15, deadline=None)
@given(st.floats(0.5, 20.0), st.floats(0.2, 2.0), st.sampled_from([(4, 2), (8, 2), (12, 3)]))
def test_fit_recovers_both_parameters_from_exact_slowdowns(
    kappa: float, h: float, shape: tuple[int, int]
) -> None:
    n, g = shape
    truth = ConsensusParams(kappa, h, 0.05)
    cells = [(1, 0.05), (64, 0.05), (1, 0.4), (16, 0.4), (256, 0.4)]
    cases = [_case(n, g, k, lr, truth.slowdown(n, g, k, lr)) for k, lr in cells]
    got, rms = fit_consensus(cases, 0.05)
    assert rms < 1e-3
    for k, lr in cells:  # the predictions, not necessarily the parameters, are identified
        assert got.slowdown(n, g, k, lr) == pytest.approx(truth.slowdown(n, g, k, lr), rel=1e-4)


@settings(max_examples=20, deadline=None)
@given(st.floats(0.0, 20.0), st.sampled_from([(4, 2, 1), (8, 2, 4), (12, 3, 2)]))
def test_one_parameter_fit_recovers_kappa(kappa: float, shape: tuple[int, int, int]) -> None:
    n, g, k = shape
    truth = ConsensusParams(kappa, 0.0, 1.0)
    cases = [_case(n, g, kk, 1.0, truth.slowdown(n, g, kk)) for kk in (k, k + 3)]
    got, rms = fit_consensus(cases, 1.0, curvature=0.0)
    assert got.curvature == 0.0
    assert got.kappa == pytest.approx(kappa, rel=1e-3, abs=1e-4)
    assert rms < 1e-3


def test_fit_never_goes_negative_and_needs_a_group() -> None:
    got, _ = fit_consensus([_case(4, 2, 1, 0.1, 0.9), _case(4, 2, 1, 0.1, 0.95)], 0.1)
    assert got.kappa == 0.0
    with pytest.raises(InputError):
        fit_consensus([_case(4, 4, 1, 0.1, 2.0), _case(4, 1, 1, 0.1, 1.0)], 0.1)
    p = ConsensusParams(2.0, 0.0, 1.0)
    assert math.isinf(predicted_slowdown(4, 4, 1, p))
    assert predicted_slowdown(4, 1, 1, ConsensusParams(3.0, 1.0, 1.0)) == 1.0
    assert predicted_slowdown(4, 2, 1, p) == pytest.approx(1 + 2 * consensus_distance(4, 2, 1))


def test_slowdown_cases_pair_each_run_with_its_seeds_dense_run() -> None:
    dense = {"sync": [], "seed": 0, "eval_steps": [10, 20, 30], "eval_loss": [2.0, 1.0, 0.5],
             "eval_accuracy": [0.5, 0.8, 0.9]}
    ds = {"sync": ["--sync", "ds-sync", "--groups", "2", "--shuffle-every", "8"], "seed": 0,
          "eval_steps": [10, 20, 30], "eval_loss": [2.0, 1.5, 1.0],
          "eval_accuracy": [0.5, 0.6, 0.7]}
    orphan = dict(ds, seed=1)  # no dense run of seed 1: not a case
    cases = slowdown_cases([ds, dense, orphan], 4, 2, 0.05, [("loss", 1.0), ("accuracy", 0.9)])
    assert cases == [SlowdownCase(4, 2, 8, 0.05, 0, "loss<=1", 20.0, 30.0)]
    assert cases[0].slowdown == pytest.approx(1.5)


def test_report_labels_name_ds_sync_and_keep_plain_labels() -> None:
    assert {"sync", "groups", "shuffle_every"} <= set(CHOICE_KEYS)
    plain = {"policy": "fixed", "policy_params": {"density": 0.01}}
    assert policy_label(plain) == "fixed density=0.01"
    ds = {**plain, "sync": "ds-sync", "groups": 4, "shuffle_every": 8}
    assert policy_label(ds) == "fixed density=0.01 ds-sync:g=4,k=8"
