"""Calibration and clock alignment of ``compctl validate`` (no processes: simulated "real" runs).

A simulation with known constants stands in for a real run: fitting must recover the constants,
and the simulator's per-iteration overhead must add exactly what it says.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from analysis.validate import Calibration, _adjusted_trace_file, fit_calibration
from sim.errors import InputError
from sim.runner import SimConfig, run_simulation
from traces.bundled import resolve_trace

CONST = "const:lat_ms=5,bw_mbps=20"


def _meta(policy: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"source": "real",
            "config": {"workload": "digits-cnn", "nproc": 2, "trace": CONST, "policy": policy,
                       "policy_params": params, "steps": 25, "seed": 0, "bucket_cap_mb": 25.0}}


def _fake_real(policy: str, params: dict[str, Any], **knobs: float) -> Any:
    cfg = SimConfig(workload="digits-cnn", workers=2, trace=CONST, policy=policy,
                    policy_params=params, iterations=25, convergence="off",
                    bucket_bytes=25.0 * 2**20, **knobs)
    return run_simulation(cfg)[0]


def test_fit_recovers_compute_and_compression_scales() -> None:
    topk = {"density": 0.1, "collective": "allgather"}
    dense_real = _fake_real("dense", {}, compute_scale=2.0)
    topk_real = _fake_real("fixed", topk, compute_scale=2.0, compress_scale=3.0)
    cal = fit_calibration(dense_real, _meta("dense", {}),
                          compressed=(topk_real, _meta("fixed", topk)))
    assert cal.compute_scale == pytest.approx(2.0, rel=1e-9)
    assert cal.extra_latency_s == pytest.approx(0.0, abs=1e-9)
    assert cal.compress_scale == pytest.approx(3.0, rel=1e-6)
    assert cal.overhead_s == 0.0


def test_fit_rejects_a_dense_run_as_the_compressed_one() -> None:
    dense_real = _fake_real("dense", {}, compute_scale=2.0)
    with pytest.raises(InputError, match="compression"):
        fit_calibration(dense_real, _meta("dense", {}),
                        compressed=(dense_real, _meta("dense", {})))


def test_overhead_adds_exactly_to_every_iteration() -> None:
    base = _fake_real("fixed", {"density": 0.1, "collective": "allgather"})
    more = _fake_real("fixed", {"density": 0.1, "collective": "allgather"}, overhead_s=0.004)
    np.testing.assert_allclose(more["iter_s"] - base["iter_s"], 0.004, rtol=0, atol=1e-12)
    np.testing.assert_allclose(more["compute_s"] - base["compute_s"], 0.004, rtol=0, atol=1e-12)
    with pytest.raises(InputError, match="overhead_s"):
        SimConfig(workload="digits-cnn", workers=2, trace=CONST, overhead_s=-1.0)


def test_old_calibration_files_still_load(tmp_path: Path) -> None:
    p = tmp_path / "cal.json"
    p.write_text('{"compute_scale": 2.5, "extra_latency_s": 5e-5, "fitted_on": "x"}')
    cal = Calibration.load(p)
    assert (cal.compute_scale, cal.compress_scale, cal.overhead_s) == (2.5, 1.0, 0.0)
    p.write_text(Calibration(2.0, 0.0, "y", 1.5, 0.001).to_json())
    assert Calibration.load(p) == Calibration(2.0, 0.0, "y", 1.5, 0.001)
    p.write_text('{"compute_scale": 2.5, "extra_latency_s": 0, "compress_scale": -1}')
    with pytest.raises(InputError, match="out of range"):
        Calibration.load(p)


def test_trace_is_delayed_and_latency_shifted(tmp_path: Path) -> None:
    spec = "steps:dur_s=4/4,lat_ms=5/10,bw_mbps=20/8,loop=true"
    orig = next(iter(resolve_trace(spec).links.values()))
    path = _adjusted_trace_file(spec, 1e-4, 0.25, 30.0, tmp_path)
    new = next(iter(resolve_trace(path).links.values()))
    for t in (0.0, 0.2, 0.3, 4.1, 4.3, 8.2, 8.3, 17.0, 29.0):
        src = max(t - 0.25, 0.0)  # before the delay: the initial state
        assert new.bandwidth_at(t) == orig.bandwidth_at(src)
        assert new.latency_at(t) == pytest.approx(orig.latency_at(src) + 1e-4)


def test_agreement_mode_follows_the_policy() -> None:
    from realrun.config import RealConfig

    assert not RealConfig(workload="digits-cnn", trace=CONST).agree_each_step()
    fixed = {"density": 0.1, "collective": "allgather"}
    assert not RealConfig(workload="digits-cnn", trace=CONST, policy="fixed",
                          policy_params=fixed).agree_each_step()
    assert RealConfig(workload="digits-cnn", trace=CONST, policy="fixed", policy_params=fixed,
                      agreement="each-step").agree_each_step()
    assert RealConfig(workload="digits-cnn", trace=CONST, policy="dc2-aimd").agree_each_step()
    assert RealConfig(workload="digits-cnn", trace=CONST, policy="fixed", policy_params=fixed,
                      owner_rule="var").agree_each_step()
    with pytest.raises(InputError, match="observations"):
        RealConfig(workload="digits-cnn", trace=CONST, policy="dc2-aimd", agreement="end")


def test_agreement_cost_applies_only_to_runs_that_agreed_each_step() -> None:
    from analysis.validate import sim_config_for

    cal = Calibration(2.0, 0.0, "", 1.5, 0.001, 0.0005)
    meta = _meta("dc2-aimd", {})
    assert sim_config_for({**meta, "agree_each_step": True}, cal).overhead_s == 0.0015
    assert sim_config_for({**meta, "agree_each_step": False}, cal).overhead_s == 0.001
    # Runs written before the field existed: inferred from the configuration.
    assert sim_config_for(meta, cal).overhead_s == 0.0015
    assert sim_config_for(_meta("dense", {}), cal).overhead_s == 0.001


def test_the_real_runs_decision_lag_carries_over_but_not_into_a_replay() -> None:
    """A real run that applied each decision a step late is simulated the same way; a replayed
    schedule already holds the decisions as applied, so it runs without lag; the simulator
    times its own decisions only when asked."""
    from analysis.validate import sim_config_for

    meta = _meta("mpc", {})
    assert sim_config_for(meta).decision_lag == 0  # runs from before the field existed
    meta["config"]["decision_lag"] = 1
    cfg = sim_config_for(meta)
    assert cfg.decision_lag == 1 and not cfg.measure_decisions
    assert sim_config_for(meta, replay="0:1.0").decision_lag == 0
    assert sim_config_for({**meta, "config": {**meta["config"], "use_hook": False}}
                          ).decision_lag == 0
    assert sim_config_for(meta, measure_decisions=True).measure_decisions


def test_validate_can_charge_the_simulated_controllers_own_decision_time(tmp_path: Path) -> None:
    """With ``measure_decisions`` every simulated iteration pays a measured, positive decision
    time, so the prediction can only get slower; without it nothing is charged."""
    from analysis.validate import simulate_like

    meta = _meta("dc2-aimd", {"target_s": 0.01})
    plain, _ = simulate_like(meta)
    timed, _ = simulate_like(meta, measure_decisions=True)
    assert (timed["decide_s"].iloc[1:] > 0).all()
    assert float(timed["iter_s"].sum()) > float(plain["iter_s"].sum())


def test_extra_latency_can_be_held_at_zero() -> None:
    """With the transport calibrated elsewhere, the dense run's communication residual is not
    turned into a latency per term (``fit_extra_latency=False``)."""
    slow = _fake_real("dense", {}, compute_scale=2.0, overhead_s=0.0)
    meta = _meta("dense", {})
    # a residual the simulator cannot know: the fake "real" run's communication 3 ms slower
    slow = slow.assign(comm_s=slow["comm_s"] + 0.003, exposed_comm_s=slow["exposed_comm_s"] + 0.003,
                       iter_s=slow["iter_s"] + 0.003)
    fitted = fit_calibration(slow, meta)
    held = fit_calibration(slow, meta, fit_extra_latency=False)
    assert fitted.extra_latency_s > 1e-3
    assert held.extra_latency_s == 0.0
    assert held.compute_scale == fitted.compute_scale


def test_fit_subtracts_the_least_exposed_time_over_ranks() -> None:
    """Records that hold ``exposed_comm_min_s`` (real runs since 2026-11-26): a rank that
    reached the exchange early waits there for the last one, which the greatest exposed time
    (``exposed_comm_s``) holds; the fit takes the iteration less the least, so that lateness is
    compute (the time until every rank is ready), and recovers the scales; without the column
    (older records) the same runs read the compute short by the lateness."""
    topk = {"density": 0.1, "collective": "allgather"}
    dense = _fake_real("dense", {}, compute_scale=2.0)
    sparse = _fake_real("fixed", topk, compute_scale=2.0, compress_scale=3.0)
    late_s = 0.002

    def skewed(df: Any) -> Any:
        # the true exchange is the least over ranks; the earliest rank waited late_s longer
        return df.assign(exposed_comm_min_s=df["exposed_comm_s"],
                         exposed_comm_s=df["exposed_comm_s"] + late_s,
                         comm_s=df["comm_s"] + late_s,
                         compute_s=df["compute_s"] - late_s)

    cal = fit_calibration(skewed(dense), _meta("dense", {}),
                          compressed=(skewed(sparse), _meta("fixed", topk)),
                          fit_extra_latency=False)
    assert cal.compute_scale == pytest.approx(2.0, rel=1e-9)
    assert cal.compress_scale == pytest.approx(3.0, rel=1e-6)
    assert cal.rank_wait_s == pytest.approx(late_s, rel=1e-9)
    # the extra latency is fitted on the exchange alone: the wait is not a latency
    fitted = fit_calibration(skewed(dense), _meta("dense", {}))
    assert fitted.extra_latency_s == pytest.approx(0.0, abs=1e-9)
    assert fitted.rank_wait_s == pytest.approx(late_s, rel=1e-9)
    old = fit_calibration(skewed(dense).drop(columns="exposed_comm_min_s"), _meta("dense", {}),
                          fit_extra_latency=False)
    assert old.compute_scale < cal.compute_scale
    assert old.rank_wait_s == 0.0
    # a column of NaN (a run whose ranks did not agree it) reads as absent
    nan = skewed(dense).assign(exposed_comm_min_s=float("nan"))
    assert fit_calibration(nan, _meta("dense", {}),
                           fit_extra_latency=False).compute_scale == old.compute_scale
