"""The controllers' progress model is a view of the convergence model that scores runs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.control.progress import (
    ProgressModel,
    ProgressState,
    UsesProgressModel,
    default_progress_model,
)
from sim.convergence import ConvergenceModel
from sim.convergence.progress import progress_scalar
from sim.errors import InputError

GRID = [1.0, 0.3, 0.1, 0.03, 0.01, 0.003, 0.001, 0.0002]


@pytest.mark.parametrize("workload", ["digits-mlp", "char-lstm"])
def test_gain_is_the_trace_gain_of_the_scoring_model(workload: str) -> None:
    pm = ProgressModel.for_workload(workload)
    cm = ConvergenceModel.bundled(workload)
    sched = [GRID[(t // 7) % len(GRID)] for t in range(300)]
    want = cm.gain_schedule(sched, "topk")[1:]
    got = [pm.gain("topk", d, t + 1) for t, d in enumerate(sched)]
    assert got == want.tolist()


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from(GRID), min_size=1, max_size=120))
def test_advance_reproduces_the_scoring_recursion_exactly(sched: list[float]) -> None:
    pm = ProgressModel.for_workload("char-lstm")
    par = pm.model.params
    gains = pm.model.gain_schedule(sched, "topk")
    want = progress_scalar(gains, par.lam, par.mu, par.alpha, par.phase, par.knee)[1:]
    state = ProgressState()
    got = []
    for t, d in enumerate(sched):
        state = pm.advance(state, pm.gain("topk", d, t + 1))
        got.append(state.progress)
    assert got == want.tolist()


def test_profiles_borrow_the_trace_the_scoring_uses() -> None:
    assert ProgressModel.for_workload("resnet50").workload == "digits-cnn"
    assert ProgressModel.for_workload("gpt2-small").workload == "char-lstm"
    assert default_progress_model().workload == "digits-mlp"


def test_uncaptured_compressors_borrow_a_captured_one() -> None:
    pm = default_progress_model()
    assert pm.gain("none", 1.0, 5) == 1.0
    assert pm.gain("qsgd", 1.0, 5) == 1.0
    assert pm.gain("dgc", 0.01, 5) == pm.gain("topk", 0.01, 5)
    assert pm.gain("randomk", 0.01, 5) != pm.gain("topk", 0.01, 5)


def test_efficiency_is_monotone_and_at_most_one() -> None:
    pm = ProgressModel.for_workload("char-lstm")
    effs = [pm.efficiency(g) for g in np.logspace(-4, 0, 30)]
    assert all(a <= b for a, b in zip(effs, effs[1:], strict=False))
    assert effs[-1] == pytest.approx(1.0)


@pytest.mark.parametrize("density", [0.0, -0.1, 1.5, math.nan])
def test_bad_density(density: float) -> None:
    with pytest.raises(InputError):
        default_progress_model().gain("topk", density, 1)


@pytest.mark.parametrize("gain", [0.0, -1.0, math.nan])
def test_bad_gain(gain: float) -> None:
    with pytest.raises(InputError):
        default_progress_model().efficiency(gain)


def test_binding_survives_and_defaults() -> None:
    holder = UsesProgressModel()
    assert holder.progress_model is default_progress_model()
    lstm = ProgressModel.for_workload("char-lstm")
    holder.bind_progress(lstm)
    assert holder.progress_model is lstm
