"""Closed-loop driver for controller tests: a synthetic link, the cost model, the monitor.

No simulator: each step the decision's communication time is the alpha-beta time of the whole
gradient on the link of that step; the monitor sees the same collective and feeds its estimates
back, as the simulator and the real-run hook do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sim.control.monitor import LinkMonitor
from sim.control.progress import default_progress_model
from sim.control.selector import collective_cost_terms
from sim.control.types import Controller, Decision, Observation

WORLD = 64
GRAD_BYTES = 100_000_000
COMPUTE_S = 0.2
GOOD = (1e-3, 25e9 / 8)  # 1 ms, 25 Gbit/s
BAD_LATENCY = (32e-3, 25e9 / 8)
BAD_BANDWIDTH = (1e-3, 1e9 / 8)


@dataclass
class Step:
    """One step of a closed-loop run."""

    decision: Decision
    comm_s: float


def run_closed_loop(
    policy: Controller,
    link_at: Callable[[int], tuple[float, float]],
    steps: int,
    *,
    grad_norm_at: Callable[[int], float] | None = None,
    gain_at: Callable[[Decision, int], float] | None = None,
) -> list[Step]:
    """Drive ``policy`` for ``steps`` steps on the link ``link_at(step) -> (latency, Bps)``.

    The observed gain is ``gain_at(decision, step)``, by default the default workload's
    gradient-trace gain at that step (what the simulator reports)."""
    pm = default_progress_model()
    monitor = LinkMonitor()
    obs = Observation(step=0, world_size=WORLD, grad_bytes=GRAD_BYTES)
    out: list[Step] = []
    for k in range(steps):
        d = policy.decide(obs)
        lat, bw = link_at(k)
        terms = collective_cost_terms(d.collective, WORLD, GRAD_BYTES, d.density, d.compressor)
        comm = terms.time_s(lat, bw)
        # Two buckets of different size per step, so the monitor can separate alpha and beta.
        for frac in (0.7, 0.3):
            t = collective_cost_terms(
                d.collective, WORLD, GRAD_BYTES * frac, d.density, d.compressor
            )
            monitor.observe(t.n_alpha, t.n_bytes, t.time_s(lat, bw))
        est_lat, est_bw = monitor.estimate()
        out.append(Step(d, comm))
        obs = Observation(
            step=k + 1,
            world_size=WORLD,
            grad_bytes=GRAD_BYTES,
            comm_s=comm,
            compress_s=0.0,
            compute_s=COMPUTE_S,
            latency_s=est_lat,
            bandwidth_Bps=est_bw,
            gain=(
                pm.gain(d.compressor, d.density, k + 1) if gain_at is None else gain_at(d, k + 1)
            ),
            decision=d,
            grad_norm=None if grad_norm_at is None else grad_norm_at(k),
        )
    return out


def step_link(
    before: tuple[float, float], during: tuple[float, float], start: int, end: int
) -> Callable[[int], tuple[float, float]]:
    """``during`` for steps in [start, end), ``before`` otherwise."""
    return lambda k: during if start <= k < end else before


def densities(steps: Sequence[Step]) -> list[float]:
    """The density of every step."""
    return [s.decision.density for s in steps]
