"""DS-Sync in the simulator: g = 1 is plain allreduce, groups are priced as m-rank collectives."""

from __future__ import annotations

import subprocess
import sys

import hypothesis.strategies as st
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings

from sim.collectives import closed_form as cf
from sim.control.registry import policy_names, register_policy, unregister_policy
from sim.control.types import Decision, Observation
from sim.errors import InputError
from sim.runner import SimConfig, run_simulation

_BASE = {"workload": "resnet50", "trace": "const:lat_ms=1,bw_gbps=10", "iterations": 12}
_SYNC_COLS = ["sync", "groups", "shuffle_every"]


def _run(**kw: object) -> tuple[pd.DataFrame, dict[str, object]]:
    return run_simulation(SimConfig.from_dict({**_BASE, **kw}))


@settings(max_examples=8, deadline=None)
@given(
    st.sampled_from(["ring", "tree", "ps"]),
    st.sampled_from([2, 4, 8]),
    st.sampled_from(["analytic", "stepwise"]),
    st.integers(1, 5),
)
def test_one_group_equals_plain_allreduce(coll: str, n: int, fidelity: str, k: int) -> None:
    plain, pmeta = _run(workers=n, collective=coll, fidelity=fidelity)
    ds, dmeta = _run(
        workers=n, collective=coll, fidelity=fidelity, sync="ds-sync", groups=1, shuffle_every=k
    )
    assert list(ds["groups"]) == [1] * len(ds)
    pd.testing.assert_frame_equal(plain, ds.drop(columns=_SYNC_COLS))
    assert "consensus" in dmeta["convergence"]  # type: ignore[operator]


def test_plain_runs_keep_their_columns_and_config() -> None:
    recs, meta = _run(workers=4)
    assert not set(_SYNC_COLS) & set(recs.columns)
    cfg = meta["config"]
    assert isinstance(cfg, dict)
    assert not set(_SYNC_COLS) & set(cfg)


@pytest.mark.parametrize("coll", ["ring", "tree", "rhd", "ps"])
def test_groups_price_an_m_rank_collective(coll: str) -> None:
    n, g = 16, 4
    recs, meta = _run(
        workers=n, collective=coll, density=1.0, sync="ds-sync", groups=g, shuffle_every=2
    )
    plain, _ = _run(workers=n, collective=coll, density=1.0)
    m = n // g
    # Per bucket: closed form over m ranks instead of n, on the same constant link.
    per_bucket = meta["workload"]["bucket_numel"]  # type: ignore[index]
    lat, bw = 1e-3, 10e9 / 8
    want = sum(cf.collective_terms(coll, m, 4.0 * b).time_s(lat, bw) for b in per_bucket)
    assert recs["comm_s"].iloc[0] == pytest.approx(want, rel=1e-9)
    assert (recs["comm_s"] <= plain["comm_s"] + 1e-15).all()
    assert list(recs["sync"].unique()) == ["ds-sync"]
    # Consensus costs progress: never more than plain, strictly less after some steps.
    assert (recs["progress"].to_numpy() <= plain["progress"].to_numpy() + 1e-12).all()


def test_groups_of_one_send_nothing() -> None:
    recs, _ = _run(workers=4, sync="ds-sync", groups=4)
    assert (recs["comm_s"] == 0).all() and (recs["bytes_sent"] == 0).all()


def test_same_seed_same_records() -> None:
    a, _ = _run(workers=8, sync="ds-sync", groups=2, shuffle_every=3, seed=4)
    b, _ = _run(workers=8, sync="ds-sync", groups=2, shuffle_every=3, seed=4)
    pd.testing.assert_frame_equal(a, b)


@pytest.mark.parametrize(
    ("kw", "msg"),
    [
        ({"sync": "ds-sync", "groups": 3}, "must divide"),
        ({"sync": "ds-sync", "groups": 0}, "groups must be"),
        ({"sync": "ds-sync", "groups": 2, "shuffle_every": 0}, "shuffle_every must be"),
        ({"groups": 2}, "needs sync ds-sync"),
    ],
)
def test_config_rejects(kw: dict[str, object], msg: str) -> None:
    with pytest.raises(InputError, match=msg):
        SimConfig.from_dict({**_BASE, "workers": 8, **kw})


def test_decision_validates_sync_fields() -> None:
    with pytest.raises(ValueError):
        Decision(groups=2)
    with pytest.raises(ValueError):
        Decision(sync="ds-sync", groups=0)
    with pytest.raises(ValueError):
        Decision(sync="ds-sync", groups=2, shuffle_every=0)
    d = Decision(sync="ds-sync", groups=2)
    assert d.grouped and not Decision().grouped
    assert d.for_bucket(0) == d


@pytest.mark.parametrize(
    "extra",
    [
        ["--sync", "ds-sync", "--groups", "3"],
        ["--sync", "ds-sync", "--groups", "0"],
        ["--sync", "ds-sync", "--groups", "2", "--shuffle-every", "0"],
        ["--sync", "ds-sync", "--groups", "two"],
        ["--groups", "2"],
        ["--sync", "gossip"],
    ],
)
def test_cli_bad_sync_input_is_one_line_exit_2(extra: list[str]) -> None:
    cmd = [sys.executable, "-m", "sim.entry", "sim", "--workload", "resnet50", "--workers", "8",
           "--trace", "const:lat_ms=1,bw_gbps=10", "--iterations", "2", "--quiet", *extra]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert r.stderr.startswith("compctl: error:")


def test_records_progress_is_finite_and_monotone() -> None:
    recs, _ = _run(workers=8, sync="ds-sync", groups=2, shuffle_every=4)
    p = recs["progress"].to_numpy()
    assert np.all(np.isfinite(p)) and np.all(np.diff(p) >= 0)


class _Alternating:
    """Test-only controller that chooses DS-Sync itself on odd steps."""

    def reset(self, *, seed: int) -> None:
        pass

    def decide(self, obs: Observation) -> Decision:
        if obs.step % 2:
            return Decision("none", 1.0, "ring", sync="ds-sync", groups=4, shuffle_every=1)
        return Decision("none", 1.0, "ring")


def test_a_controller_may_choose_ds_sync_itself() -> None:
    name = "test-ds-sync-alternating"
    register_policy(name, "test only: DS-Sync on odd steps")(_Alternating)
    try:
        recs, _ = _run(workers=8, policy=name, iterations=6)
    finally:
        unregister_policy(name)
    assert name not in policy_names()
    assert list(recs["sync"]) == ["allreduce", "ds-sync"] * 3
    assert list(recs["groups"]) == [1, 4] * 3
    comm = recs["comm_s"].to_numpy()
    assert (comm[1::2] < comm[0::2]).all()  # groups of 2 are cheaper than 8 ranks


def test_validate_simulates_a_real_ds_sync_run_with_its_groups() -> None:
    from analysis.validate import sim_config_for

    meta = {
        "source": "real",
        "config": {"workload": "digits-mlp", "nproc": 4, "policy": "dense", "policy_params": {},
                   "trace": "const:lat_ms=1,bw_gbps=1", "steps": 5, "seed": 2,
                   "sync": "ds-sync", "groups": 2, "shuffle_every": 8},
    }
    cfg = sim_config_for(meta)
    assert (cfg.sync, cfg.groups, cfg.shuffle_every) == ("ds-sync", 2, 8)
