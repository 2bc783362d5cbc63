"""``mpc``'s bandwidth identification step (``identify_sd``): one step ten times denser once the
link monitor's window has not pinned the bandwidth (``bandwidth_log_sd``) for
``identify_every`` observations in a row."""

from __future__ import annotations

import pytest
from test_mpc_identify import assert_single_steps, closed_loop, probes_of

from sim.control import Decision, Observation, make_policy
from sim.control.selector import collective_time_s

_LAT, _BW = 1e-3, 1.25e6


def _obs(step: int, d: Decision, comm_s: float, sd: float, bw: float = _BW / 10.0
         ) -> Observation:
    # The monitor's bandwidth is 10x low, as one its window does not pin can be.
    return Observation(step=step, world_size=2, grad_bytes=38_440, comm_s=comm_s,
                       compress_s=1e-4, compute_s=1.5e-3, latency_s=_LAT,
                       bandwidth_Bps=bw, decision=d, gain=0.05,
                       extra={"iteration_s": 1.6e-3 + comm_s, "split_guessed": 0.0,
                              "bandwidth_log_sd": sd})


def _run(identify_sd: float, sd_until: int, steps: int = 60, sd: float = 50.0,
         identify_every: int = 5, moved: bool = False) -> list[float]:
    """Densities of a closed loop whose monitor window does not pin the bandwidth (log sd
    ``sd``) until ``sd_until``, and pins it (0.1) after; ``moved``: every step at another
    density than the least moves the estimate threefold (the step found it wrong)."""
    p = make_policy("mpc", identify_every=identify_every, identify_sd=identify_sd,
                    target_progress=120.0)

    def next_obs(k: int, d: Decision, comm: float, out: list[float]) -> Observation:
        bw = _BW / (30.0 if moved and sum(x != 0.001 for x in out) % 2 else 10.0)
        return _obs(k, d, comm, sd if k <= sd_until else 0.1, bw)

    return closed_loop(p, steps, next_obs)


def test_off_at_zero_and_never_while_the_window_pins_the_bandwidth() -> None:
    assert set(_run(0.0, 10**9)) == {0.001}
    assert set(_run(1.0, 0)) == {0.001}
    # A window whose log sd is at most the threshold pins it.
    assert set(_run(1.0, 10**9, sd=1.0)) == {0.001}
    # identify_every = 0 turns every identification step off.
    assert set(_run(1.0, 10**9, identify_every=0)) == {0.001}


def test_one_step_ten_times_denser_then_the_plan_resumes() -> None:
    assert_single_steps(_run(1.0, 10**9), 5, 0.01, 5)


def test_a_step_that_confirms_the_estimate_doubles_the_wait_up_to_eight_periods() -> None:
    """The closed loop's estimate never moves: waits of 10, 20, 40 steps after the first,
    then 40 (eight periods of 5) while the plan holds the least density."""
    assert probes_of(_run(1.0, 10**9, steps=100)) == [5, 15, 35, 75]


def test_a_step_that_moves_the_estimate_keeps_the_wait_at_one_period() -> None:
    assert probes_of(_run(1.0, 10**9, steps=40, moved=True))[:4] == [5, 10, 15, 20]


def _after(p: object, steps: int = 3) -> Observation:
    """The observation after ``steps`` decisions of ``p`` on the closed loop's link."""
    obs = Observation(step=0, world_size=2, grad_bytes=38_440)
    for k in range(steps):
        d = p.decide(obs)  # type: ignore[attr-defined]
        comm = collective_time_s(d.collective, _LAT, _BW, 2, 38_440, d.density, d.compressor)
        obs = _obs(k + 1, d, comm, 0.1)
    return obs


def test_only_when_a_faster_link_would_change_the_plan() -> None:
    """At the least density on the closed loop's slow-looking link, a ten times faster one
    changes the plan; a plan with one density and one collective has nothing to change."""
    p = make_policy("mpc", identify_sd=1.0, target_progress=120.0)
    assert p._faster_changes(_after(p), 0.001)
    fixed = make_policy("mpc", identify_sd=1.0, target_progress=120.0, densities="0.001",
                        collective="allgather")
    assert not fixed._faster_changes(_after(fixed), 0.001)


def test_no_step_once_the_window_pins_it() -> None:
    probes = probes_of(_run(1.0, 12))
    assert probes and max(probes) <= 12


@pytest.mark.parametrize(("chosen", "probe"), [
    (0.001, 0.01), (0.003, 0.03), (0.05, 0.5), (0.2, 1.0), (0.5, 1.0),
])
def test_always_the_denser_side(chosen: float, probe: float) -> None:
    """The sparsest grid density ten times denser than the plan's, else the densest denser
    one (the byte term is what the window cannot see)."""
    p = make_policy("mpc", identify_every=3, identify_sd=1.0)
    p._unpinned_run = 3
    p._faster_changes = lambda obs, chosen: True
    assert p._identify(Observation(step=50, world_size=2, grad_bytes=1), chosen) == probe


def test_a_guessed_split_keeps_its_own_step() -> None:
    """Both runs long: the guessed split's step (the cheaper, sparser side) comes first."""
    p = make_policy("mpc", identify_every=3, identify_sd=1.0)
    p._unpinned_run = p._guessed_run = 3
    assert p._identify(Observation(step=50, world_size=2, grad_bytes=1), 0.05) == 0.005


def test_nothing_denser_on_a_dense_plan() -> None:
    p = make_policy("mpc", identify_every=3, identify_sd=1.0)
    p._unpinned_run = 3
    p._faster_changes = lambda obs, chosen: True
    assert p._identify(Observation(step=50, world_size=2, grad_bytes=1), 1.0) is None


@pytest.mark.parametrize("bad", [-0.5, float("nan")])
def test_rejects_bad_values(bad: float) -> None:
    with pytest.raises(ValueError, match="identify_sd"):
        make_policy("mpc", identify_sd=bad)


def test_the_simulator_reports_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every observation after a measured iteration carries the monitor's
    ``bandwidth_log_sd``; a perfect monitor's is 0 (except ``truth-latency``'s, whose
    bandwidth is still the monitor's)."""
    import dataclasses

    import sim.engine as engine
    from sim.runner import SimConfig, run_simulation

    seen: list[float] = []
    real = engine.observation_after

    def spy(*a: object, **k: object) -> Observation:
        obs = real(*a, **k)  # type: ignore[arg-type]
        seen.append(obs.extra["bandwidth_log_sd"])
        return obs

    monkeypatch.setattr(engine, "observation_after", spy)
    cfg = SimConfig(workload="resnet50", workers=8, trace="const:lat_ms=5,bw_gbps=1",
                    policy="fixed", policy_params=(("density", 0.01),), iterations=5)
    out = {}
    for monitor in ("on", "truth", "truth-latency"):
        seen.clear()
        run_simulation(dataclasses.replace(cfg, monitor=monitor))
        out[monitor] = list(seen)
    assert len(out["on"]) == 5 and all(x > 0.0 for x in out["on"])
    assert out["truth"] == [0.0] * 5
    assert out["truth-latency"] == out["on"]
