"""The allgather efficiency fitted on a separate sparse calibration run's exchange.

A transport microbenchmark (``compctl calibrate --measure --allgather``) fits gloo's allgather
efficiency on its large transfers (hundreds of ms at the calibration rates), and that one
number then prices training's few-KB sparse exchanges. Through tbf-shaped veth links the large
transfers vary from run to run more than the small ones do: the 2-rank fit read 0.655-0.682 in
four netns rounds and 0.782-0.806 in two others, and a 2-rank top-k iteration priced with the
high value came out 15-29% short. :func:`fit_allgather_efficiency` fits the efficiency instead
on a *separate* calibration run of the sparse policy (a constant trace at a rate no validated
run uses): the efficiency at which the simulated run's exchange equals the real run's, both as
medians of the steady iterations. The real exchange is the least exposed communication over
ranks (``exposed_comm_min_s``: the last rank to arrive waits for nobody), so the ranks'
lateness is not read as transport time; records without it give the greatest.
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sim.errors import InputError

from .validate import Calibration, simulate_like

__all__ = ["fit_allgather_efficiency", "with_allgather_efficiency"]

#: The efficiencies the fit searches between.
LOW, HIGH = 0.05, 1.0


def with_allgather_efficiency(calibration: str | Path, transport: str, efficiency: float,
                              out: str | Path) -> Path:
    """Write ``calibration`` (a transport calibration file, JSON) to ``out`` with
    ``transport``'s allgather efficiency set to ``efficiency``; returns ``out``."""
    try:
        doc = json.loads(Path(calibration).read_text())
        doc["transports"][transport]["allgather_efficiency"] = float(efficiency)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"transport calibration {calibration}: cannot set the allgather "
                         f"efficiency of {transport!r}: {exc}") from None
    path = Path(out)
    path.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    return path


def _exchange_s(records: pd.DataFrame, skip: int) -> float:
    steady = records[records["iteration"] >= skip]
    exposed = steady["exposed_comm_s"].to_numpy(float)
    if "exposed_comm_min_s" in steady:
        least = steady["exposed_comm_min_s"].to_numpy(float)
        exposed = np.where(np.isfinite(least), np.minimum(least, exposed), exposed)
    return float(np.nanmedian(exposed))


def fit_allgather_efficiency(
    real: pd.DataFrame,
    meta: dict[str, Any],
    *,
    transport_calibration: str | Path,
    calibration: Calibration | None = None,
    transport: str = "gloo",
    fidelity: str = "stepwise",
    skip: int = 3,
    tolerance: float = 1e-4,
) -> float:
    """The allgather efficiency of ``transport`` at which the simulation of the sparse
    calibration run (``real``, ``meta``: a policy whose exchange is an allgather, on a constant
    trace) has the real run's median exchange time (module docstring). ``calibration``: compute
    and compression constants of the simulated side (the ranks' wait is left out: the exchange
    is compared alone). Bisection on [0.05, 1] to ``tolerance``; :class:`InputError` when the
    run has no exchange or no efficiency in that range reaches it."""
    target = _exchange_s(real, skip)
    if not (math.isfinite(target) and target > 0.0):
        raise InputError("cannot fit the allgather efficiency: the run has no exchange time")
    cal = Calibration() if calibration is None else calibration
    cal = Calibration(cal.compute_scale, cal.extra_latency_s, cal.fitted_on, cal.compress_scale,
                      cal.overhead_s, cal.agreement_s, 0.0)
    with tempfile.TemporaryDirectory(prefix="compctl-allgather-fit-") as tmp:

        def exchange_at(eff: float) -> float:
            path = with_allgather_efficiency(transport_calibration, transport, eff,
                                             Path(tmp) / "transport.json")
            sim, _ = simulate_like(meta, cal, fidelity=fidelity, transport=transport,
                                   transport_calibration=str(path))
            return _exchange_s(sim, skip)

        lo, hi = LOW, HIGH
        if exchange_at(hi) > target or exchange_at(lo) < target:
            raise InputError(
                f"cannot fit the allgather efficiency: the real exchange ({target * 1e3:.3f} ms) "
                f"is outside what efficiencies {LOW}-{HIGH} give")
        while hi - lo > tolerance:  # the exchange takes longer at a lower efficiency
            mid = 0.5 * (lo + hi)
            if exchange_at(mid) > target:
                lo = mid
            else:
                hi = mid
    return 0.5 * (lo + hi)
