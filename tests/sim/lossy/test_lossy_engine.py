"""The loss model inside both engines, the two-spine topology, and the command line."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.entry import main
from sim.runner import SimConfig, run_simulation

_BASE: dict[str, Any] = dict(
    workload="resnet50", workers=8, iterations=30, seed=3, convergence="off", policy="dense"
)
_TRACE = "const:lat_ms=0.05,bw_gbps=10"


def _run(**kw: Any) -> pd.DataFrame:
    cfg = SimConfig(**{**_BASE, "trace": _TRACE, **kw})
    return run_simulation(cfg)[0]


@settings(max_examples=8, deadline=None)
@given(
    fidelity=st.sampled_from(["analytic", "stepwise"]),
    bound=st.one_of(st.none(), st.floats(0.0, 0.5)),
    seed=st.integers(0, 1000),
    collective=st.sampled_from(["ring", "tree", "ps"]),
)
def test_zero_loss_without_deadline_equals_the_plain_run(
    fidelity: str, bound: float | None, seed: int, collective: str
) -> None:
    kw: dict[str, Any] = dict(fidelity=fidelity, seed=seed, collective=collective)
    plain = _run(**kw)
    lossy = _run(**kw, packet_loss=0.0, loss_bound=bound)
    pd.testing.assert_frame_equal(plain, lossy[plain.columns], check_exact=True)
    assert (lossy["delivered_frac"] == 1.0).all()


@pytest.mark.parametrize("fidelity", ["analytic", "stepwise"])
def test_bounded_loss_keeps_the_bound_every_iteration(fidelity: str) -> None:
    r = _run(fidelity=fidelity, packet_loss=0.004, loss_bound=0.01, deadline_s=0.01)
    assert (r["delivered_frac"] >= 0.99).all()
    assert (r["delivered_frac"] < 1.0).all()


@pytest.mark.parametrize("fidelity", ["analytic", "stepwise"])
def test_plain_transport_is_slower_and_tailier_on_a_lossy_link(fidelity: str) -> None:
    plain = _run(fidelity=fidelity, packet_loss=0.001, iterations=60)
    bounded = _run(fidelity=fidelity, packet_loss=0.001, loss_bound=0.01, iterations=60)
    lossless = _run(fidelity=fidelity, iterations=60)
    assert (plain["delivered_frac"] == 1.0).all()
    assert (plain["retx_packets"] > 0).all()
    assert plain["comm_s"].quantile(0.99) > bounded["comm_s"].quantile(0.99)
    assert plain["comm_s"].mean() > lossless["comm_s"].mean()
    # Losses within the bound are not repaired: mostly the lossless time (a message too
    # small for its bound to allow one lost packet still repairs, a round trip).
    assert (bounded["comm_s"] == lossless["comm_s"]).mean() > 0.8
    assert bounded["comm_s"].mean() < plain["comm_s"].mean()


def test_same_seed_same_records_and_seed_matters() -> None:
    kw: dict[str, Any] = dict(packet_loss=0.002)
    a, b = _run(**kw), _run(**kw)
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    c = _run(**{**kw, "seed": 4})
    assert not a["comm_s"].equals(c["comm_s"])


def test_trace_loss_column_drives_the_loss() -> None:
    r = run_simulation(
        SimConfig(
            **{**_BASE, "trace": "const:lat_ms=0.05,bw_gbps=10,loss=0.003"},
            trace_loss=True,
            loss_bound=0.01,
        )
    )[0]
    assert (r["delivered_frac"] < 1.0).all() and (r["delivered_frac"] >= 0.99).all()


def test_config_round_trip_leaves_loss_fields_out_by_default() -> None:
    cfg = SimConfig(**{**_BASE, "trace": _TRACE})
    assert "loss_bound" not in cfg.to_dict() and "packet_loss" not in cfg.to_dict()
    lossy = SimConfig(**{**_BASE, "trace": _TRACE}, loss_bound=0.01, deadline_s=0.02)
    assert SimConfig.from_dict(lossy.to_dict()) == lossy
    assert lossy.to_dict()["loss_bound"] == 0.01


def _spine_cfg(lb: str, tmp_path: Any, collective: str) -> SimConfig:
    from pathlib import Path

    src = Path(__file__).resolve().parents[3] / "sim" / "topologies" / "2spine.toml"
    text = src.read_text().replace('load_balancing = "auto"', f'load_balancing = "{lb}"')
    dst = tmp_path / f"2spine-{lb}.toml"
    dst.write_text(text)
    return SimConfig(
        **{**_BASE, "trace": _TRACE, "workload": "bert-base"},
        fidelity="stepwise",
        topology=str(dst),
        collective=collective,
    )


@pytest.mark.parametrize("collective", ["ring", "rhd"])
def test_spraying_beats_per_flow_hashing_on_two_spines(tmp_path: Any, collective: str) -> None:
    hashed = run_simulation(_spine_cfg("hash", tmp_path, collective))[0]
    sprayed = run_simulation(_spine_cfg("spray", tmp_path, collective))[0]
    assert sprayed["comm_s"].mean() < hashed["comm_s"].mean()


@pytest.mark.parametrize(("collective", "gain"), [("ring", 1.9), ("rhd", 1.5)])
def test_spraying_uses_both_spines_for_a_large_collective(
    tmp_path: Any, collective: str, gain: float
) -> None:
    from sim.compress.spec import get_spec
    from sim.stepwise_cost import stepwise_collective

    times = {}
    for lb in ("hash", "spray"):
        topo = _spine_cfg(lb, tmp_path, collective).topology
        payload = get_spec("none").payload(25_000_000, 1.0, 4)
        times[lb] = stepwise_collective(
            collective, 8, payload, latency_s=1e-5, bandwidth_Bps=12.5e9, topology=topo
        )["time_s"]
    # One flow per rack pair in a ring: hashing gives it one spine (half the uplink).
    assert times["hash"] > gain * times["spray"]


def test_auto_load_balancing_sprays_only_under_the_bounded_transport() -> None:
    kw: dict[str, Any] = {
        **_BASE,
        "trace": _TRACE,
        "fidelity": "stepwise",
        "topology": "2spine",
        "collective": "ring",
        "workload": "bert-base",
    }
    plain = run_simulation(SimConfig(**kw))
    bounded = run_simulation(SimConfig(**kw, loss_bound=0.01))
    assert plain[1]["stepwise"]["topology"]["load_balancing"] == "hash"
    assert bounded[1]["stepwise"]["topology"]["load_balancing"] == "spray"
    assert bounded[0]["comm_s"].mean() < plain[0]["comm_s"].mean()


@pytest.mark.parametrize(
    "extra",
    [
        ["--loss-bound", "1"],
        ["--loss-bound", "-0.1"],
        ["--loss-bound", "0.01", "--deadline-ms", "-5"],
        ["--packet-loss", "1.2"],
        ["--packet-loss", "-0.5"],
        ["--packet-loss", "lots"],
        ["--deadline-ms", "5"],
    ],
)
def test_bad_loss_input_is_one_line_and_exit_2(
    extra: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["sim", "--workload", "resnet50", "--workers", "4", "--trace", _TRACE]
    assert main([*argv, "--iterations", "2", *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("compctl: error:")


def test_cli_summary_reports_delivery(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["sim", "--workload", "resnet50", "--workers", "4", "--trace", _TRACE]
    rc = main([*argv, "--iterations", "5", "--packet-loss", "0.003", "--loss-bound", "0.01",
               "--deadline-ms", "10", "--json", "--convergence", "off"])
    assert rc == 0
    s = json.loads(capsys.readouterr().out)
    assert 0.99 <= s["min_delivered_frac"] < 1.0
