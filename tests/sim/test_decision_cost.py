"""``SimConfig.decision_s`` / ``measure_decisions``: the simulator charges the controller's
decision time as the real hook pays it (serially, in ``compute_s``; the records' ``decide_s``)."""

from __future__ import annotations

from typing import Any

import pytest

from sim.errors import InputError
from sim.runner import SimConfig, run_simulation

BASE: dict[str, Any] = {"workload": "digits-mlp", "workers": 2,
                        "trace": "steps:dur_s=0.05/0.05,lat_ms=1/1,bw_gbps=0.01/0.0005,loop=true",
                        "iterations": 40, "convergence": "off", "policy": "mpc",
                        "policy_params": {"target_progress": 30.0}}


def _run(**extra: Any) -> Any:
    return run_simulation(SimConfig.from_dict({**BASE, **extra}))[0]


def test_default_charges_nothing_and_leaves_config_and_records_as_before() -> None:
    cfg = SimConfig.from_dict(BASE)
    assert "decision_s" not in cfg.to_dict() and "measure_decisions" not in cfg.to_dict()
    records = _run()
    assert "decide_s" not in records
    same = _run(decision_s=0.0)
    assert records.equals(same)
    cfg2 = SimConfig.from_dict({**BASE, "decision_s": 0.002, "measure_decisions": True})
    assert cfg2.to_dict()["decision_s"] == 0.002 and cfg2.to_dict()["measure_decisions"]
    assert SimConfig.from_dict(cfg2.to_dict()) == cfg2


@pytest.mark.parametrize("bad", [{"decision_s": -0.001}, {"decision_s": float("nan")},
                                 {"measure_decisions": "yes"}])
def test_bad_decision_cost_is_an_input_error(bad: dict[str, Any]) -> None:
    with pytest.raises(InputError):
        SimConfig.from_dict({**BASE, **bad})


def test_a_fixed_decision_cost_is_charged_serially_on_controlled_iterations() -> None:
    """A fixed policy ignores its observations: the same decisions with and without the cost,
    each controlled iteration longer by exactly the cost, counted as compute; warm-up free."""
    fixed = {**BASE, "policy": "fixed", "policy_params": {"density": 0.01,
                                                          "collective": "allgather"}}
    plain = run_simulation(SimConfig.from_dict({**fixed, "trace": "const:lat_ms=1,bw_mbps=10"}))[0]
    paid = run_simulation(SimConfig.from_dict({**fixed, "trace": "const:lat_ms=1,bw_mbps=10",
                                               "decision_s": 0.002, "warmup_steps": 1}))[0]
    assert paid["decide_s"].tolist() == [0.0] + [0.002] * 39
    d_iter = (paid["iter_s"] - plain["iter_s"]).to_numpy()[1:]
    d_comp = (paid["compute_s"] - plain["compute_s"]).to_numpy()[1:]
    assert d_iter == pytest.approx([0.002] * 39, abs=1e-12)
    assert d_comp == pytest.approx([0.002] * 39, abs=1e-12)
    assert paid["exposed_comm_s"].iloc[1:].tolist() == plain["exposed_comm_s"].iloc[1:].tolist()


def test_the_controller_sees_the_decision_cost_and_time_moves_on() -> None:
    """With a cost, the run's clock advances by it each step (the trace is met later) and the
    adaptive controller observes compute that includes it, as in a real run. (Without
    ``mpc``'s identification step, a decision path the two runs would take at different steps
    on this two-rate link, and whose cost would then differ.)"""
    params = {"policy_params": {"target_progress": 30.0, "identify_every": 0}}
    plain = _run(**params)
    paid = _run(decision_s=0.005, **params)
    assert (paid["decide_s"] == 0.005).all()
    assert paid["start_s"].iloc[-1] > plain["start_s"].iloc[-1] + 39 * 0.005 - 1e-9
    assert (paid["compute_s"] >= 0.005).all()


def test_measured_decision_time_is_charged_on_top() -> None:
    records = _run(measure_decisions=True, decision_s=0.001)
    assert (records["decide_s"] > 0.001).all()
    assert (records["decide_s"] < 1.0).all()


def test_a_lagged_decision_hides_in_the_iterations_communication() -> None:
    """``decision_lag=1``: the first controlled decision is paid in full; later ones only for
    what exceeds the iteration's communication (``decide_hidden_s`` holds the rest); decisions
    apply one step late (a fixed policy's are the same either way)."""
    fixed = {**BASE, "policy": "fixed", "trace": "const:lat_ms=1,bw_mbps=10",
             "policy_params": {"density": 0.01, "collective": "allgather"}, "warmup_steps": 1}
    plain = run_simulation(SimConfig.from_dict(fixed))[0]
    small = run_simulation(SimConfig.from_dict({**fixed, "decision_s": 1e-4,
                                                "decision_lag": 1}))[0]
    comm = plain["comm_s"].iloc[2]
    assert comm > 1e-4
    assert small["decide_hidden_s"].tolist() == [0.0, 0.0] + [1e-4] * 38
    assert small["iter_s"].iloc[1] == pytest.approx(plain["iter_s"].iloc[1] + 1e-4, abs=1e-12)
    assert small["iter_s"].iloc[2:].tolist() == pytest.approx(plain["iter_s"].iloc[2:].tolist(),
                                                              abs=1e-12)
    big = run_simulation(SimConfig.from_dict({**fixed, "decision_s": comm + 0.003,
                                              "decision_lag": 1}))[0]
    assert big["iter_s"].iloc[5] == pytest.approx(plain["iter_s"].iloc[5] + 0.003, abs=1e-9)
    assert SimConfig.from_dict({**fixed, "decision_lag": 1}).to_dict()["decision_lag"] == 1
    with pytest.raises(InputError, match="decision_lag"):
        SimConfig.from_dict({**fixed, "decision_lag": 2})
