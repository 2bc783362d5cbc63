"""Delivered fraction -> convergence: lost entries cost gain like compression does."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.convergence import ConvergenceModel
from sim.convergence.loss import loss_gains
from sim.errors import InputError
from sim.runner import SimConfig, run_simulation


@pytest.fixture(scope="module")
def model() -> ConvergenceModel:
    return ConvergenceModel.bundled("digits-mlp")


def test_full_delivery_is_gain_one(model: ConvergenceModel) -> None:
    assert np.all(loss_gains(model, [1.0] * 20) == 1.0)


@settings(max_examples=40, deadline=None)
@given(a=st.floats(0.5, 1.0), b=st.floats(0.5, 1.0))
def test_more_delivered_never_less_gain(a: float, b: float) -> None:
    m = ConvergenceModel.bundled("digits-mlp")
    lo, hi = sorted((a, b))
    g_lo = loss_gains(m, [lo] * 30)
    g_hi = loss_gains(m, [hi] * 30)
    assert np.all(g_hi >= g_lo - 1e-12)
    assert np.all(g_lo <= 1.0) and np.all(g_lo > 0)


def test_priority_drop_keeps_more_than_random_loss(model: ConvergenceModel) -> None:
    random = loss_gains(model, [0.95] * 10, [0.0] * 10)
    priority = loss_gains(model, [0.95] * 10, [0.05] * 10)
    assert np.all(priority > random)


def test_bad_fractions(model: ConvergenceModel) -> None:
    with pytest.raises(InputError):
        loss_gains(model, [0.0])
    with pytest.raises(InputError):
        loss_gains(model, [0.9], [0.1, 0.0])


def test_lossy_run_records_delivery_and_progresses_less() -> None:
    base = dict(workload="resnet50", workers=4, trace="const:lat_ms=0.05,bw_gbps=1",
                iterations=200, seed=1)
    dense, _ = run_simulation(SimConfig(**base))  # type: ignore[arg-type]
    lossy, _ = run_simulation(
        SimConfig(**base, packet_loss=0.005, loss_bound=0.01)  # type: ignore[arg-type]
    )
    assert "delivered_frac" in lossy and "delivered_frac" not in dense
    assert (lossy["delivered_frac"] >= 0.99).all()
    assert lossy["progress"].iloc[-1] < dense["progress"].iloc[-1]
    assert (lossy["loss_stat_gain"] <= 1.0).all()


def test_without_feedback_each_step_shrinks_by_the_kept_energy(model: ConvergenceModel) -> None:
    from sim.convergence.loss import progress_with_loss

    gains = np.ones(51)
    dense, _ = progress_with_loss(model, gains, [1.0] * 50, feedback=False)
    gone, eff = progress_with_loss(model, gains, [0.9] * 50, feedback=False)
    kept, _ = progress_with_loss(model, gains, [0.9] * 50, feedback=True)
    g = loss_gains(model, [0.9] * 50)
    np.testing.assert_allclose(np.diff(gone), np.diff(dense) * g)
    assert np.all(eff[1:] == g)
    assert gone[-1] < dense[-1] and kept[-1] <= dense[-1]


def test_feedback_flag_reaches_the_records() -> None:
    base = dict(workload="resnet50", workers=4, trace="const:lat_ms=0.05,bw_gbps=1",
                iterations=100, seed=1, packet_loss=0.008, loss_bound=0.01)
    gone, _ = run_simulation(SimConfig(**base))  # type: ignore[arg-type]
    kept, _ = run_simulation(SimConfig(**base, loss_feedback=True))  # type: ignore[arg-type]
    assert not np.array_equal(gone["progress"], kept["progress"])
    with pytest.raises(InputError):
        SimConfig(workload="resnet50", workers=4, trace="const:lat_ms=1,bw_gbps=1",
                  loss_feedback=True)
