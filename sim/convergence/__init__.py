"""Convergence model: compression decisions -> training progress -> predicted loss and accuracy.

Progress is counted in *dense-iteration equivalents*: after ``t`` iterations a compressed run has
made progress ``p_t`` if its loss equals the dense run's loss after ``p_t`` iterations. The dense
run's curve comes from a gradient trace (:mod:`traces.gradtrace`), so predicted loss and accuracy
are that curve read at ``p_t``; a dense schedule gives ``p_t = t`` and reproduces it exactly.

Modules:

- :mod:`.progress`: the model's maths (the progress recursion, reading targets off curves);
  its docstring states the model.
- :mod:`.params`: calibrated parameters, a prediction, a real run's curve.
- :mod:`.model`: :class:`ConvergenceModel` (gains from the trace, dense curves, bundled models).
- :mod:`.calibration`: :func:`calibrate`, fitting the parameters to real runs.
- :mod:`.simulator`: what the simulator calls (per-step progress, record columns, time to target).

Pure numpy/scipy: no SimPy, torch or pandas.
"""

from __future__ import annotations

from .calibration import calibrate
from .model import PARAMS_DIR, ConvergenceModel
from .params import ConvergenceParams, Prediction, RealCurve
from .progress import iterations_to_target_curve
from .simulator import (
    annotate_records,
    convergence_columns,
    progress_per_step,
    time_to_target_s,
    trace_for_profile,
)

__all__ = [
    "ConvergenceParams",
    "ConvergenceModel",
    "Prediction",
    "RealCurve",
    "calibrate",
    "iterations_to_target_curve",
    "progress_per_step",
    "annotate_records",
    "trace_for_profile",
    "convergence_columns",
    "time_to_target_s",
    "PARAMS_DIR",
]
