"""One controller world: every registered policy, run through the simulator and through the real
hook (2 gloo CPU ranks, a few steps, the same trace), takes the same decisions for the same
observations.

Both worlds build the controller and its observations through :mod:`sim.control.world`. Each
world's (observation, decision) sequence is recorded; replaying one world's observations into a
controller built the other world's way (``SimConfig`` + the engine's call, ``RealConfig`` + the
worker's call) must give back that world's decisions, decision for decision. The two ranks must
decide alike, and the observations of both worlds carry the same measured fields.

One spawn runs every policy (module fixture); policies marked ``sim_only`` (the oracle reads
the simulator's future) are left out of the real world.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from _spawn import run_ranks
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from sim.config import SimConfig
from sim.control.registry import policy_info, policy_names
from sim.control.types import Decision, Observation
from sim.control.world import make_controller, reads_observations

WORKLOAD = "digits-mlp"
TRACE = "const:lat_ms=0.2,bw_gbps=10"
SEED = 11
STEPS = 5  # the first is the hook's plain-allreduce warm-up

#: Fields every observation after a measured iteration carries, in both worlds.
MEASURED = ("comm_s", "compress_s", "compute_s", "gain", "decision")


class Recorder:
    """Wraps a controller; logs every (observation, decision) it is asked for."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.log: list[tuple[Observation, Decision]] = []

    def reset(self, *, seed: int) -> None:
        self.inner.reset(seed=seed)

    def decide(self, obs: Observation) -> Decision:
        d = self.inner.decide(obs)
        self.log.append((obs, d))
        return d

    def __getattr__(self, name: str) -> Any:  # bind_progress, bind_oracle, chooses_sync, ...
        return getattr(self.__dict__["inner"], name)


def _policies() -> list[str]:
    """Every built-in policy that runs in both worlds. (Policies other tests register for a
    while are left out, since the spawned ranks do not have them; plugins are covered by
    ``test_plugins.py``.)"""
    return [p for p in policy_names() if not policy_info(p).sim_only
            and policy_info(p).factory.__module__.startswith("sim.control.policies.")]


def _real_config(policy: str, params: dict[str, Any] | None = None, lag: int = 0) -> Any:
    from realrun.config import RealConfig

    return RealConfig(workload=WORKLOAD, nproc=2, policy=policy, policy_params=params or {},
                      trace=TRACE, steps=STEPS, seed=SEED, emulation="hook", decision_lag=lag)


def _sim_config(policy: str, params: dict[str, Any] | None = None, lag: int = 0) -> SimConfig:
    return SimConfig(workload=WORKLOAD, workers=2, trace=TRACE, policy=policy,
                     policy_params=params or {}, iterations=STEPS, seed=SEED, convergence="off",
                     decision_lag=lag)


def _real_rank(rank: int, world: int, policies: list[str],
               params: dict[str, dict[str, Any]] | None = None,
               plugins: tuple[str, ...] = (), lag: int = 0) -> dict[str, Any]:
    """Every policy of ``policies`` through the real hook on this rank; ``plugins`` are modules
    to import first (they register extra policies or compressors in this process); ``lag``:
    the run's ``decision_lag``."""
    import importlib

    from realrun.hook import compression_hook
    from realrun.traceplayer import TracePlayer
    from realrun.worker import hook_state_for

    for module in plugins:
        importlib.import_module(module)
    logs = {}
    for policy in policies:
        cfg = _real_config(policy, (params or {}).get(policy), lag)
        rec = Recorder(cfg.controller())
        torch.manual_seed(0)
        net = nn.Sequential(nn.Linear(16, 64), nn.Tanh(), nn.Linear(64, 10))
        names = {id(p): n for n, p in net.named_parameters()}
        ddp = DDP(net, bucket_cap_mb=0.002)  # a few buckets
        trace = cfg.link_trace()
        player = TracePlayer(trace)
        state = hook_state_for(cfg, rank, world, player=player, param_names=names,
                               device=torch.device("cpu"), controller=rec)
        ddp.register_comm_hook(state, compression_hook)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
        gen = torch.Generator().manual_seed(1 + rank)
        import time

        player.start(time.monotonic())
        for _ in range(STEPS + 1):  # the last iteration only delivers the last observation
            t0 = time.perf_counter()
            x = torch.randn(32, 16, generator=gen)
            y = torch.randint(0, 10, (32,), generator=gen)
            opt.zero_grad()
            nn.functional.cross_entropy(ddp(x), y).backward()
            opt.step()
            state.end_iteration(iter_s=time.perf_counter() - t0, wait=False)
        state.flush()
        logs[policy] = rec.log
    return logs


@pytest.fixture(scope="module")
def real_logs() -> list[dict[str, Any]]:
    return run_ranks(_real_rank, 2, _policies())


def simulate_recorded(
    policies: list[str], params: dict[str, dict[str, Any]] | None = None, lag: int = 0
) -> dict[str, list[tuple[Observation, Decision]]]:
    """Every policy through the simulator; the (observation, decision) log of each."""
    import sim.engine as engine
    from sim.runner import run_simulation

    made: list[Recorder] = []
    original = engine.make_controller

    def recording(*args: Any, **kwargs: Any) -> Any:
        made.append(Recorder(original(*args, **kwargs)))
        return made[-1]

    mp = pytest.MonkeyPatch()
    mp.setattr(engine, "make_controller", recording)
    try:
        logs = {}
        for policy in policies:
            run_simulation(_sim_config(policy, (params or {}).get(policy), lag))
            logs[policy] = made[-1].log
    finally:
        mp.undo()
    return logs


@pytest.fixture(scope="module")
def sim_logs() -> dict[str, list[tuple[Observation, Decision]]]:
    return simulate_recorded(_policies())


def _sim_built(policy: str, params: dict[str, Any] | None = None) -> Any:
    """A fresh controller, built as the simulator's engine builds it."""
    from sim.workloads import load_profile

    cfg = _sim_config(policy, params)
    return make_controller(cfg.policy, cfg.resolved_policy_params(), seed=cfg.seed,
                           workload=load_profile(cfg.workload).name)


def _replay(ctl: Any, log: list[tuple[Observation, Decision]]) -> list[Decision]:
    return [ctl.decide(obs) for obs, _ in log]


def test_every_policy_is_covered(sim_logs: dict[str, Any], real_logs: list[dict[str, Any]]) -> None:
    assert len(_policies()) >= 10
    for policy in _policies():
        assert len(sim_logs[policy]) == STEPS, policy
        # Decisions from the first post-warm-up step on, one per iteration.
        assert len(real_logs[0][policy]) == STEPS, policy


@pytest.mark.parametrize("policy", _policies())
def test_real_decisions_replay_in_a_simulator_built_controller(
    policy: str, real_logs: list[dict[str, Any]]
) -> None:
    log = real_logs[0][policy]
    assert _replay(_sim_built(policy), log) == [d for _, d in log]


@pytest.mark.parametrize("policy", _policies())
def test_sim_decisions_replay_in_a_real_built_controller(
    policy: str, sim_logs: dict[str, Any]
) -> None:
    log = sim_logs[policy]
    assert _replay(_real_config(policy).controller(), log) == [d for _, d in log]


def test_ranks_decide_alike(real_logs: list[dict[str, Any]]) -> None:
    for policy in _policies():
        a, b = ([d for _, d in r[policy]] for r in real_logs)
        assert a == b, policy


def test_both_worlds_observe_the_same_fields(
    sim_logs: dict[str, Any], real_logs: list[dict[str, Any]]
) -> None:
    for policy in _policies():
        if not reads_observations(policy, _sim_config(policy).resolved_policy_params()):
            continue  # static: observations unused (the real hook defers its agreement)
        for world, log in (("sim", sim_logs[policy]), ("real", real_logs[0][policy])):
            first, rest = log[0][0], [obs for obs, _ in log[1:]]
            assert first.world_size == 2 and first.grad_bytes >= 0, (world, policy)
            for obs in rest:
                missing = [f for f in MEASURED if getattr(obs, f) is None]
                assert not missing, (world, policy, obs.step, missing)
                assert "iteration_s" in obs.extra, (world, policy, obs.step)
                assert obs.bucket_bytes, (world, policy, obs.step)


def test_the_replay_tells_controllers_apart(real_logs: list[dict[str, Any]]) -> None:
    """The replay check is not vacuous: each policy's real log, replayed into a controller built
    for another policy, gives other decisions for at least one other policy (so a world that
    built the wrong controller, or the right one with other parameters, would fail)."""
    for policy in _policies():
        log = real_logs[0][policy]
        want = [d for _, d in log]
        others = [p for p in _policies() if p != policy]
        assert any(_replay(_sim_built(p), log) != want for p in others), policy


# ------------------------------------------------------------------ decisions computed ahead
#: Policies for the lag check: ``moo`` changes its density every step here.
LAGGED = ["moo", "dc2-aimd", "mpc"]


@pytest.fixture(scope="module")
def lagged_real() -> list[dict[str, Any]]:
    return run_ranks(_real_rank, 2, LAGGED, None, (), 1)


def _applied_lags_one_step(log: list[tuple[Observation, Decision]]) -> bool:
    """``decision_lag=1``: the decision in force at controlled step ``w + j`` is the one
    returned at ``w + max(0, j - 1)``; observation ``w + j + 1`` reports it."""
    returned = [d for _, d in log]
    applied = [obs.decision for obs, _ in log[1:]]
    return applied == [returned[max(0, j - 1)] for j in range(len(applied))]


def test_a_decision_lag_is_the_same_in_both_worlds(lagged_real: list[dict[str, Any]]) -> None:
    """With ``decision_lag=1`` each world applies every decision one step after the observation
    it was made on (the real hook computes it in the step's network wait), the same controller
    calls happen in both (replays match across worlds) and the ranks agree."""
    sim = simulate_recorded(LAGGED, lag=1)
    plain = simulate_recorded(["moo"])
    for policy in LAGGED:
        real = lagged_real[0][policy]
        assert len(real) == len(sim[policy]) == STEPS, policy
        assert _applied_lags_one_step(sim[policy]), policy
        assert _applied_lags_one_step(real), policy
        assert [d for _, d in real] == [d for _, d in lagged_real[1][policy]], policy
        assert _replay(_sim_built(policy), real) == [d for _, d in real], policy
        assert _replay(_real_config(policy, lag=1).controller(), sim[policy]) == [
            d for _, d in sim[policy]], policy
    # The check can fail: without the lag, moo's decisions are applied at once.
    assert not _applied_lags_one_step(plain["moo"])
    assert len({d.density for _, d in sim["moo"]}) == STEPS
