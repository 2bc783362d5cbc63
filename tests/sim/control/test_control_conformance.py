"""One conformance test over every registered policy: valid decisions, determinism, purity."""

from __future__ import annotations

import inspect
import math
import random
import time
from typing import Any

import numpy as np
import pytest
from _control_helpers import BAD_BANDWIDTH, GOOD, run_closed_loop, step_link

from sim.compress.spec import check_compatible, get_spec
from sim.control import COLLECTIVES, Decision, make_policy, policy_info, policy_names
from sim.control.selector import collective_cost_terms
from sim.errors import InputError

LINK = step_link(GOOD, BAD_BANDWIDTH, 30, 70)
STEPS = 120


class FakeOracleContext:
    """Prices a decision with the cost model on the step link (the oracle's future)."""

    workload_grad_bytes = 100_000_000
    world_size = 64

    def __init__(self) -> None:
        self.calls = 0

    def iteration_time_s(self, decision: Decision, start_s: float) -> float:
        self.calls += 1
        lat, bw = LINK(int(start_s / 0.25))
        terms = collective_cost_terms(
            decision.collective, self.world_size, self.workload_grad_bytes, decision.density,
            decision.compressor,
        )
        return 0.2 + terms.time_s(lat, bw)

    def segment_s(self, t_s: float) -> tuple[float, float]:
        """The constant link state holding at ``t_s`` (the step link changes at steps 30 and
        70 of 0.25 s), so the oracle reuses a price within one state as it does on real
        traces."""
        k = int(t_s / 0.25)
        if k < 30:
            return 0.0, 7.5
        return (7.5, 17.5) if k < 70 else (17.5, math.inf)


def _build(name: str, seed: int) -> Any:
    policy = make_policy(name, seed=seed)
    if policy_info(name).sim_only:
        policy.bind_oracle(FakeOracleContext())  # type: ignore[attr-defined]
    return policy


def _grad_norm(k: int) -> float:
    return 10.0 / (1 + k // 40) + 0.01 * (k % 3)


@pytest.mark.parametrize("name", policy_names())
def test_decisions_are_valid(name: str) -> None:
    steps = run_closed_loop(_build(name, 3), LINK, STEPS, grad_norm_at=_grad_norm)
    for s in steps:
        d = s.decision
        assert isinstance(d, Decision)
        assert 0.0 < d.density <= 1.0
        assert d.collective in COLLECTIVES
        get_spec(d.compressor)  # known compressor
        check_compatible(d.compressor, d.collective)


@pytest.mark.parametrize("name", policy_names())
def test_same_observations_same_decisions(name: str) -> None:
    a = run_closed_loop(_build(name, 7), LINK, STEPS, grad_norm_at=_grad_norm)
    b = run_closed_loop(_build(name, 7), LINK, STEPS, grad_norm_at=_grad_norm)
    assert [s.decision for s in a] == [s.decision for s in b]


@pytest.mark.parametrize("name", policy_names())
def test_reset_restores_initial_behaviour(name: str) -> None:
    policy = _build(name, 5)
    first = [s.decision for s in run_closed_loop(policy, LINK, 60, grad_norm_at=_grad_norm)]
    policy.reset(seed=5)
    again = [s.decision for s in run_closed_loop(policy, LINK, 60, grad_norm_at=_grad_norm)]
    assert first == again


def _forbid_in_control(
    monkeypatch: pytest.MonkeyPatch, module: Any, attr: str, violations: list[str]
) -> None:
    """Make ``module.attr`` raise when called from sim.control code (other callers, such as
    logging or pytest itself, are passed through), and note the call in ``violations`` (so a
    policy that swallows the error is caught too)."""
    original = getattr(module, attr)

    def guard(*args: Any, **kwargs: Any) -> Any:
        caller = inspect.currentframe().f_back  # type: ignore[union-attr]
        name = caller.f_globals.get("__name__", "") if caller is not None else ""
        if name.startswith("sim.control") or name.startswith("_control_"):
            violations.append(f"{module.__name__}.{attr} called from {name}")
            raise AssertionError(violations[-1])
        return original(*args, **kwargs)

    monkeypatch.setattr(module, attr, guard)


_FORBIDDEN = [
    (time, "time"),
    (time, "time_ns"),
    (time, "monotonic"),
    (time, "perf_counter"),
    (random, "random"),
    (random, "randint"),
    (random, "uniform"),
    (random, "choice"),
    (random, "gauss"),
    (np.random, "rand"),
    (np.random, "random"),
    (np.random, "randn"),
    (np.random, "randint"),
    (np.random, "normal"),
    (np.random, "uniform"),
    (np.random, "choice"),
    (np.random, "seed"),
]


def _forbid_all(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    violations: list[str] = []
    for module, attr in _FORBIDDEN:
        _forbid_in_control(monkeypatch, module, attr, violations)
    return violations


@pytest.mark.parametrize("name", policy_names())
def test_no_wall_clock_or_global_rng(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    violations = _forbid_all(monkeypatch)
    steps = run_closed_loop(_build(name, 11), LINK, STEPS, grad_norm_at=_grad_norm)
    assert len(steps) == STEPS
    assert violations == []


def test_control_code_binds_no_clock_or_rng_function_by_name() -> None:
    """``from time import monotonic`` would slip past the guard above, which patches the module
    attribute: control code must reach those functions through their module."""
    import ast
    from pathlib import Path

    import sim.control

    forbidden = {mod.__name__: {a for m, a in _FORBIDDEN if m is mod} for mod, _ in _FORBIDDEN}
    found: list[str] = []
    for path in sorted(Path(sim.control.__file__).parent.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module in forbidden:
                bad = [a.name for a in node.names if a.name in forbidden[node.module] | {"*"}]
                found += [f"{path.name}:{node.lineno}: from {node.module} import {b}" for b in bad]
            elif isinstance(node, ast.ImportFrom) and node.module == "numpy":
                found += [f"{path.name}:{node.lineno}: from numpy import random"
                          for a in node.names if a.name == "random"]
    assert found == []


def test_the_purity_guard_catches_control_code(monkeypatch: pytest.MonkeyPatch) -> None:
    violations = _forbid_all(monkeypatch)
    namespace: dict[str, Any] = {"__name__": "sim.control.fake", "time": time, "np": np}
    exec("def bad():\n    return time.monotonic()\n", namespace)
    with pytest.raises(AssertionError, match="monotonic"):
        namespace["bad"]()
    exec("def bad_rng():\n    return np.random.rand()\n", namespace)
    with pytest.raises(AssertionError, match="rand"):
        namespace["bad_rng"]()
    assert len(violations) == 2


def test_every_policy_has_a_description_and_keyword_parameters() -> None:
    for name in policy_names():
        info = policy_info(name)
        assert info.description and "\n" not in info.description
        sig = inspect.signature(info.factory)
        assert all(p.kind is p.KEYWORD_ONLY for p in sig.parameters.values())


def test_oracle_refuses_to_run_unbound() -> None:
    policy = make_policy("oracle")
    from sim.control import Observation

    with pytest.raises(InputError, match="only inside the simulator"):
        policy.decide(Observation(step=0, world_size=4, grad_bytes=1000))
    assert policy_info("oracle").sim_only
    assert not policy_info("dc2-aimd").sim_only


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("dc2-aimd", {"min_density": 0.5, "max_density": 0.1}),
        ("dc2-vegas", {"low_band": 0.5, "high_band": 0.2}),
        ("dc2-pi", {"ki": 0.0}),
        ("dc2-pi", {"smoothing": 1.0}),
        ("dc2-budget", {"budget_s": -1.0}),
        ("fixed", {"compressor": "topk", "collective": "ring"}),
        ("fixed", {"compressor": "nope"}),
        ("dense", {"collective": "allgatherx"}),
        ("moo", {"candidates": "0.1"}),
        ("bandit-ucb", {"arms": "0,0.5"}),
        ("accordion", {"critical_density": 0.01, "normal_density": 0.1}),
    ],
)
def test_bad_parameters_are_input_errors(name: str, params: dict[str, Any]) -> None:
    with pytest.raises(InputError, match=name):
        make_policy(name, **params)
