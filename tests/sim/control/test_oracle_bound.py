"""The oracle is an upper bound: on random traces nothing reaches the target sooner.

Tolerance: the oracle searches piecewise-constant schedules over its density grid and at most
``windows`` windows; a policy free to pick any density at any iteration could in principle beat
such a schedule by a little. Measured here it never does; the bound allows 1%.

Deterministic: the examples are derandomized (the same ones on every run) and the one example
that ever failed is pinned. It failed once (2026-11-26, on a tree with ``mpc``'s bucket-wise
overlap but not yet the oracle's finishing-switch search to any density of the grid plus a
second finishing switch): ``mpc`` held 0.001, then finished at 0.03 and 0.1 and reached the
target at 26.73 s against the oracle's 27.13 s (1.5% faster). With the oracle's search the
oracle takes 26.10 s (``mpc`` 27.40 s). A random draw of four examples per run found it once and
missed it on the next run, which is why the test turned green without a change.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sim.control import policy_info, policy_names
from sim.runner import SimConfig, run_simulation

TARGET = 120.0
ITERATIONS = 400
TOLERANCE = 0.01
GRID = (1.0, 0.5, 0.3, 0.2, 0.1, 0.05, 0.03, 0.02, 0.01, 0.005, 0.003, 0.002, 0.001)


def _tta(trace: str, policy: str, **params: float | str) -> float:
    cfg = SimConfig(workload="resnet50", workers=8, trace=trace, policy=policy,
                    policy_params=tuple(params.items()), iterations=ITERATIONS, monitor="on")
    rec, _ = run_simulation(cfg)
    hit = np.nonzero(rec["progress"].to_numpy() >= TARGET)[0]
    if not len(hit):
        return math.inf
    return float(rec["start_s"].iloc[hit[0]] + rec["iter_s"].iloc[hit[0]])


_steps = st.lists(
    st.tuples(st.floats(1.0, 20.0), st.floats(0.5, 30.0), st.floats(0.5, 25.0)),
    min_size=1, max_size=5,
)


def _trace(steps: list[tuple[float, float, float]]) -> str:
    dur = "/".join(f"{s[0]:.3g}" for s in steps)
    lat = "/".join(f"{s[1]:.3g}" for s in steps)
    bw = "/".join(f"{s[2]:.3g}" for s in steps)
    return f"steps:dur_s={dur},lat_ms={lat},bw_gbps={bw}"


@settings(max_examples=6, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(_steps)
@example([(3.4236519761079522, 1.02, 5.5), (3.4398120321765946, 15.0, 11.843865783172793),
          (18.72936754893995, 11.516995596103914, 6.945822822973901),
          (1.0, 17.813430947039446, 0.5)])
def test_no_fixed_density_or_policy_beats_the_oracle(steps: list[tuple[float, float, float]]) -> None:
    trace = _trace(steps)
    oracle = _tta(trace, "oracle", target_progress=TARGET)
    assert math.isfinite(oracle)
    for d in GRID:
        comp = "none" if d >= 1.0 else "topk"
        assert oracle <= _tta(trace, "fixed", density=d, compressor=comp, collective="auto") * (
            1 + TOLERANCE
        ), f"fixed {d}"
    for name in policy_names():
        if policy_info(name).sim_only:
            continue
        assert oracle <= _tta(trace, name) * (1 + TOLERANCE), name
    # mpc told the target plans a finishing switch (hold a low density, then release its lag).
    assert oracle <= _tta(trace, "mpc", target_progress=TARGET) * (1 + TOLERANCE), "mpc+target"


def test_the_oracle_plans_the_finishing_switch_mpc_found() -> None:
    # seed003-steps, 1,024 workers, digits-cnn's loss-0.5 target: mpc holding 0.001 and then
    # finishing at a higher density beat the window-searched oracle by 12% before the oracle
    # searched finishing switches too.
    from sim.convergence import ConvergenceModel

    target = ConvergenceModel.bundled("digits-cnn").dense_iterations_to(0.5, "loss")
    assert target is not None

    def tta(policy: str) -> float:
        cfg = SimConfig(workload="resnet50", workers=1024, trace="seed003-steps", policy=policy,
                        policy_params=(("target_progress", float(target)),),
                        iterations=int(3 * target), monitor="on")
        rec, _ = run_simulation(cfg)
        hit = np.nonzero(rec["progress"].to_numpy() >= target)[0]
        return float(rec["start_s"].iloc[hit[0]] + rec["iter_s"].iloc[hit[0]])

    assert tta("oracle") <= tta("mpc")
