"""The hook's latency pings and the link's own time on 2 gloo ranks: the pings measure the
emulated latency (the same on both ranks) and become the monitor's reference; a rank that is
late to every step does not inflate the link time the monitor and ``link_comm_s`` see.

One spawn runs the scenario (module fixture); the tests assert on its results.
"""

from __future__ import annotations

import math
import time
from typing import Any

import pytest
import torch
from _spawn import run_ranks
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from realrun.config import RealConfig
from realrun.emulation import HookEmulator
from realrun.hook import CompressionHookState, compression_hook
from realrun.traceplayer import TracePlayer
from sim.control import make_policy
from sim.control.world import IterationMeasurement, observation_after
from sim.errors import InputError
from traces.model import PiecewiseTrace

LATENCY_S = 0.004
LATE_S = 0.1


def _scenario(rank: int, world: int) -> dict[str, Any]:
    torch.manual_seed(0)
    ddp = DDP(nn.Linear(40, 1, bias=False))
    player = TracePlayer(PiecewiseTrace.constant(LATENCY_S, 1e9))
    player.start()
    state = CompressionHookState(
        controller=make_policy("fixed", density=0.1, collective="allgather"),
        world_size=world, rank=rank, emulator=HookEmulator("hook", player),
        latency_pings=3,
    )
    ddp.register_comm_hook(state, compression_hook)
    gen = torch.Generator().manual_seed(rank)
    for _ in range(6):
        if rank == 1:
            time.sleep(LATE_S)  # rank 1 reaches every collective late
        ddp.zero_grad()
        ddp(torch.randn(4, 40, generator=gen)).pow(2).sum().backward()
        state.end_iteration(iter_s=0.0)
    state.flush()
    return {
        "reference": state.monitor.latency_reference_s,
        "latency": state.monitor.estimate()[0],
        "stats": [(h.warmup, h.comm_s, h.link_comm_s) for h in state.history],
        "exposed": [(h.warmup, h.exposed_comm_s, h.exposed_comm_min_s) for h in state.history],
        "splits": [(h.warmup, h.est_split) for h in state.history],
        "bandwidth_log_sd": (state.observation().extra.get("bandwidth_log_sd"),
                             state.monitor.bandwidth_log_sd),
    }


@pytest.fixture(scope="module")
def ranks() -> list[dict[str, Any]]:
    return run_ranks(_scenario, 2)


def test_pings_measure_the_emulated_latency_the_same_on_every_rank(
    ranks: list[dict[str, Any]],
) -> None:
    ref = ranks[0]["reference"]
    assert ref == ranks[1]["reference"]
    # The emulator sleeps at least the latency; a ping is that plus software overhead, and
    # every later collective (one latency, 80 bytes at 1 GB/s) can only lower the reference.
    assert LATENCY_S * 0.999 <= ref < LATENCY_S + LATE_S / 2


def test_the_link_time_leaves_out_the_wait_for_a_late_rank(ranks: list[dict[str, Any]]) -> None:
    import statistics

    controlled = [s for s in ranks[0]["stats"] if not s[0]]
    assert len(controlled) == 5
    for _, comm_s, link_s in controlled:
        assert LATENCY_S * 0.999 <= link_s <= comm_s
    # Rank 0 waits for rank 1 inside the collective; the link's time leaves that out (the
    # margins allow for a descheduled process on a busy machine).
    assert statistics.median(c for _, c, _ in controlled) >= LATE_S * 0.9
    assert statistics.median(x for _, _, x in controlled) < LATE_S / 2
    assert ranks[0]["stats"] == ranks[1]["stats"]
    # The monitor was fed the link's time, so its latency is near the emulated one.
    assert ranks[0]["latency"] < LATENCY_S + LATE_S / 2


def test_the_least_exposed_time_leaves_out_the_wait_for_a_late_rank(
    ranks: list[dict[str, Any]],
) -> None:
    """``exposed_comm_s`` is the greatest over ranks (rank 0's, with its wait for rank 1);
    ``exposed_comm_min_s`` the least (rank 1's: it waits for nobody), what a compute
    calibration must subtract so that the lateness counts as the iteration's compute."""
    import statistics

    controlled = [e for e in ranks[0]["exposed"] if not e[0]]
    assert len(controlled) == 5
    for _, most, least in controlled:
        assert LATENCY_S * 0.999 <= least <= most
    assert statistics.median(m for _, m, _ in controlled) >= LATE_S * 0.9
    assert statistics.median(x for _, _, x in controlled) < LATE_S / 2
    assert ranks[0]["exposed"] == ranks[1]["exposed"]


def test_records_say_the_split_rests_on_the_pings(ranks: list[dict[str, Any]]) -> None:
    """One collective shape (a fixed density): only the pings' reference splits latency from
    bandwidth, and every measured iteration's record says so (``est_split``)."""
    for r in ranks:
        measured = [split for warm, split in r["splits"] if not warm]
        assert measured and set(measured) == {"reference"}


def test_observations_carry_how_well_the_window_pins_the_bandwidth(
        ranks: list[dict[str, Any]]) -> None:
    """The hook's observations carry the monitor's ``bandwidth_log_sd`` as the simulator's do
    (``mpc``'s ``identify_sd`` reads it), capped to a finite value."""
    from sim.control.world import BANDWIDTH_LOG_SD_CAP

    for r in ranks:
        got, monitor = r["bandwidth_log_sd"]
        assert got == min(monitor, BANDWIDTH_LOG_SD_CAP) and got > 0.0


def _scenario_every(rank: int, world: int) -> dict[str, Any]:
    """``ping_every=2`` over 8 steps (warm-up 1): pings before steps 1, 3, 5 and 7, counted
    by wrapping the measurement the hook calls."""
    import realrun.hook.state as hook_state

    pinged: list[tuple[int, float | None]] = []
    measure = hook_state.measure_latency_s

    def counted(*args: Any, **kwargs: Any) -> float | None:
        ref = measure(*args, **kwargs)
        pinged.append((state.step, ref))
        return ref

    hook_state.measure_latency_s = counted  # type: ignore[assignment]
    torch.manual_seed(0)
    ddp = DDP(nn.Linear(40, 1, bias=False))
    player = TracePlayer(PiecewiseTrace.constant(LATENCY_S, 1e9))
    player.start()
    state = CompressionHookState(
        controller=make_policy("fixed", density=0.1, collective="allgather"),
        world_size=world, rank=rank, emulator=HookEmulator("hook", player),
        latency_pings=2, ping_every=2,
    )
    ddp.register_comm_hook(state, compression_hook)
    gen = torch.Generator().manual_seed(rank)
    refs = []
    for _ in range(8):
        ddp.zero_grad()
        ddp(torch.randn(4, 40, generator=gen)).pow(2).sum().backward()
        state.end_iteration(iter_s=0.0)
        refs.append(state.monitor.latency_reference_s)
    state.flush()
    return {"pinged": pinged, "refs": refs}


def test_ping_every_repeats_the_pings_and_each_sets_the_reference() -> None:
    ranks = run_ranks(_scenario_every, 2)
    steps = [[s for s, _ in r["pinged"]] for r in ranks]
    assert steps == [[1, 3, 5, 7]] * 2  # the same steps on every rank: they are collectives
    for r in ranks:
        for step, ref in r["pinged"]:
            after = r["refs"][step]
            assert ref is not None and LATENCY_S * 0.999 <= ref
            # The step's own collectives can only lower the new reference.
            assert after is not None and after <= ref
    assert ranks[0]["pinged"] == ranks[1]["pinged"]


def test_state_and_config_reject_bad_ping_counts() -> None:
    with pytest.raises(InputError, match="latency_pings"):
        CompressionHookState(controller=make_policy("dense"), world_size=2, rank=0,
                             latency_pings=-1)
    with pytest.raises(InputError, match="latency_pings"):
        RealConfig(workload="digits-mlp", emulation="none", latency_pings=-1)
    # Left out of the recorded configuration at its default (earlier runs' ids unchanged).
    assert "latency_pings" not in RealConfig(workload="digits-mlp", emulation="none").to_dict()
    cfg = RealConfig(workload="digits-mlp", emulation="none", latency_pings=4)
    assert cfg.to_dict()["latency_pings"] == 4
    assert "ping_every" not in cfg.to_dict()
    assert RealConfig(workload="digits-mlp", emulation="none", latency_pings=4,
                      ping_every=3).to_dict()["ping_every"] == 3
    with pytest.raises(InputError, match="ping-every needs --latency-pings"):
        RealConfig(workload="digits-mlp", emulation="none", ping_every=3)
    for bad in (-1, True):
        with pytest.raises(InputError, match="ping_every"):
            CompressionHookState(controller=make_policy("dense"), world_size=2, rank=0,
                                 latency_pings=1, ping_every=bad)
        with pytest.raises(InputError, match="ping_every"):
            RealConfig(workload="digits-mlp", emulation="none", latency_pings=1, ping_every=bad)
    assert "ping_on_jump" not in cfg.to_dict()
    assert RealConfig(workload="digits-mlp", emulation="none",
                      ping_on_jump=5.0).to_dict()["ping_on_jump"] == 5.0
    for jump in (1.0, -1.0, True, math.inf):
        with pytest.raises(InputError, match="ping_on_jump"):
            RealConfig(workload="digits-mlp", emulation="none", ping_on_jump=jump)
        with pytest.raises(InputError, match="ping_on_jump"):
            CompressionHookState(controller=make_policy("dense"), world_size=2, rank=0,
                                 ping_on_jump=jump)


def test_observation_carries_the_links_own_time_when_measured() -> None:
    from sim.control.types import Decision

    m = IterationMeasurement(decision=Decision(), comm_s=0.03, compress_s=0.0, compute_s=0.01,
                             gain=1.0, grad_norm=None)
    obs = observation_after(m, step=3, world_size=2, grad_bytes=160)
    assert "link_comm_s" not in obs.extra
    for v in (0.004, math.nan):
        m2 = IterationMeasurement(**{**m.__dict__, "link_comm_s": v})
        got = observation_after(m2, step=3, world_size=2, grad_bytes=160).extra
        assert got.get("link_comm_s") == (v if math.isfinite(v) else None)
