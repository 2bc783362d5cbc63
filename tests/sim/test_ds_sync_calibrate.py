"""Fitting DS-Sync's consensus parameter, reading targets, labels in the report."""

from __future__ import annotations

import math

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from analysis.load import CHOICE_KEYS, policy_label
from sim.errors import InputError
from sim.sync import consensus_distance
from sim.sync.calibrate import fit_kappa, iterations_to, predicted_slowdown


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


@settings(max_examples=40, deadline=None)
@given(st.floats(0.0, 20.0), st.sampled_from([(4, 2, 1), (8, 2, 4), (12, 3, 2)]))
def test_fit_recovers_kappa_from_exact_slowdowns(kappa: float, shape: tuple[int, int, int]) -> None:
    n, g, k = shape
    cases = [(n, g, k, predicted_slowdown(n, g, k, kappa)), (n, g, k + 3,
             predicted_slowdown(n, g, k + 3, kappa))]
    got, rms = fit_kappa(cases)
    assert got == pytest.approx(kappa, rel=1e-3, abs=1e-4)
    assert rms < 1e-3


def test_fit_never_goes_negative_and_needs_a_group() -> None:
    kappa, _ = fit_kappa([(4, 2, 1, 0.9), (4, 2, 1, 0.95)])
    assert kappa == 0.0
    with pytest.raises(InputError):
        fit_kappa([(4, 4, 1, 2.0), (4, 1, 1, 1.0)])
    assert math.isinf(predicted_slowdown(4, 4, 1, 1.0))
    assert predicted_slowdown(4, 1, 1, 3.0) == 1.0
    assert predicted_slowdown(4, 2, 1, 2.0) == pytest.approx(1 + 2 * consensus_distance(4, 2, 1))


def test_report_labels_name_ds_sync_and_keep_plain_labels() -> None:
    assert {"sync", "groups", "shuffle_every"} <= set(CHOICE_KEYS)
    plain = {"policy": "fixed", "policy_params": {"density": 0.01}}
    assert policy_label(plain) == "fixed density=0.01"
    ds = {**plain, "sync": "ds-sync", "groups": 4, "shuffle_every": 8}
    assert policy_label(ds) == "fixed density=0.01 ds-sync:g=4,k=8"
