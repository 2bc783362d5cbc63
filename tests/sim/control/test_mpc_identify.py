"""``mpc``'s identification step (``identify_every``): one step at another density once the
link monitor's latency/bandwidth split has been a guess for that many observations."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from sim.control import Decision, Observation, make_policy
from sim.control.selector import collective_time_s

_LAT, _BW = 1e-3, 1.25e6


def _obs(step: int, d: Decision, comm_s: float, guessed: bool) -> Observation:
    # The monitor's bandwidth is 10x low (the split it guessed), as an unresolved one can be.
    return Observation(step=step, world_size=2, grad_bytes=38_440, comm_s=comm_s,
                       compress_s=1e-4, compute_s=1.5e-3, latency_s=_LAT,
                       bandwidth_Bps=_BW / 10.0, decision=d, gain=0.05,
                       extra={"iteration_s": 1.6e-3 + comm_s,
                              "split_guessed": 1.0 if guessed else 0.0})


def closed_loop(p: Any, steps: int,
                next_obs: Callable[[int, Decision, float, list[float]], Observation]
                ) -> list[float]:
    """Densities ``p`` decides over ``steps`` on a 2-rank link of 1 ms and 10 Mbit/s: each
    decision's collective is timed on it and ``next_obs(step, decision, comm_s, densities so
    far)`` is what ``p`` sees next."""
    obs = Observation(step=0, world_size=2, grad_bytes=38_440)
    out: list[float] = []
    for k in range(steps):
        d = p.decide(obs)
        out.append(d.density)
        comm = collective_time_s(d.collective, _LAT, _BW, 2, 38_440, d.density, d.compressor)
        obs = next_obs(k + 1, d, comm, out)
    return out


def _run(identify_every: int, guessed_until: int, steps: int = 60) -> list[float]:
    """Densities of a closed loop whose monitor guesses the split until ``guessed_until``."""
    p = make_policy("mpc", identify_every=identify_every, target_progress=120.0)
    return closed_loop(p, steps, lambda k, d, comm, _: _obs(k, d, comm, k <= guessed_until))


def test_twenty_by_default_off_at_zero_and_never_without_a_guessed_split() -> None:
    assert make_policy("mpc").identify_every == 20
    assert set(_run(0, 10**9)) == {0.001}
    assert set(_run(5, 0)) == {0.001}


def probes_of(got: list[float], plan: float = 0.001) -> list[int]:
    """The steps of a closed loop's densities that ran another density than the plan's."""
    return [k for k, x in enumerate(got) if x != plan]


def assert_single_steps(got: list[float], first: int, density: float, period: int) -> None:
    """Identification steps of a loop whose plan is 0.001: the first at ``first``, each at
    ``density`` and followed by the plan again, at least ``period`` steps apart."""
    probes = probes_of(got)
    assert probes[0] == first and all(got[k] == density for k in probes)
    assert all(got[k + 1] == 0.001 for k in probes if k + 1 < len(got))
    assert all(b - a >= period for a, b in zip(probes, probes[1:], strict=False))


def test_one_step_ten_times_denser_after_the_run_of_guesses_then_the_plan_resumes() -> None:
    # The fifth guessed observation arrives before step 5's decision.
    assert_single_steps(_run(5, 10**9), 5, 0.01, 5)


def test_no_step_once_the_split_is_resolved() -> None:
    probes = probes_of(_run(5, 12))
    assert probes and max(probes) <= 12


def test_a_guessed_run_shorter_than_the_period_never_probes() -> None:
    assert set(_run(20, 19)) == {0.001}


@pytest.mark.parametrize(("chosen", "probe"), [
    (0.001, 0.01), (0.003, 0.03), (0.05, 0.005), (0.5, 0.05), (1.0, 0.1), (0.02, 0.002),
])
def test_the_cheaper_side_first(chosen: float, probe: float) -> None:
    """The densest grid density ten times sparser than the plan's, else the sparsest ten
    times denser."""
    p = make_policy("mpc", identify_every=3)
    p._guessed_run = 3
    assert p._identify(Observation(step=50, world_size=2, grad_bytes=1), chosen) == probe


def test_nothing_to_probe_on_a_grid_without_a_far_density() -> None:
    p = make_policy("mpc", identify_every=3, densities="0.01,0.02")
    p._guessed_run = 3
    assert p._identify(Observation(step=50, world_size=2, grad_bytes=1), 0.01) is None


@pytest.mark.parametrize("bad", [-1, True])
def test_rejects_bad_values(bad: object) -> None:
    with pytest.raises(ValueError):
        make_policy("mpc", identify_every=bad)


def test_a_simulated_walk_resolves_the_split_within_a_few_steps() -> None:
    """A latency-bound walk where, without the step, the split stays a guess for most of 150
    steps (one collective shape at the least density): with ``identify_every=5`` it is
    resolved within ten steps and stays so."""
    from sim.runner import SimConfig, run_simulation

    trace = ("walk:seed=9952,lat_ms=15,bw_gbps=1,bandwidth_sigma=0.35,lat_sigma_ms=3,"
             "min_latency_ms=5,dt_s=0.25,duration_s=1800")

    def guesses(params: tuple[tuple[str, object], ...]) -> int:
        cfg = SimConfig(workload="resnet50", workers=64, trace=trace, policy="mpc",
                        policy_params=params, iterations=150)
        rec, _ = run_simulation(cfg)
        return int((rec["est_split"] == "guess").sum())

    assert guesses((("identify_every", 0),)) > 100
    assert guesses((("identify_every", 5),)) <= 10
