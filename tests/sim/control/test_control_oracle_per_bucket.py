"""The oracle prices collectives bucket by bucket, as ``collective=auto`` does."""

from __future__ import annotations

from sim.control import make_policy
from sim.control.selector import select_bucket_collectives
from sim.control.types import Decision


class _Ctx:
    world_size = 64
    workload_grad_bytes = 100_004_000
    bucket_bytes = (4_000, 100_000_000)

    @staticmethod
    def link_state_at(t_s: float) -> tuple[float, float]:
        return 1e-3, 1.25e9


def test_oracle_offers_the_per_bucket_choice_of_the_true_link() -> None:
    oracle = make_policy("oracle")
    oracle._ctx = _Ctx()  # the part of the simulator's context the per-bucket choice reads
    d = oracle._per_bucket(Decision("none", 1.0, "ring"), 0.0)
    want = select_bucket_collectives(1e-3, 1.25e9, 64, (4_000.0, 1e8), 1.0, "none")
    assert len(set(want)) == 2
    assert d is not None and d.bucket_collectives == want


def test_no_per_bucket_option_when_the_buckets_agree() -> None:
    oracle = make_policy("oracle")
    ctx = _Ctx()
    ctx.bucket_bytes = (50_000_000, 50_000_000)  # type: ignore[misc]
    oracle._ctx = ctx
    assert oracle._per_bucket(Decision("none", 1.0, "ring"), 0.0) is None
