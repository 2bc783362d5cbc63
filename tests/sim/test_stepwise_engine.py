"""The stepwise fidelity end to end: agreement with analytic, stragglers, topologies, bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sim.errors import InputError
from sim.runner import SimConfig, run_simulation
from sim.topology import load_topology
from sim.transports import CALIBRATION_SCHEMA, get_transport, load_calibration
from traces.bundled import resolve_trace

CONST = "const:lat_ms=2,bw_gbps=10"


def _cfg(**kw: object) -> SimConfig:
    base: dict[str, object] = dict(
        workload="resnet50",
        workers=16,
        trace=CONST,
        collective="ring",
        density=1.0,
        iterations=20,
        convergence="off",
    )
    base.update(kw)
    return SimConfig(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize("coll,density", [("ring", 1.0), ("allgather", 0.01), ("ps", 0.1)])
def test_ideal_flat_stepwise_matches_analytic(coll: str, density: float) -> None:
    a, _ = run_simulation(_cfg(collective=coll, density=density))
    s, meta = run_simulation(_cfg(collective=coll, density=density, fidelity="stepwise"))
    for col in ("iter_s", "comm_s", "exposed_comm_s", "compute_s"):
        np.testing.assert_allclose(s[col], a[col], rtol=1e-9, atol=1e-12)
    assert meta["fidelity"] == "stepwise"
    assert meta["stepwise"]["transport"]["name"] == "ideal"
    assert (s["straggler_wait_s"] == 0).all()
    assert "straggler_wait_s" not in a.columns


def test_stragglers_wait_and_pace_the_collective() -> None:
    s, _ = run_simulation(_cfg(fidelity="stepwise", straggler_sigma=0.3, seed=3))
    a, _ = run_simulation(_cfg(straggler_sigma=0.3, seed=3))
    assert (s["straggler_wait_s"] > 0).all()
    # The slowest worker's factor is drawn as the analytic level draws it.
    np.testing.assert_allclose(s["iter_s"], a["iter_s"], rtol=1e-9)


def test_nccl_transport_and_topology_recorded_in_meta(tmp_path: Path) -> None:
    cfg = _cfg(fidelity="stepwise", transport="nccl", topology="8x8-shared-nic", workers=64)
    rec, meta = run_simulation(cfg)
    assert meta["stepwise"]["topology"]["topology"] == "8x8-shared-nic"
    assert meta["config"]["transport"] == "nccl"
    links = meta["stepwise"]["links"]
    assert links["nic"]["bytes"] > 0 and 0 < links["nic"]["max_utilisation"] <= 1.0
    assert (rec["comm_s"] > 0).all()


def test_analytic_config_dict_is_unchanged() -> None:
    d = _cfg().to_dict()
    assert not {"transport", "topology", "calibration"} & set(d)
    assert (
        SimConfig.from_dict(_cfg(fidelity="stepwise", transport="gloo").to_dict()).transport
        == "gloo"
    )
    with pytest.raises(InputError):
        _cfg(transport="nccl")  # analytic has no transport


def _write(tmp_path: Path, text: str) -> str:
    p = tmp_path / "t.toml"
    p.write_text(text)
    return str(p)


NIC = "[links.nic]\nbandwidth_gbps = 10\n"


@pytest.mark.parametrize(
    "text,workers,msg",
    [
        ("[cluster]\nnodes = 2\ngpus_per_node = 2\n" + NIC, 5, "slots"),
        ("[cluster]\nnodes = 2\n", 2, "nic"),
        ("[cluster]\nnodes = 2\n[links.nic]\nbandwidth_gbps = 0\n", 2, "> 0"),
        ("[cluster]\nnodes = 2\n[links.nic]\nbandwidth_gbps = -3\n", 2, "> 0"),
        (
            "[cluster]\nnodes = 4\nnodes_per_rack = 2\n"
            + NIC
            + "[links.uplink]\noversubscription = 0.5\n",
            4,
            "oversubscription",
        ),
        (
            "[cluster]\nnodes = 2\n" + NIC + "[links.fibre]\nbandwidth_gbps = 1\n",
            2,
            "unknown link class",
        ),
        (
            "[cluster]\nnodes = 4\nnodes_per_rack = 1\nracks_per_site = 2\n"
            + NIC
            + "[links.uplink]\nbandwidth_gbps = 10\n",
            4,
            "disconnected",
        ),
        ("[cluster]\nnodes = 2\n" + NIC + '[[link]]\nclass = "nic"\nindex = 9\n', 2, "range"),
    ],
)
def test_bad_topologies_are_input_errors(tmp_path: Path, text: str, workers: int, msg: str) -> None:
    with pytest.raises(InputError, match=msg):
        load_topology(_write(tmp_path, text), workers, resolve_trace)


def test_cli_bad_topology_exits_2_with_one_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "[cluster]\nnodes = 2\n[links.nic]\nbandwidth_gbps = 0\n")
    out = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "sim.entry",
            "sim",
            "--workload",
            "tiny",
            "--workers",
            "2",
            "--trace",
            CONST,
            "--fidelity",
            "stepwise",
            "--topology",
            path,
            "--iterations",
            "2",
            "--out",
            str(out),
            "--quiet",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_bundled_topologies_load() -> None:
    for name, n in (("8x8-shared-nic", 64), ("2racks-4to1", 64), ("4regions", 64)):
        topo = load_topology(name, n, resolve_trace)
        assert topo.n_ranks == n
    regions = load_topology("4regions", 64, resolve_trace)
    assert regions.n_sites == 4


def test_calibration_file_overrides_a_transport(tmp_path: Path) -> None:
    p = tmp_path / "cal.json"
    p.write_text(
        json.dumps({"schema": CALIBRATION_SCHEMA, "transports": {"nccl": {"hop_latency_s": 1e-3}}})
    )
    assert get_transport("nccl", str(p)).hop_latency_s == 1e-3
    assert get_transport("nccl", str(p)).slots == 16
    p.write_text(json.dumps({"schema": CALIBRATION_SCHEMA, "transports": {"nccl": {"x": 1}}}))
    with pytest.raises(InputError, match="unknown parameter"):
        load_calibration(str(p))
    p.write_text(json.dumps({"transports": {}}))
    with pytest.raises(InputError, match="schema"):
        load_calibration(str(p))


def test_sweep_spec_takes_stepwise_options_and_resolves_topology_paths(tmp_path: Path) -> None:
    from sim.sweep import expand_spec, load_spec, run_id
    from sim.sweep.executor import normalize_config

    (tmp_path / "topo.toml").write_text("[cluster]\nnodes = 2\n" + NIC)
    (tmp_path / "s.toml").write_text(
        '[base]\nworkload = "tiny"\nworkers = 2\ntrace = "' + CONST + '"\n'
        'fidelity = "stepwise"\ntopology = "topo.toml"\niterations = 2\n'
        '[grid]\ntransport = ["ideal", "nccl"]\n'
    )
    runs = expand_spec(load_spec(tmp_path / "s.toml"), normalize_config)
    assert sorted(r.config["transport"] for r in runs if "transport" in r.config) == ["nccl"]
    assert all(r.config["topology"] == str(tmp_path / "topo.toml") for r in runs)
    assert len({run_id(r.config) for r in runs}) == 2


def test_events_timeline_is_chrome_trace_json(tmp_path: Path) -> None:
    path = tmp_path / "ev.json"
    run_simulation(
        _cfg(fidelity="stepwise", transport="nccl", straggler_sigma=0.2), events=str(path)
    )
    ev = json.loads(path.read_text())["traceEvents"]
    tids = {e["tid"] for e in ev}
    assert {"collectives", "links", "compute stream"} <= tids
    assert any(e["name"] == "backward" for e in ev)
    assert all(e["ph"] == "X" and e["dur"] >= 0 for e in ev)
    with pytest.raises(InputError):
        run_simulation(_cfg(), events=str(tmp_path / "no.json"))
    assert not (tmp_path / "no.json").exists()


def test_topology_worker_speeds_and_pauses_slow_the_iteration(tmp_path: Path) -> None:
    base = "[cluster]\nnodes = 4\n" + NIC
    plain = _write(tmp_path, base)
    (tmp_path / "slow.toml").write_text(
        base + "[workers]\nspeed = [1.0, 1.0, 1.0, 2.0]\npause_probability = 0.5\npause_s = 0.05\n"
    )
    kw = dict(fidelity="stepwise", workers=4, trace="const:lat_ms=1,bw_gbps=10")
    fast, _ = run_simulation(_cfg(topology=plain, **kw))
    slow, _ = run_simulation(_cfg(topology=str(tmp_path / "slow.toml"), **kw))
    assert (fast["straggler_wait_s"] == 0).all()
    assert (slow["straggler_wait_s"] > 0).all()
    assert (slow["compute_s"] > 1.9 * fast["compute_s"] - 1e-12).all()
    assert slow["iter_s"].mean() > fast["iter_s"].mean()


def test_cost_cli_prints_both_fidelities(capsys: pytest.CaptureFixture[str]) -> None:
    from sim.entry import main

    argv = [
        "cost",
        "--collective",
        "ring",
        "--workers",
        "32",
        "--bytes",
        "256MiB",
        "--latency-ms",
        "1",
        "--bandwidth-gbps",
        "5",
    ]
    assert main([*argv, "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert "stepwise_time_s" not in plain
    assert main([*argv, "--fidelity", "stepwise", "--transport", "ideal", "--json"]) == 0
    both = json.loads(capsys.readouterr().out)
    assert both["time_s"] == plain["time_s"]
    assert both["stepwise_time_s"] == pytest.approx(plain["time_s"], rel=1e-9)
    assert main([*argv, "--fidelity", "stepwise", "--transport", "nccl"]) == 0
    text = capsys.readouterr().out.splitlines()
    assert len(text) == 2 and "stepwise (nccl transport" in text[1]
    assert main([*argv, "--transport", "nccl"]) == 2
    assert main([*argv, "--fidelity", "stepwise", "--transport", "tcp"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 2
