"""The allgather efficiency fitted on a sparse calibration run's exchange (no processes: a
simulated "real" run at a known efficiency stands in)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from analysis.validate import Calibration, simulate_like
from analysis.validate_allgather import fit_allgather_efficiency, with_allgather_efficiency
from sim.errors import InputError

TOPK = {"density": 0.1, "collective": "allgather"}


def _meta() -> dict[str, Any]:
    return {"source": "real",
            "config": {"workload": "digits-cnn", "nproc": 4, "trace": "const:lat_ms=1,bw_mbps=50",
                       "policy": "fixed", "policy_params": TOPK, "steps": 25, "seed": 0,
                       "bucket_cap_mb": 25.0}}


def _calibration(tmp: Path, eff: float) -> Path:
    path = tmp / f"t{eff}.json"
    path.write_text(json.dumps({"schema": "compctl-transports/1", "transports": {"gloo": {
        "allgather_efficiency": eff, "host_copy_Bps": 0.0, "call_per_tensor": 1,
        "burst_s": 0.001, "burst_bytes": 3028.0}}}))
    return path


def test_recovers_the_efficiency_the_run_was_made_with(tmp_path: Path) -> None:
    cal = Calibration(compute_scale=2.0)
    real, _ = simulate_like(_meta(), cal, fidelity="stepwise", transport="gloo",
                            transport_calibration=str(_calibration(tmp_path, 0.7)))
    # the ranks' lateness is in the greatest exposed time only: the fit reads the least
    late = real.assign(exposed_comm_min_s=real["exposed_comm_s"],
                       exposed_comm_s=real["exposed_comm_s"] + 0.004)
    got = fit_allgather_efficiency(late, _meta(), calibration=cal,
                                   transport_calibration=_calibration(tmp_path, 0.95))
    assert got == pytest.approx(0.7, abs=2e-4)
    # without the least, the lateness reads as a slower allgather
    older = fit_allgather_efficiency(late.drop(columns="exposed_comm_min_s"), _meta(),
                                     calibration=cal,
                                     transport_calibration=_calibration(tmp_path, 0.95))
    assert older < got - 0.02


def test_out_of_range_and_bad_files_are_input_errors(tmp_path: Path) -> None:
    real, _ = simulate_like(_meta(), Calibration(), fidelity="stepwise", transport="gloo",
                            transport_calibration=str(_calibration(tmp_path, 0.7)))
    with pytest.raises(InputError, match="outside"):
        fit_allgather_efficiency(real.assign(exposed_comm_s=real["exposed_comm_s"] * 100),
                                 _meta(), transport_calibration=_calibration(tmp_path, 0.9))
    with pytest.raises(InputError, match="no exchange"):
        fit_allgather_efficiency(real.assign(exposed_comm_s=0.0), _meta(),
                                 transport_calibration=_calibration(tmp_path, 0.9))
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(InputError, match="allgather efficiency"):
        with_allgather_efficiency(tmp_path / "bad.json", "gloo", 0.5, tmp_path / "out.json")
