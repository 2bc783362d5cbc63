"""The records' per-bucket collective label reads back as the decision's bucket choices."""

from __future__ import annotations

import hypothesis.strategies as st
from hypothesis import given

from sim.control.types import COLLECTIVES, Decision, bucket_collectives_of


@given(st.lists(st.sampled_from(COLLECTIVES), min_size=1, max_size=40))
def test_label_round_trips_to_the_bucket_choices(choices: list[str]) -> None:
    d = Decision("topk", 0.01, choices[-1], tuple(choices))
    assert bucket_collectives_of(d.collective_label, len(choices)) == choices


def test_a_single_name_covers_every_bucket() -> None:
    assert bucket_collectives_of("ring", 3) == ["ring", "ring", "ring"]
    assert bucket_collectives_of("tree*1,ring*2", 3) == ["tree", "ring", "ring"]
