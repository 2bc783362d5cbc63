"""DC2-style repairs (reachable target, informed start, symmetric AIMD) and MOO's budget."""

from __future__ import annotations

from _control_helpers import BAD_BANDWIDTH, GOOD, densities, run_closed_loop

from sim.control import make_policy

# 64 workers, 50 ms latency: even density 0.001 takes far longer than 0.5 x 0.2 s of compute.
LATENCY_BOUND = (50e-3, 25e9 / 8)


def _const(link: tuple[float, float]):  # noqa: ANN202 - tiny local helper
    return lambda k: link


def test_unreachable_target_does_not_pin_aimd_or_pi_at_min_density() -> None:
    for name in ("dc2-aimd", "dc2-pi"):
        d = densities(run_closed_loop(make_policy(name), _const(LATENCY_BOUND), 150))
        assert min(d[50:]) > 0.001 * 1.5, name


def test_no_dense_start_on_a_link_known_slow() -> None:
    for name in ("dc2-aimd", "dc2-pi"):
        d = densities(run_closed_loop(make_policy(name), _const(BAD_BANDWIDTH), 6))
        assert d[0] == 1.0  # nothing known yet
        assert max(d[2:]) < 0.3, (name, d)


def test_an_explicit_initial_density_is_kept() -> None:
    p = make_policy("dc2-aimd", initial_density=1.0, patience=100)
    d = densities(run_closed_loop(p, _const(BAD_BANDWIDTH), 6))
    assert d == [1.0] * 6


def test_aimd_increase_mirrors_its_decrease() -> None:
    # Very fast link: the delay is far below target, so every gated step is an increase.
    fast = (1e-6, 1e12)
    p = make_policy("dc2-aimd", initial_density=0.01, patience=1)
    d = densities(run_closed_loop(p, _const(fast), 4))
    assert d[1] == 0.02 and d[2] == 0.04
    q = make_policy("dc2-aimd", initial_density=0.01, patience=1, symmetric=False)
    assert densities(run_closed_loop(q, _const(fast), 3))[1] == 0.02  # 0.01 + 0.01


def test_moo_explores_at_most_a_tenth_of_the_run() -> None:
    p = make_policy("moo", min_explore_interval=0)
    flips = lambda k: GOOD if (k // 40) % 2 == 0 else BAD_BANDWIDTH  # noqa: E731
    phases = []
    orig = p.decide

    def spy(obs):  # type: ignore[no-untyped-def]
        d = orig(obs)
        phases.append(p.phase)  # type: ignore[attr-defined]
        return d

    p.decide = spy  # type: ignore[method-assign]
    run_closed_loop(p, flips, 1000)
    exploring = sum(ph != "exploit" for ph in phases)
    assert exploring <= 0.1 * 1000 + 1
    assert exploring > 30  # it did re-explore after the first choice
