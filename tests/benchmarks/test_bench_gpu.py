"""The GPU checks' ``mpc`` part asks for a controller that exists on its workload (no runs made):
its settings parse as ``compctl real --param`` parses them, and the policy builds and binds to
the workload's progress model, the named calibration included."""

from __future__ import annotations

from bench_scripts import load_script

from sim.control.policies.mpc import MpcPolicy
from sim.control.progress import ProgressModel
from sim.control.world import make_controller


def test_controller_settings_build_an_mpc_for_their_workload() -> None:
    mod = load_script("bench_gpu", with_dir=True)
    params = mod.CONTROLLER_PARAMS
    assert params["calibration"] == "real2" and params["two_phase"] is False
    assert params["replan_drop"] == 3 and params["window_steps"] == 30
    ctl = make_controller("mpc", params, seed=1, workload=mod.CONTROLLER_WORKLOAD)
    assert isinstance(ctl, MpcPolicy)
    # The calibration named is bundled for this workload's trace (it is not for digits-cnn),
    # so the controller plans under it, not under the model that scores simulated runs.
    assert ctl.progress_model.workload == "digits-mlp"
    assert ctl.progress_model is not ProgressModel.for_workload("digits-mlp")


def test_workloads_pick_the_runs_and_an_unknown_one_is_refused(tmp_path, monkeypatch) -> None:
    import sys

    import pytest

    mod = load_script("bench_gpu", with_dir=True)
    made: list[str] = []
    monkeypatch.setattr(mod, "_launch_row",
                        lambda cfg, path, row, rows, on_row: made.append(cfg.workload))
    mod.real_runs(tmp_path, "cpu", 2, 2, [], workloads=("resnet50",))
    assert made and set(made) == {"resnet50"}
    made.clear()
    mod.real_runs(tmp_path, "cpu", 2, 2, [])
    assert set(made) == {"digits-cnn", "resnet50"}
    monkeypatch.setattr(sys, "argv", ["bench_gpu.py", "--workloads", "resnet50,vgg"])
    with pytest.raises(SystemExit) as exc:
        mod.main()
    assert exc.value.code == 2
