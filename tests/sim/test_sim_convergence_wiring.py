"""Simulator runs carry the convergence model's progress and predicted loss/accuracy."""

import numpy as np

from sim.runner import SimConfig, run_simulation


def _cfg(**kw):
    base = dict(workload="digits-mlp", workers=4, trace="const:lat_ms=1,bw_gbps=1", iterations=60)
    base.update(kw)
    return SimConfig(**base)


def test_dense_progress_is_one_per_iteration_and_follows_the_dense_curve() -> None:
    rec, meta = run_simulation(_cfg(policy="dense"))
    assert np.allclose(rec["progress"].to_numpy(), np.arange(1, 61))
    assert meta["convergence"]["gradient_trace"] == "digits-mlp"
    assert meta["convergence"]["borrowed"] is False
    # The predicted loss falls along the dense run's curve.
    assert rec["pred_loss"].iloc[-1] < rec["pred_loss"].iloc[0]


def test_compressed_run_progresses_slower_but_monotonically() -> None:
    dense, _ = run_simulation(_cfg(policy="dense"))
    sparse, _ = run_simulation(_cfg(policy="fixed", density=0.001, collective="allgather"))
    p = sparse["progress"].to_numpy()
    assert np.all(np.diff(p) >= 0)
    assert p[-1] < dense["progress"].iloc[-1]


def test_large_profile_borrows_and_says_so() -> None:
    _, meta = run_simulation(_cfg(workload="resnet50", iterations=3, policy="dense"))
    assert meta["convergence"]["borrowed"] is True


def test_convergence_off_adds_no_columns() -> None:
    rec, meta = run_simulation(_cfg(policy="dense", convergence="off"))
    assert "progress" not in rec.columns and "convergence" not in meta


def test_compressor_without_gains_is_skipped_with_a_reason() -> None:
    rec, meta = run_simulation(
        _cfg(policy="fixed", compressor="qsgd", collective="allgather", density=0.01)
    )
    assert "progress" not in rec.columns
    assert "qsgd" in meta["convergence"]["skipped"]
