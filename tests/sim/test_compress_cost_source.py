"""Compression costs follow the workload profile's device, and runs say which source they used."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tomllib

from sim.compress.cost_source import GPU_REFERENCE_PATH, cost_source, gpu_models
from sim.compress.spec import get_spec, spec_names
from sim.errors import InputError
from sim.runner import SimConfig, run_simulation
from sim.workloads import load_profile, profile_names

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
GPU_PROFILES = ("resnet50", "vgg16", "bert-base", "gpt2-small", "lstm-ptb")
CPU_PROFILES = ("tiny", "digits-mlp", "digits-cnn", "char-lstm")


def test_every_bundled_profile_states_its_device() -> None:
    assert sorted(GPU_PROFILES + CPU_PROFILES) == profile_names()
    for name in GPU_PROFILES:
        assert load_profile(name).device == "gpu"
        assert load_profile(name).summary()["device"] == "gpu"
    for name in CPU_PROFILES:
        assert load_profile(name).device == "cpu"


def _write_profile(tmp_path: Path, **extra: Any) -> Path:
    doc = {"name": "p", "forward_s": 0.01, "backward_s": 0.02,
           "layers": [{"name": "a", "params": 1000}], **extra}
    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc))
    return path


def test_profile_device_defaults_to_cpu_and_is_validated(tmp_path: Path) -> None:
    assert load_profile(_write_profile(tmp_path)).device == "cpu"
    assert load_profile(_write_profile(tmp_path, device="gpu")).device == "gpu"
    with pytest.raises(InputError, match="device must be one of cpu, gpu"):
        load_profile(_write_profile(tmp_path, device="tpu"))
    with pytest.raises(InputError, match="unknown profile device"):
        cost_source("tpu")


def test_gpu_costs_cover_every_compressor_and_fit_the_published_points() -> None:
    gpu = cost_source("gpu")
    data = json.loads(GPU_REFERENCE_PATH.read_text())
    for name in spec_names():
        assert gpu.compute_s(name, 10_000_000, 0.01) >= 0.0
    for name, points in data["measured_s"].items():
        for numel, seconds in points:
            assert gpu.compute_s(name, numel, 0.001) == pytest.approx(seconds, rel=1e-9)
    models = gpu_models(data)
    assert models["sidco-gamma"] == models["sidco-gp"]
    mp = data["memory_pass"]
    per_pass_s = mp["bytes_per_element"] / mp["bandwidth_Bps"]
    assert models["fp16"][1] == pytest.approx(mp["passes"]["fp16"] * per_pass_s)
    assert gpu.compute_s("none", 10**8, 1.0) == 0.0
    # GPU top-k of 25.6 M elements is orders of magnitude cheaper than this CPU's.
    assert gpu.compute_s("topk", 25_600_000, 0.01) < get_spec("topk").compute_s(25_600_000, 0.01) / 100


def test_cpu_costs_are_the_calibrated_specs() -> None:
    cpu = cost_source("cpu")
    for name in spec_names():
        assert cpu.compute_s(name, 1_000_000, 0.01) == get_spec(name).compute_s(1_000_000, 0.01)
    assert cpu.label.startswith("cpu-measured")
    assert cost_source("gpu").label.startswith("h100-reference")


def _topk_run(workload: str, fidelity: str = "analytic") -> tuple[Any, dict[str, Any]]:
    cfg = SimConfig(workload=workload, workers=4, trace="const:lat_ms=1,bw_gbps=10",
                    policy="fixed", policy_params={"density": 0.01},  # type: ignore[arg-type]
                    collective="allgather", iterations=2, fidelity=fidelity, convergence="off")
    return run_simulation(cfg)


@pytest.mark.parametrize("fidelity", ["analytic", "stepwise"])
def test_a_gpu_profile_gets_gpu_costs_and_a_cpu_profile_cpu_costs(fidelity: str) -> None:
    for workload, device in (("resnet50", "gpu"), ("tiny", "cpu")):
        records, meta = _topk_run(workload, fidelity)
        numels = meta["workload"]["bucket_numel"]
        src = cost_source(device)
        expected = sum(src.compute_s("topk", n, 0.01) for n in numels)
        assert np.allclose(records["compress_s"], expected, rtol=1e-9)
        other = cost_source("cpu" if device == "gpu" else "gpu")
        assert not np.allclose(records["compress_s"], sum(other.compute_s("topk", n, 0.01) for n in numels))
        assert meta["compress_cost_source"] == src.label
        assert meta["workload"]["device"] == device


def test_no_example_hides_a_compression_scale() -> None:
    specs = sorted(EXAMPLES.rglob("*.toml"))
    assert specs
    for path in specs:
        text = path.read_text()
        assert "compress_scale" not in text, path.name
        tomllib.loads(text)
