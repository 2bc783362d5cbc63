"""The ``replay`` policy: a recorded decision schedule, step by step (sim only)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.control import Decision, Observation, make_policy, policy_info
from sim.control.policies.replay import decision_of, encode_schedule, parse_schedule
from sim.errors import InputError

_ROW = st.one_of(
    st.tuples(st.just("none"), st.just(1.0), st.sampled_from(["ring", "tree", "allgather"])),
    st.tuples(st.just("topk"), st.floats(1e-4, 1.0), st.sampled_from(["allgather"])),
    st.tuples(st.just("none"), st.just(1.0), st.sampled_from(["tree*3,ring*2", "ring*1,rhd*4"])),
)


@given(st.lists(_ROW, min_size=1, max_size=40))
def test_schedule_round_trips_step_by_step(rows: list[tuple[str, float, str]]) -> None:
    decisions = parse_schedule(encode_schedule(rows))
    assert len(decisions) == len(rows)
    for d, (comp, dens, label) in zip(decisions, rows, strict=True):
        assert (d.compressor, d.density, d.collective_label) == (comp, dens, label)


def test_runs_are_encoded_once_and_per_bucket_labels_survive() -> None:
    text = encode_schedule([("none", 1.0, "ring")] * 3 + [("topk", 0.25, "allgather")]
                           + [("none", 1.0, "tree*3,ring*2")])
    assert text == "none/1.0/ring@3;topk/0.25/allgather;none/1.0/tree*3,ring*2"
    last = parse_schedule(text)[-1]
    assert last.bucket_collectives == ("tree", "tree", "tree", "ring", "ring")
    assert last.collective_for(4) == "ring" and last.collective_for(0) == "tree"


def test_policy_replays_then_holds_the_last_decision() -> None:
    policy = make_policy("replay", schedule="none/1.0/ring@2;topk/0.1/allgather")
    got = [policy.decide(Observation(step=k, world_size=2, grad_bytes=100)) for k in range(5)]
    assert got[:2] == [Decision("none", 1.0, "ring")] * 2
    assert got[2:] == [Decision("topk", 0.1, "allgather")] * 3
    assert policy_info("replay").sim_only
    assert make_policy("replay").decide(Observation(step=9, world_size=2, grad_bytes=1)) == (
        Decision())


@pytest.mark.parametrize("bad", ["topk/0.1", "topk/x/allgather", "topk/0.1/allgather@0",
                                 "nope/0.1/allgather", "topk/0.1/ringo", "topk/0.1/ring",
                                 "topk/0/allgather", "topk/nan/allgather"])
def test_malformed_schedules_are_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_schedule(bad)
    with pytest.raises(InputError, match="replay"):
        make_policy("replay", schedule=bad)


def test_decision_of_checks_compatibility() -> None:
    assert decision_of("topk", 0.5, "allgather") == Decision("topk", 0.5, "allgather")
    with pytest.raises(ValueError):
        decision_of("topk", 0.5, "tree*2,ring*1")
