"""Per-bucket collective choice under ``collective=auto``: selector, engines and records."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.compress.spec import get_spec
from sim.control.selector import (
    DEFAULT_ALLOWED,
    collective_time_s,
    select_bucket_collectives,
    select_collective,
    select_decision,
)
from sim.control.types import Decision
from sim.runner import SimConfig, run_simulation

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _simtest_helpers import write_profile  # noqa: E402

LAT_S, BW_Bps, N = 1e-3, 1.25e9, 64
SMALL_B, LARGE_B = 4_000, 100_000_000


NCCL = ("ring", "tree")


def test_small_bucket_goes_over_tree_and_large_over_ring() -> None:
    sizes = (float(SMALL_B), float(LARGE_B))
    colls = select_bucket_collectives(LAT_S, BW_Bps, N, sizes, 1.0, "none", allowed=NCCL)
    assert colls == ("tree", "ring")
    # With the default candidates the latency-bound bucket takes the 2-message star instead.
    assert select_bucket_collectives(LAT_S, BW_Bps, N, sizes, 1.0, "none") == ("ps", "ring")
    # The whole gradient as one message is bandwidth-bound: ring for everything.
    assert select_collective(LAT_S, BW_Bps, N, SMALL_B + LARGE_B, 1.0, "none") == "ring"
    d = select_decision(LAT_S, BW_Bps, N, SMALL_B + LARGE_B, (SMALL_B, LARGE_B), 1.0, "none",
                        allowed=NCCL)
    assert d == Decision("none", 1.0, "ring", ("tree", "ring"))
    assert d.collective_label == "tree*1,ring*1"
    assert d.for_bucket(0) == Decision("none", 1.0, "tree")
    assert d.collectives_used() == ("tree", "ring")


def test_agreeing_buckets_give_a_plain_decision() -> None:
    d = select_decision(LAT_S, BW_Bps, N, 2 * LARGE_B, (LARGE_B, LARGE_B), 1.0, "none")
    assert d == Decision("none", 1.0, "ring")
    assert d.collective_label == "ring"


def _total_s(colls: tuple[str, ...], sizes: list[int], n: int, lat: float, bw: float,
             density: float, comp: str) -> float:
    return sum(collective_time_s(c, lat, bw, n, float(m), density, comp)
               for c, m in zip(colls, sizes, strict=True))


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.integers(1_000, 400_000_000), min_size=1, max_size=8),
    n=st.integers(2, 1024),
    lat=st.floats(0.0, 0.1),
    bw=st.floats(1e6, 1e11),
    sparse=st.booleans(),
    density=st.floats(1e-4, 0.5),
)
def test_per_bucket_total_never_exceeds_whole_message_choice(
    sizes: list[int], n: int, lat: float, bw: float, sparse: bool, density: float
) -> None:
    comp, dens = ("topk", density) if sparse else ("none", 1.0)
    per = select_bucket_collectives(lat, bw, n, tuple(float(m) for m in sizes), dens, comp)
    whole = select_collective(lat, bw, n, float(sum(sizes)), dens, comp)
    per_s = _total_s(per, sizes, n, lat, bw, dens, comp)
    whole_s = _total_s(tuple(whole for _ in sizes), sizes, n, lat, bw, dens, comp)
    assert per_s <= whole_s * (1 + 1e-12)
    # ... nor than any single allowed collective used for every bucket.
    for c in DEFAULT_ALLOWED:
        if get_spec(comp).supports(c):
            assert per_s <= _total_s(tuple(c for _ in sizes), sizes, n, lat, bw, dens, comp) * (
                1 + 1e-12
            )


@pytest.mark.parametrize("fidelity", ["analytic", "stepwise"])
def test_records_show_the_per_bucket_choices(tmp_path: Path, fidelity: str) -> None:
    # One 4 kB layer and one 100 MB layer (produced first by backward): two buckets at the 25 MB default capacity.
    prof = write_profile(tmp_path / "twobuckets.json", [SMALL_B // 4, LARGE_B // 4],
                         forward_s=0.01, backward_s=0.02)
    cfg = SimConfig(workload=str(prof), workers=N, trace="steps:dur_s=60,lat_ms=1,bw_gbps=10",
                    policy="dense", collective="auto", iterations=6, monitor="on",
                    fidelity=fidelity)
    records, meta = run_simulation(cfg)
    numel = meta["workload"]["bucket_numel"]
    assert len(numel) == 2
    want = select_decision(LAT_S, BW_Bps, N, 0.0, tuple(4 * k for k in numel), 1.0, "none")
    assert len(set(want.bucket_collectives)) == 2
    # The first decision has no link estimate (first candidate, ring); then one per bucket.
    assert list(records["collective"])[0] == "ring"
    assert set(list(records["collective"])[2:]) == {want.collective_label}
    # One plain string column: it survives a CSV round trip unchanged.
    again = pd.read_csv(io.StringIO(records.to_csv(index=False)))
    assert list(again["collective"]) == list(records["collective"])
