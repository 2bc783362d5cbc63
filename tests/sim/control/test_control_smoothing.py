"""dc2-pi's smoothed delay signal: it settles under noise, still follows a step of the link,
and ``smoothing=0`` is the unsmoothed controller decision for decision."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _control_helpers import BAD_BANDWIDTH, GOOD, densities, run_closed_loop, step_link

from sim.control import Observation, make_policy

TARGET_S = 0.03


def _noisy_loop(policy: object, steps: int, noise: float, seed: int = 0) -> list[float]:
    """Densities of ``policy`` on a plant whose delay grows as density**0.9 with log-normal
    noise of ``noise`` per observation (what a shared machine's real runs show)."""
    rng = np.random.default_rng(seed)
    obs = Observation(step=0, world_size=4, grad_bytes=1_000_000)
    out = []
    for k in range(steps):
        d = policy.decide(obs)  # type: ignore[attr-defined]
        out.append(d.density)
        comm = 0.06 * (d.density / 0.1) ** 0.9 * math.exp(rng.normal(0.0, noise))
        obs = Observation(step=k + 1, world_size=4, grad_bytes=1_000_000, comm_s=comm,
                          compute_s=0.02, decision=d)
    return out


def test_smoothing_zero_is_the_unsmoothed_controller() -> None:
    kw = {"target_s": TARGET_S, "initial_density": 0.1}
    plain = _noisy_loop(make_policy("dc2-pi", **kw), 200, 0.1)
    zero = _noisy_loop(make_policy("dc2-pi", smoothing=0.0, **kw), 200, 0.1)
    assert plain == zero


def test_the_smoothed_controller_settles_under_noise_near_the_target() -> None:
    kw = {"target_s": TARGET_S, "initial_density": 0.1}
    # the density whose noiseless delay is the target
    fixed_point = 0.1 * (TARGET_S / 0.06) ** (1 / 0.9)
    for seed in range(3):
        plain = np.array(_noisy_loop(make_policy("dc2-pi", **kw), 300, 0.1, seed))
        smooth = np.array(_noisy_loop(make_policy("dc2-pi", smoothing=0.8, **kw), 300, 0.1,
                                      seed))
        changes_plain = int((np.diff(plain[100:]) != 0).sum())
        changes_smooth = int((np.diff(smooth[100:]) != 0).sum())
        assert changes_smooth * 3 <= changes_plain
        assert abs(math.log(np.median(smooth[100:]) / fixed_point)) < 0.2


def test_the_smoothed_controller_still_follows_a_step_of_the_link() -> None:
    start, end, total, k = 60, 160, 260, 10
    d = np.array(densities(run_closed_loop(make_policy("dc2-pi", seed=1, smoothing=0.8),
                                           step_link(GOOD, BAD_BANDWIDTH, start, end), total)))
    first_drop = next(i for i in range(start, end) if d[i] < d[start - 1])
    assert first_drop - start <= k
    assert d[start + 2 * k:end].mean() < 0.75 * d[start - 30:start].mean()
    first_rise = next(i for i in range(end, total) if d[i] > d[end - 1])
    assert first_rise - end <= k


@pytest.mark.parametrize("params", [{"smoothing": 1.0}, {"smoothing": -0.1}, {"jump": 0.0}])
def test_bad_smoothing_parameters_are_refused(params: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        make_policy("dc2-pi", **params)
