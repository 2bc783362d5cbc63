"""Plugins: a toy compressor and a toy policy, one file each (``tests/plugins/``), pass the
shared conformance tests and run in both worlds; third-party plugins are found through Python
entry points (``compctl.compressors``, ``compctl.policies``).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import math
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import test_controller_world as world_tests
import torch
from _spawn import run_ranks

TESTS = Path(__file__).resolve().parents[1]
PLUGINS = TESTS / "plugins"
TOY_POLICY, TOY_COMPRESSOR = "toy-budget", "toy-stride"
#: A budget every real or simulated step misses: the toy policy compresses from step 1 on.
PARAMS = {TOY_POLICY: {"budget_s": 1e-9}}


def _load(path: Path) -> ModuleType:
    """A test module by path (the test folders are not packages; its folder goes on the path
    for its helper imports)."""
    if str(path.parent) not in sys.path:
        sys.path.append(str(path.parent))
    spec = importlib.util.spec_from_file_location(f"_conf_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def toys() -> Iterator[None]:
    """Register the two toy plugins in this process (as an entry point would), then remove them."""
    from sim.compress.base import unregister_compressor
    from sim.compress.spec import unregister_spec
    from sim.control.registry import unregister_policy

    sys.path.insert(0, str(PLUGINS))
    try:
        for name in ("toy_compressor", "toy_policy"):
            if name in sys.modules:
                importlib.reload(sys.modules[name])
            else:
                importlib.import_module(name)
        yield
    finally:
        unregister_policy(TOY_POLICY)
        unregister_compressor(TOY_COMPRESSOR)
        unregister_spec(TOY_COMPRESSOR)
        sys.path.remove(str(PLUGINS))


# ------------------------------------------------------------------ shared conformance tests
def test_toy_compressor_passes_the_compressor_conformance_tests(toys: None) -> None:
    conf = _load(TESTS / "sim" / "compress" / "test_compress_conformance.py")
    for dtype in (torch.float32, torch.float64):
        conf.test_shapes_and_dtypes_round_trip(TOY_COMPRESSOR, "cpu", dtype)
    conf.test_error_feedback_identity(TOY_COMPRESSOR, "cpu")
    for density in (0.1, 0.01):
        conf.test_achieved_density_within_documented_band(TOY_COMPRESSOR, density)


def test_toy_compressor_spec_counts_its_payload(toys: None) -> None:
    from sim.compress.base import make_compressor
    from sim.compress.spec import get_spec

    comp = make_compressor(TOY_COMPRESSOR, seed=0)
    for numel, density in ((1000, 0.1), (1003, 0.01), (7, 0.5)):
        c = comp.compress(torch.ones(numel), density)
        assert get_spec(TOY_COMPRESSOR).payload(numel, density).total_bytes == c.payload_bytes


def test_toy_policy_passes_the_policy_conformance_tests(
    toys: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf = _load(TESTS / "sim" / "control" / "test_control_conformance.py")
    conf.test_decisions_are_valid(TOY_POLICY)
    conf.test_same_observations_same_decisions(TOY_POLICY)
    conf.test_reset_restores_initial_behaviour(TOY_POLICY)
    conf.test_no_wall_clock_or_global_rng(TOY_POLICY, monkeypatch)


# ------------------------------------------------------------------ both worlds
@pytest.fixture(scope="module")
def logs(toys: None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    sim = world_tests.simulate_recorded([TOY_POLICY], PARAMS)
    real = run_ranks(world_tests._real_rank, 2, [TOY_POLICY], PARAMS,
                     ("toy_compressor", "toy_policy"))
    return sim, real


def test_toy_plugins_decide_alike_in_both_worlds(
    logs: tuple[dict[str, Any], list[dict[str, Any]]]
) -> None:
    sim, real = logs
    sim_log, real_log = sim[TOY_POLICY], real[0][TOY_POLICY]
    assert len(sim_log) == len(real_log) == world_tests.STEPS
    # Each world's observations give back its decisions in a controller built the other way.
    real_built = world_tests._real_config(TOY_POLICY, PARAMS[TOY_POLICY]).controller()
    assert world_tests._replay(real_built, sim_log) == [d for _, d in sim_log]
    sim_built = world_tests._sim_built(TOY_POLICY, PARAMS[TOY_POLICY])
    assert world_tests._replay(sim_built, real_log) == [d for _, d in real_log]
    assert [d for _, d in real[0][TOY_POLICY]] == [d for _, d in real[1][TOY_POLICY]]
    # The toy compressor really ran: in the simulator, and through the real hook's exchange.
    for log in (sim_log, real_log):
        assert [d.compressor for _, d in log][1:] == [TOY_COMPRESSOR] * (world_tests.STEPS - 1)
        assert all(obs.decision is not None and obs.comm_s is not None for obs, _ in log[1:])


# ------------------------------------------------------------------ entry points
def _fake_distribution(root: Path, entry_points: str) -> None:
    """An installed-looking distribution (``*.dist-info``) that declares ``entry_points``."""
    info = root / "toyplug-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toyplug\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(entry_points)


_PROBE = """\
import json
import math
from sim.compress.base import compressor_names
from sim.compress.spec import spec_names
from sim.control.registry import policy_names
print(json.dumps([policy_names(), compressor_names(), spec_names()]))
"""


def _run(code_or_argv: list[str], path: Path) -> subprocess.CompletedProcess[str]:
    env_path = f"{path}:{PLUGINS}"
    return subprocess.run([sys.executable, *code_or_argv], capture_output=True, text=True,
                          env={**_env(), "PYTHONPATH": env_path}, timeout=120)


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def test_entry_points_register_third_party_plugins(tmp_path: Path) -> None:
    _fake_distribution(tmp_path, "[compctl.policies]\ntoy-budget = toy_policy\n\n"
                                 "[compctl.compressors]\ntoy-stride = toy_compressor\n")
    proc = _run(["-c", _PROBE], tmp_path)
    assert proc.returncode == 0, proc.stderr
    policies, compressors, specs = json.loads(proc.stdout)
    assert TOY_POLICY in policies and "dc2-aimd" in policies
    assert TOY_COMPRESSOR in compressors and TOY_COMPRESSOR in specs and "topk" in specs


def test_a_broken_plugin_is_one_line_and_exit_2(tmp_path: Path) -> None:
    _fake_distribution(tmp_path, "[compctl.policies]\nbroken = no_such_module_here\n")
    proc = _run(["-m", "sim.entry", "list", "policies"], tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "plugin 'broken' (no_such_module_here)" in lines[0], proc.stderr


def test_entry_points_add_a_trace_format_and_a_real_workload(tmp_path: Path) -> None:
    """A third-party importer and workload, each one module, work from the command line: the
    importer converts a file, a real run (2 gloo ranks, started by the launcher, which find the
    workload through the same entry point) trains the workload over the imported trace."""
    dist = tmp_path / "site"
    _fake_distribution(dist, "[compctl.trace_importers]\ntoy-csv = toy_importer\n\n"
                             "[compctl.workloads]\ntoy-linear = toy_workload\n")
    raw = tmp_path / "link.txt"
    raw.write_text("0,200\n1,50\n2,200\n")
    trace = tmp_path / "link.csv"
    proc = _run(["-m", "sim.entry", "trace", "import", "toy-csv", str(raw), "--latency-ms", "1",
                 "--out", str(trace)], dist)
    assert proc.returncode == 0, proc.stderr
    rows = [ln for ln in trace.read_text().splitlines() if not ln.startswith("#")]
    assert rows[0].startswith("time_s,latency_s,bandwidth_Bps") and len(rows) == 4, rows
    run = tmp_path / "run"
    proc = _run(["-m", "sim.entry", "real", "--workload", "toy-linear", "--nproc", "2",
                 "--iterations", "4", "--eval-every", "4", "--trace", str(trace),
                 "--out", str(run), "--quiet", "--json"], dist)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["iterations"] == 4 and math.isfinite(summary["final_loss"])
