"""The ``events`` fidelity: SimPy processes per worker and per collective, against the vectorised
stepwise level (same records to 1e-9 relative, same observations), determinism, timelines."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import sim.engine as engine
from sim.control.types import Decision
from sim.engine_events import EventIterationModel
from sim.errors import InputError
from sim.runner import SimConfig, run_simulation
from traces.generators import random_walk
from traces.model import TraceSet

CONST = "const:lat_ms=2,bw_gbps=10"
NIC = "[links.nic]\nbandwidth_gbps = 10\n"


def _walks(n: int) -> TraceSet:
    """``n`` per-link random walks changing every 50 ms (several changes inside a run, some in
    the middle of a collective)."""
    return TraceSet(
        {
            f"w{i}": random_walk(
                seed=i,
                latency_s=1e-3,
                bandwidth_Bps=1.25e9,
                bandwidth_sigma=0.3,
                latency_sigma_s=3e-4,
                dt_s=0.05,
                duration_s=30.0,
                loop=True,
                name=f"w{i}",
            )
            for i in range(n)
        }
    )


def _pauses_topology(tmp_path: Path) -> str:
    p = tmp_path / "pauses.toml"
    p.write_text(
        "[cluster]\nnodes = 4\ngpus_per_node = 2\n"
        + NIC
        + "[workers]\nspeed = [1.0, 1.3, 1.0, 0.9]\nstraggler_sigma = 0.2\n"
        + "pause_probability = 0.3\npause_s = 0.03\n"
    )
    return str(p)


def _cases(tmp_path: Path) -> dict[str, tuple[dict[str, Any], TraceSet | None]]:
    base: dict[str, Any] = dict(
        workload="resnet50", workers=16, trace=CONST, iterations=12, convergence="off", seed=5
    )
    return {
        "flat-ideal-stragglers-fixed": (
            dict(base, collective="ring", density=1.0, straggler_sigma=0.3),
            None,
        ),
        "flat-nccl-per-link-walks-dc2-aimd": (
            dict(base, policy="dc2-aimd", transport="nccl", straggler_sigma=0.2, trace="walks",
                 iterations=30),
            _walks(8),
        ),
        "2racks-nccl-markov-mpc": (
            dict(base, policy="mpc", workers=64, transport="nccl", topology="2racks-4to1",
                 trace="markov-congestion", straggler_sigma=0.1, worker_speed_sigma=0.1),
            None,
        ),
        "8x8-gloo-oracle": (
            # three densities: the oracle prices every candidate by simulating iterations, so
            # its search (not the run) is what costs here; the default grid took 13/3 as long
            dict(base, policy="oracle", workers=64, transport="gloo", topology="8x8-shared-nic",
                 iterations=6, policy_params={"densities": "1,0.1,0.01"}),
            None,
        ),
        "pauses-speeds-bandit-ucb": (
            dict(base, policy="bandit-ucb", workers=8, topology=_pauses_topology(tmp_path),
                 trace="delay-highvar", monitor="on"),
            None,
        ),
        "flat-lossy-allgather-topk": (
            dict(base, collective="allgather", density=0.01, packet_loss=0.001,
                 straggler_sigma=0.2),
            None,
        ),
        "8x8-ds-sync": (
            dict(base, workers=64, collective="ring", density=1.0, topology="8x8-shared-nic",
                 sync="ds-sync", groups=4, shuffle_every=2, straggler_sigma=0.2),
            None,
        ),
    }


class _Recorder:
    """Wraps a controller and keeps every observation it was given."""

    def __init__(self, inner: Any, seen: list[Any]) -> None:
        self._inner, self._seen = inner, seen

    def decide(self, obs: Any) -> Any:
        self._seen.append(obs)
        return self._inner.decide(obs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _run(
    monkeypatch: pytest.MonkeyPatch, kw: dict[str, Any], traces: TraceSet | None, fidelity: str
) -> tuple[pd.DataFrame, dict[str, Any], list[Any]]:
    seen: list[Any] = []
    real = engine.make_controller
    monkeypatch.setattr(
        engine, "make_controller", lambda *a, **k: _Recorder(real(*a, **k), seen)
    )
    rec, meta = run_simulation(SimConfig(fidelity=fidelity, **kw), traces=traces)
    monkeypatch.setattr(engine, "make_controller", real)
    return rec, meta, seen


def _close(a: Any, b: Any, where: str) -> None:
    if isinstance(a, float) and isinstance(b, float):
        if np.isnan(a) and np.isnan(b):
            return
        assert b == pytest.approx(a, rel=1e-9, abs=1e-15), where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _close(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _close(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


def _assert_records_equal(s: pd.DataFrame, e: pd.DataFrame) -> None:
    assert list(s.columns) == list(e.columns)
    for col in s.columns:
        if s[col].dtype.kind == "f":
            np.testing.assert_allclose(e[col], s[col], rtol=1e-9, atol=1e-15, err_msg=col)
        else:
            assert (s[col] == e[col]).all(), col


@pytest.mark.parametrize(
    "case",
    [
        "flat-ideal-stragglers-fixed",
        "flat-nccl-per-link-walks-dc2-aimd",
        "2racks-nccl-markov-mpc",
        "8x8-gloo-oracle",
        "pauses-speeds-bandit-ucb",
        "flat-lossy-allgather-topk",
        "8x8-ds-sync",
    ],
)
def test_events_equal_vectorised_stepwise(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kw, traces = _cases(tmp_path)[case]
    s, s_meta, s_obs = _run(monkeypatch, kw, traces, "stepwise")
    e, e_meta, e_obs = _run(monkeypatch, kw, traces, "events")
    _assert_records_equal(s, e)
    assert e_meta["fidelity"] == "events" and s_meta["fidelity"] == "stepwise"
    _close(s_meta["stepwise"]["links"], e_meta["stepwise"]["links"], "links")
    _close(s_meta["simulated_s"], e_meta["simulated_s"], "simulated_s")
    # The controller sees the same observations (to float rounding) and decides the same.
    assert len(s_obs) == len(e_obs) == kw["iterations"]
    for i, (a, b) in enumerate(zip(s_obs, e_obs, strict=True)):
        _close(dataclasses.asdict(a), dataclasses.asdict(b), f"observation {i}")


def test_case_coverage_is_not_trivial(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The equivalence cases exercise what they claim: waits, pauses, compression, exposed
    communication, changing links and adapting decisions."""
    cases = _cases(tmp_path)
    rec, _, _ = _run(monkeypatch, *cases["pauses-speeds-bandit-ucb"], "events")
    assert (rec["straggler_wait_s"] > 0).all() and rec["compress_s"].max() > 0
    rec, _, _ = _run(monkeypatch, *cases["flat-nccl-per-link-walks-dc2-aimd"], "events")
    assert rec["density"].nunique() > 1 and rec["comm_s"].nunique() > 5
    assert (rec["exposed_comm_s"] > 0).any()


def test_same_seed_same_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kw, traces = _cases(tmp_path)["flat-nccl-per-link-walks-dc2-aimd"]
    a, a_meta, _ = _run(monkeypatch, kw, traces, "events")
    b, b_meta, _ = _run(monkeypatch, kw, traces, "events")
    assert a.to_csv(float_format="%.17g") == b.to_csv(float_format="%.17g")
    assert json.dumps(a_meta, sort_keys=True) == json.dumps(b_meta, sort_keys=True)
    from sim.rundir import write_run

    write_run(tmp_path / "a", a, a_meta)
    write_run(tmp_path / "b", b, b_meta)
    for f in sorted(p.name for p in (tmp_path / "a").iterdir()):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f
    c, _, _ = _run(monkeypatch, dict(kw, seed=6), traces, "events")
    assert not c["iter_s"].equals(a["iter_s"])


def test_links_conserve_bytes_and_meta_has_busy_fractions() -> None:
    from sim.engine import _build

    cfg = SimConfig(workload="resnet50", workers=64, trace=CONST, collective="ring", density=1.0,
                    iterations=3, convergence="off", fidelity="events", transport="nccl",
                    topology="2racks-4to1")
    _, _, model, _, _ = _build(cfg, None)
    assert isinstance(model, EventIterationModel)
    plan = model.plan(Decision(compressor="none", density=1.0, collective="ring"))
    t = 0.0
    for _ in range(3):
        res = model.run(plan, t)
        model.account(plan)
        t += res.iter_s
    links = model.fabric.links()
    carried = np.zeros(model.topology.n_links)
    for ln in links:
        carried[ln.id] = ln.bytes_carried
        assert 0 < ln.busy_s <= t
    np.testing.assert_allclose(carried, model.network.link_bytes, rtol=1e-12)
    # Every rank sends and receives the same bytes in a ring: up and down links carry alike.
    summary = model.summary(t)
    assert set(summary["busy_frac"]) == {"intra", "nic", "uplink"}
    assert all(0 < v <= 1 for v in summary["busy_frac"].values())
    # A hypothetical iteration (as an oracle runs) charges nothing until accounted.
    model.run(plan, t)
    assert sum(ln.bytes_carried for ln in model.fabric.links()) == pytest.approx(carried.sum())


def test_chrome_trace_has_per_worker_compute_and_buckets(tmp_path: Path) -> None:
    path = tmp_path / "ev.json"
    rec, _ = run_simulation(
        SimConfig(workload="resnet50", workers=8, trace=CONST, collective="allgather",
                  density=0.01, iterations=3, convergence="off", fidelity="events",
                  transport="nccl", straggler_sigma=0.3, seed=2),
        events=str(path),
    )
    ev = json.loads(path.read_text())["traceEvents"]
    assert all(e["ph"] == "X" and e["dur"] >= 0 for e in ev)
    tids = {e["tid"] for e in ev}
    assert {f"worker {w}" for w in range(8)} | {"collectives"} <= tids
    assert any(t.startswith("links ") for t in tids)
    names = {e["name"] for e in ev}
    assert {"forward", "backward to bucket 0", "compress 0", "optimizer", "bucket 0"} <= names
    # The collectives in the trace end where the first iteration's communication says.
    buckets = [e for e in ev if e["tid"] == "collectives"]
    assert sum(e["dur"] for e in buckets) * 1e-6 == pytest.approx(rec["comm_s"][0], rel=1e-9)
    # Each bucket's collective starts after every worker has compressed it.
    first = min(e["ts"] for e in buckets)
    assert all(e["ts"] + e["dur"] <= first + 1e-6 for e in ev if e["name"] == "compress 0")


def test_fidelity_events_is_recorded_and_checked(tmp_path: Path) -> None:
    cfg = SimConfig(workload="resnet50", workers=4, trace=CONST, iterations=2,
                    convergence="off", fidelity="events", transport="nccl")
    assert SimConfig.from_dict(cfg.to_dict()).fidelity == "events"
    with pytest.raises(InputError, match="fidelity must be one of"):
        SimConfig(workload="resnet50", workers=4, trace=CONST, fidelity="event")


def test_cli_sim_and_cost_accept_events(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from sim.entry import main

    out = tmp_path / "tl.json"
    argv = ["sim", "--workload", "resnet50", "--workers", "8", "--trace", CONST,
            "--fidelity", "events", "--transport", "nccl", "--collective", "ring",
            "--density", "1", "--iterations", "3", "--quiet", "--json", "--events", str(out)]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["iterations"] == 3
    assert "traceEvents" in json.loads(out.read_text())
    cost = ["cost", "--collective", "ring", "--workers", "32", "--bytes", "256MiB",
            "--latency-ms", "1", "--bandwidth-gbps", "5", "--transport", "nccl", "--json"]
    assert main([*cost, "--fidelity", "stepwise"]) == 0
    sw = json.loads(capsys.readouterr().out)
    assert main([*cost, "--fidelity", "events"]) == 0
    ev = json.loads(capsys.readouterr().out)
    assert ev["fidelity"] == "events" and ev["stepwise_time_s"] == sw["stepwise_time_s"]
    assert main(["sim", "--workload", "resnet50", "--workers", "4", "--trace", CONST,
                 "--iterations", "2", "--quiet", "--events", str(tmp_path / "x.json")]) == 2
    assert "--events needs --fidelity stepwise or events" in capsys.readouterr().err


def test_sweep_spec_takes_fidelity_events(tmp_path: Path) -> None:
    from sim.sweep import expand_spec, load_spec
    from sim.sweep.executor import normalize_config

    (tmp_path / "s.toml").write_text(
        '[base]\nworkload = "resnet50"\nworkers = 8\ntrace = "const:lat_ms=1,bw_gbps=10"\n'
        'iterations = 2\nfidelity = "events"\ntransport = "nccl"\n'
        '[grid]\npolicy = ["dense", "dc2-aimd"]\n'
    )
    runs = expand_spec(load_spec(tmp_path / "s.toml"), normalize_config)
    assert [r.config["fidelity"] for r in runs] == ["events", "events"]


def test_validate_accepts_events(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``compctl validate --fidelity events`` predicts what the stepwise level predicts."""
    from sim.entry import main
    from sim.rundir import write_run

    trace = "const:lat_ms=1,bw_mbps=100"
    records, _ = run_simulation(
        SimConfig(workload="digits-cnn", workers=2, trace=trace, iterations=8, convergence="off")
    )
    records["source"] = "real"
    meta = {
        "source": "real",
        "emulation": {"mode": "hook", "delay": "hook", "bandwidth": "hook"},
        "config": {"workload": "digits-cnn", "nproc": 2, "trace": trace, "policy": "dense",
                   "policy_params": {}, "steps": 8, "seed": 0, "bucket_cap_mb": 25.0},
    }
    run = str(tmp_path / "real")
    write_run(run, records, meta)
    got = {}
    for fid in ("stepwise", "events"):
        argv = ["validate", "--real", run, "--skip", "1", "--fidelity", fid,
                "--transport", "gloo", "--json"]
        assert main(argv) == 0
        got[fid] = json.loads(capsys.readouterr().out)
    assert got["events"]["comparison"]["fidelity"] == "events"
    for key in ("sim_mean_iter_s", "sim_mean_comm_s", "mape_iter"):
        assert got["events"][key] == pytest.approx(got["stepwise"][key], rel=1e-9)
