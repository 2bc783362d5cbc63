"""An alternative calibration of a workload's convergence model, and ``mpc`` planning with it."""

from __future__ import annotations

import pytest

from sim.control.progress import ProgressModel, check_calibration_name
from sim.control.registry import make_policy
from sim.convergence import ConvergenceModel
from sim.convergence.params import ConvergenceParams
from sim.errors import InputError


def test_real2_is_bundled_for_digits_mlp_with_the_same_trace() -> None:
    base = ProgressModel.for_workload("digits-mlp")
    variant = base.recalibrated("real2")
    assert variant is base.recalibrated("real2")  # cached
    assert variant.model.trace is base.model.trace
    assert variant.model.params != base.model.params
    # Gains come from the trace: the same under either calibration.
    assert variant.gain("topk", 0.003, 120) == base.gain("topk", 0.003, 120)


def test_real2_predicts_that_a_flush_after_a_long_hold_recovers_less() -> None:
    # The fixed-density calibration says a burst of 0.1 after 150 iterations at 0.001 catches
    # up with the dense run; the real runs it was fitted on do not (docs/convergence.md).
    hold = [1.0] + [0.001] * 150 + [0.1] * 250
    base = ConvergenceModel.bundled("digits-mlp")
    real2 = ProgressModel.for_workload("digits-mlp").recalibrated("real2").model
    dense = base.dense_iterations_to(1.0, "loss")
    assert dense is not None
    got_base = base.iterations_to_target(hold, 1.0)
    got_real2 = real2.iterations_to_target(hold, 1.0)
    assert got_base is not None and got_real2 is not None
    assert got_real2 - dense > 2.0 * (got_base - dense)


@pytest.mark.parametrize("name", ["", "../x", "a/b", "a.b", "réal"])
def test_calibration_names_are_plain(name: str) -> None:
    with pytest.raises(InputError, match="calibration name"):
        check_calibration_name(name)


def test_a_missing_calibration_is_an_input_error(tmp_path, monkeypatch) -> None:
    import sim.convergence.model as cm

    monkeypatch.setattr(cm, "PARAMS_DIR", tmp_path)
    with pytest.raises(InputError, match="no convergence calibration 'nope'"):
        ProgressModel.for_workload("digits-mlp").recalibrated("nope")


def test_recalibrated_reads_the_named_file(tmp_path, monkeypatch) -> None:
    import sim.convergence.model as cm

    monkeypatch.setattr(cm, "PARAMS_DIR", tmp_path)
    ConvergenceParams("digits-mlp", "topk", 0.5, 0.25, 0.1, 100.0, 50.0).save(
        tmp_path / "digits-mlp.tmpcal.params.json"
    )
    pm = ProgressModel.for_workload("digits-mlp").recalibrated("tmpcal")
    assert (pm.lam, pm.mu, pm.alpha, pm.model.params.knee) == (0.5, 0.25, 0.1, 50.0)


def test_mpc_plans_with_the_named_calibration_and_fails_early_without_it() -> None:
    base = ProgressModel.for_workload("digits-mlp")
    plain = make_policy("mpc")
    plain.bind_progress(base)
    assert plain.progress_model is base
    tuned = make_policy("mpc", calibration="real2")
    tuned.bind_progress(base)
    assert tuned.progress_model is base.recalibrated("real2")
    missing = make_policy("mpc", calibration="nope")
    with pytest.raises(InputError, match="no convergence calibration"):
        missing.bind_progress(base)
    with pytest.raises(InputError, match="calibration name"):
        make_policy("mpc", calibration="../x")
