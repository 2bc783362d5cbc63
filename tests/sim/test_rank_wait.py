"""``SimConfig.rank_wait_s``: the early ranks' wait for the last one at the exchange, booked as
real records book it (in the communication, out of the compute), the iteration unchanged."""

from __future__ import annotations

import numpy as np
import pytest

from sim.errors import InputError
from sim.runner import SimConfig, run_simulation

TRACE = "const:lat_ms=1,bw_mbps=20"


def _run(**kw: object) -> object:
    base = {"workload": "digits-cnn", "workers": 4, "trace": TRACE, "iterations": 12,
            "convergence": "off"}
    base.update(kw)
    return run_simulation(SimConfig(**base))[0]  # type: ignore[arg-type]


@pytest.mark.parametrize("fidelity", ["analytic", "stepwise"])
def test_the_wait_moves_from_compute_to_communication(fidelity: str) -> None:
    kw = {"policy": "fixed", "density": 0.1, "collective": "allgather", "fidelity": fidelity}
    plain = _run(**kw)
    wait = _run(**kw, rank_wait_s=0.001)
    np.testing.assert_array_equal(wait["iter_s"], plain["iter_s"])  # type: ignore[index]
    for col, sign in (("comm_s", 1.0), ("exposed_comm_s", 1.0), ("compute_s", -1.0)):
        np.testing.assert_allclose(wait[col] - plain[col], sign * 0.001,  # type: ignore[index]
                                   rtol=0, atol=1e-12)


def test_never_more_than_the_compute_and_nothing_on_one_rank() -> None:
    plain = _run(policy="dense")
    big = _run(policy="dense", rank_wait_s=10.0)
    np.testing.assert_allclose(big["compute_s"], 0.0, atol=1e-15)  # type: ignore[index]
    np.testing.assert_allclose(big["comm_s"] - plain["comm_s"],  # type: ignore[index]
                               plain["compute_s"], rtol=0, atol=1e-12)  # type: ignore[index]
    one = _run(policy="dense", workers=1)
    one_wait = _run(policy="dense", workers=1, rank_wait_s=0.001)
    assert one.equals(one_wait)  # type: ignore[attr-defined]


def test_a_delay_driven_controller_sees_the_wait() -> None:
    """dc2-pi on a target of communication time: the wait counts against the target, as in a
    real run, so the controller settles at a lower density."""
    kw = {"policy": "dc2-pi", "policy_params": {"target_s": 0.03, "collective": "allgather"},
          "iterations": 60}
    plain = _run(**kw)
    wait = _run(**kw, rank_wait_s=0.004)
    assert float(wait["density"].iloc[30:].mean()) < float(  # type: ignore[index]
        plain["density"].iloc[30:].mean())  # type: ignore[index]


def test_config_round_trip_and_checks() -> None:
    cfg = SimConfig(workload="digits-cnn", workers=4, trace=TRACE)
    assert "rank_wait_s" not in cfg.to_dict()
    set_ = SimConfig(workload="digits-cnn", workers=4, trace=TRACE, rank_wait_s=0.002)
    assert set_.to_dict()["rank_wait_s"] == 0.002
    assert SimConfig.from_dict(set_.to_dict()) == set_
    for bad in (-1e-3, float("nan"), float("inf")):
        with pytest.raises(InputError, match="rank_wait_s"):
            SimConfig(workload="digits-cnn", workers=4, trace=TRACE, rank_wait_s=bad)
