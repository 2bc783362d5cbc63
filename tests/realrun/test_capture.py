"""Gradient-trace capture and compressed reference runs: determinism, dense identity, format."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from realrun.capture import (
    RunCurve,
    capture_gradtrace,
    read_runs,
    schedule_from_spec,
    train_schedule,
    write_runs,
)
from sim.entry import main
from sim.errors import InputError
from traces.gradtrace import read_gradtrace, write_gradtrace

KW = dict(steps=10, every=5, world_size=2, compressors=("topk",), densities=(0.1, 0.01))


def test_capture_deterministic_and_valid(tmp_path: Path) -> None:
    a = capture_gradtrace("digits-mlp", seed=3, **KW)  # type: ignore[arg-type]
    b = capture_gradtrace("digits-mlp", seed=3, **KW)  # type: ignore[arg-type]
    c = capture_gradtrace("digits-mlp", seed=4, **KW)  # type: ignore[arg-type]
    for name in ("grad_norm", "kept_sq", "comp_sq", "eval_loss"):
        assert np.array_equal(getattr(a, name), getattr(b, name))
    assert not np.array_equal(a.grad_norm, c.grad_norm)
    assert list(a.steps) == [5, 10]
    assert a.kept_sq.shape == (2, 1, 2, 4)
    gain = a.model_gain("topk")
    assert np.all(gain[:, 0] > gain[:, 1])  # density 0.1 keeps more energy than 0.01
    assert np.all((a.achieved > 0) & (a.achieved <= 0.2))
    path = write_gradtrace(a, tmp_path / "t.npz")
    assert read_gradtrace(path).header == a.header


def test_density_one_reproduces_capture_curve_exactly() -> None:
    tr = capture_gradtrace("digits-mlp", seed=0, eval_every=5, **KW)  # type: ignore[arg-type]
    run = train_schedule("digits-mlp", [1.0] * 10, world_size=2, seed=0, eval_every=5)
    assert run.eval_steps == list(tr.eval_steps)
    assert run.eval_loss == list(tr.eval_loss)
    comp = train_schedule("digits-mlp", [0.01] * 10, world_size=2, seed=0, eval_every=5)
    assert comp.eval_loss[-1] > run.eval_loss[-1]  # compression slows this early phase
    assert 0 < comp.mean_gain < 0.5


def test_schedule_spec_and_runs_roundtrip(tmp_path: Path) -> None:
    assert schedule_from_spec("0.5", 3) == [0.5, 0.5, 0.5]
    assert schedule_from_spec("1:0.1,3:0.01", 4) == [0.1, 0.1, 0.01, 0.01]
    for bad in ("2:0.1", "1:0.1,1:0.2", "x", "1:2.0"):
        with pytest.raises(InputError):
            schedule_from_spec(bad, 4)
    curve = RunCurve("digits-mlp", "topk", 2, 0, [0.1, 0.1, 0.01], [0, 3], [2.3, 2.0], [0.1, 0.5], 0.3)
    write_runs(tmp_path / "r.json", {"topk@x": curve})
    assert read_runs(tmp_path / "r.json")["topk@x"] == curve
    (tmp_path / "bad.json").write_text(json.dumps({"format": "other"}))
    with pytest.raises(InputError):
        read_runs(tmp_path / "bad.json")


def test_cli_capture_and_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "g.npz"
    rc = main(["capture", "--workload", "digits-mlp", "--steps", "10", "--every", "5",
               "--workers", "2", "--compressors", "topk", "--densities", "0.1",
               "--out", str(out), "--json", "--quiet"])
    assert rc == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["samples"] == 2 and out.is_file()
    assert main(["capture", "--workload", "nope", "--steps", "10", "--out", str(tmp_path / "x")]) == 2
    assert "unknown workload" in capsys.readouterr().err
    assert main(["capture", "--workload", "digits-mlp", "--steps", "10", "--compressors", "zip",
                 "--out", str(tmp_path / "y")]) == 2
    assert not (tmp_path / "y.npz").exists()
    assert main(["convergence-predict", "--params", str(tmp_path / "none.json"),
                 "--schedule", "0.1", "--steps", "5"]) == 2


def test_cli_predict_bundled(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["convergence-predict", "--workload", "digits-mlp", "--schedule", "0.001",
               "--steps", "600", "--target", "loss=1.0", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    t = out["targets"][0]
    assert t["predicted_iterations"] > t["dense_iterations"] > 0
    assert main(["convergence-predict", "--workload", "digits-mlp", "--schedule", "0.001",
                 "--steps", "600", "--target", "loss=0.0001"]) == 2
    assert "never reaches" in capsys.readouterr().err
    assert main(["convergence-predict", "--workload", "digits-mlp", "--schedule", "5:0.1",
                 "--steps", "10"]) == 2


def test_bundled_traces_valid() -> None:
    from traces.gradtrace import bundled_gradtrace, bundled_gradtrace_names

    names = bundled_gradtrace_names()
    assert {"digits-mlp", "char-lstm"} <= set(names)
    for name in names:
        tr = bundled_gradtrace(name)
        assert tr.workload == name
        gain = tr.model_gain("topk")
        assert np.all(np.diff(gain, axis=1) <= 1e-12 + 0.05)  # roughly falls with density


PROVENANCE_RTOL_KEPT = 1e-3
PROVENANCE_RTOL_LOSS = 1e-4


def test_bundled_traces_match_the_current_recipe() -> None:
    # Provenance: a bundled trace was captured with the workload's current optimiser, and a
    # fresh short capture with its seed reproduces its first samples.
    from realrun.capture import capture_gradtrace
    from realrun.workloads import get_workload
    from traces.gradtrace import bundled_gradtrace, bundled_gradtrace_names

    for name in bundled_gradtrace_names():
        assert bundled_gradtrace(name).header["lr"] == get_workload(name).lr, name
    tr = bundled_gradtrace("char-lstm")
    h = tr.header
    fresh = capture_gradtrace(
        "char-lstm", steps=20, every=h["every"], world_size=h["world_size"], seed=h["seed"],
        compressors=h["compressors"], densities=h["densities"],
    )
    assert np.array_equal(fresh.steps, tr.steps[:2])
    # Tolerance: training runs in float32, whose kernels sum in a different order on another
    # CPU family (AVX2 vs AVX-512 blocking), and 20 SGD steps amplify those last-bit rounding
    # differences. Measured between the bundle and a capture on an AMD EPYC: at most 2e-5
    # relative on kept energy (its smallest entries) and 1e-7 on eval loss. A different recipe
    # moves them far more (seed + 1: 66x on kept energy, 5% on loss), so 1e-3 and 1e-4 keep a
    # 50x margin on both sides: portable across CPUs, still a provenance check.
    assert np.allclose(fresh.kept_sq, tr.kept_sq[:2], rtol=PROVENANCE_RTOL_KEPT, atol=0.0)
    assert np.allclose(fresh.eval_loss, tr.eval_loss[:3], rtol=PROVENANCE_RTOL_LOSS, atol=0.0)


def test_bundled_seed_repeats_are_labelled() -> None:
    from realrun.capture import read_runs
    from traces.gradtrace import GRADS_DIR

    files = sorted(GRADS_DIR.glob("*.seed*.runs.json"))
    assert files
    for f in files:
        seed = int(f.name.split(".seed")[1].split(".")[0])
        runs = read_runs(f)
        assert "topk@1" in runs, f.name  # its own dense run, the slowdown baseline
        assert all(r.seed == seed for r in runs.values()), f.name
