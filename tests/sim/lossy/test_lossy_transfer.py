"""The bounded-loss and plain transports on one collective: identities and invariants."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.errors import InputError
from sim.lossy import LossParams, StepGroup, lossy_collective, packets_of


@st.composite
def groups(draw: st.DrawFn, max_loss: float = 0.3) -> list[StepGroup]:
    out = []
    for _ in range(draw(st.integers(1, 3))):
        m = draw(st.integers(1, 8))
        k = np.array(draw(st.lists(st.integers(0, 400), min_size=m, max_size=m)), dtype=np.int64)
        p = np.array(
            draw(st.lists(st.floats(0.0, max_loss), min_size=m, max_size=m)), dtype=float
        )
        lat = draw(st.floats(0.0, 1e-3))
        step = lat + draw(st.floats(1e-6, 1e-2))
        out.append(StepGroup(draw(st.integers(0, 20)), step, lat, 1.2e-6, k, p))
    return out


def _zero_loss(gs: list[StepGroup]) -> list[StepGroup]:
    return [StepGroup(g.steps, g.step_s, g.latency_s, g.packet_s, g.packets, g.loss * 0) for g in gs]


@settings(max_examples=60, deadline=None)
@given(gs=groups(), bound=st.one_of(st.none(), st.floats(0.0, 0.5)), base=st.floats(0.0, 10.0))
def test_zero_loss_no_deadline_is_the_plain_transport_exactly(
    gs: list[StepGroup], bound: float | None, base: float
) -> None:
    rng = np.random.default_rng(0)
    out = lossy_collective(_zero_loss(gs), LossParams(loss_bound=bound), rng, base_s=base)
    assert out.duration_s == base  # bit for bit
    assert out.delivered == out.packets and out.retx == 0 and out.dropped == 0


@settings(max_examples=80, deadline=None)
@given(
    gs=groups(),
    bound=st.floats(0.0, 0.5),
    deadline=st.one_of(st.just(math.inf), st.floats(1e-6, 0.1)),
    seed=st.integers(0, 2**32 - 1),
)
def test_delivered_never_below_the_bound_and_packets_are_conserved(
    gs: list[StepGroup], bound: float, deadline: float, seed: int
) -> None:
    params = LossParams(loss_bound=bound, deadline_s=deadline, packet_loss=None)
    out = lossy_collective(gs, params, np.random.default_rng(seed))
    assert out.min_message_frac >= 1.0 - bound - 1e-12
    assert out.delivered_frac >= 1.0 - bound - 1e-12
    # Conservation: every packet of the payload is delivered, lost for good, or never sent.
    assert out.sent == out.packets - out.dropped + out.retx
    assert out.packets == out.delivered + (out.lost - out.retx) + out.dropped
    assert out.duration_s >= min(out.base_s, deadline) - 1e-12


@settings(max_examples=60, deadline=None)
@given(gs=groups(), seed=st.integers(0, 2**32 - 1))
def test_plain_transport_delivers_everything_and_never_beats_lossless(
    gs: list[StepGroup], seed: int
) -> None:
    out = lossy_collective(gs, LossParams(packet_loss=0.0), np.random.default_rng(seed))
    assert out.delivered == out.packets and out.dropped == 0
    assert out.duration_s >= out.base_s


@settings(max_examples=40, deadline=None)
@given(gs=groups(max_loss=0.05), seed=st.integers(0, 2**32 - 1))
def test_bound_zero_equals_full_delivery(gs: list[StepGroup], seed: int) -> None:
    out = lossy_collective(gs, LossParams(loss_bound=0.0), np.random.default_rng(seed))
    assert out.delivered == out.packets


def _ring_like(p: float, steps: int = 14, m: int = 8, k: int = 2000) -> list[StepGroup]:
    return [StepGroup(steps, 1e-3 + 2.4e-3, 1e-3, 1.2e-6, np.full(m, k), np.full(m, p))]


def test_plain_transport_has_heavy_tails_bounded_does_not() -> None:
    plain, bounded = [], []
    rng_a, rng_b = np.random.default_rng(1), np.random.default_rng(1)
    for _ in range(300):
        plain.append(lossy_collective(_ring_like(1e-4), LossParams(packet_loss=0.0), rng_a))
        bounded.append(lossy_collective(_ring_like(1e-4), LossParams(loss_bound=0.01), rng_b))
    tp = np.array([o.duration_s for o in plain])
    tb = np.array([o.duration_s for o in bounded])
    base = plain[0].base_s
    assert np.percentile(tp, 99) > base + 0.005  # at least one RTO in the tail
    assert np.all(tb == base)  # 1e-4 loss never exceeds a 1% bound on 2000-packet messages
    assert min(o.delivered_frac for o in bounded) >= 0.99


def test_deadline_cuts_the_low_priority_tail_within_the_bound() -> None:
    gs = [StepGroup(10, 1e-2, 1e-4, 1.2e-6, np.full(4, 1000), np.full(4, 0.0))]
    free = lossy_collective(gs, LossParams(loss_bound=0.05), np.random.default_rng(0))
    cut = lossy_collective(
        gs, LossParams(loss_bound=0.05, deadline_s=0.098), np.random.default_rng(0)
    )
    assert free.duration_s == pytest.approx(0.1)
    # Whole packets only: within one packet's share of every step past the deadline.
    assert 0.098 <= cut.duration_s <= 0.098 + 10 * (1e-2 - 1e-4) / 1000 + 1e-12
    assert cut.dropped > 0 and cut.delivered_frac >= 0.95
    tight = lossy_collective(
        gs, LossParams(loss_bound=0.05, deadline_s=0.01), np.random.default_rng(0)
    )
    # The bound is a floor: at most 5 % of the serialisation can go.
    assert tight.delivered_frac == pytest.approx(0.95)
    assert tight.duration_s == pytest.approx(0.1 - 0.05 * 10 * (1e-2 - 1e-4))


def test_packets_of() -> None:
    assert packets_of(0, 1500) == 0
    assert packets_of(1500, 1500) == 1
    assert packets_of(1501, 1500) == 2


@pytest.mark.parametrize(
    "kw",
    [
        {"loss_bound": 1.0},
        {"loss_bound": -0.01},
        {"packet_loss": 1.0},
        {"loss_bound": 0.01, "deadline_s": -1.0},
        {"loss_bound": 0.01, "deadline_s": 0.0},
        {"deadline_s": 1.0},
        {"packet_loss": 0.1, "trace_loss": True},
        {"mtu_bytes": 0},
    ],
)
def test_bad_parameters(kw: dict[str, float]) -> None:
    with pytest.raises(InputError):
        LossParams(**kw)  # type: ignore[arg-type]
