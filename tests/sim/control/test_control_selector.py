"""Collective selection agrees with the cost model and with seed 003's crossover conditions."""

from __future__ import annotations

import math

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from sim.compress.spec import get_spec
from sim.control.selector import (
    DEFAULT_ALLOWED,
    canonical_auto_collectives,
    collective_cost_terms,
    collective_time_s,
    select_bucket_collectives,
    select_collective,
    select_decision,
)
from sim.errors import InputError

SPARSE3 = ("allgather", "artopk-ring", "artopk-tree")


def _bounds(n: int, mc: float) -> tuple[float, float, float]:
    """Seed 003 thresholds on alpha/beta: ring over tree, ring over AG, tree over AG."""
    lg = math.log2(n)
    ring_tree = (lg - (n - 1) / n) / (n - 1 - lg) * mc
    ring_ag = (1 - 1 / n - lg / (2 * (n - 1))) * mc
    tree_ag = ((n - 1) / lg - 1.5) * mc
    return ring_tree, ring_ag, tree_ag


def _far(x: float, bound: float) -> bool:
    return abs(x - bound) > 1e-6 * max(abs(bound), 1e-300)


@settings(max_examples=400, deadline=None)
@given(
    n=st.integers(3, 4096),
    m_bytes=st.floats(1e5, 2e9),
    c=st.floats(1e-4, 0.5),
    alpha=st.floats(1e-7, 0.1),
    bw=st.floats(1e6, 1e11),
)
def test_selector_obeys_seed003_inequalities(
    n: int, m_bytes: float, c: float, alpha: float, bw: float
) -> None:
    m_bytes = 4.0 * round(m_bytes / 4.0)
    # "M c" of the seed: the bytes of the selected values (k 32-bit values).
    mc = get_spec("topk").payload(int(m_bytes / 4), c).value_bytes
    ratio = alpha * bw  # alpha / beta
    ring_tree, ring_ag, tree_ag = _bounds(n, mc)
    assume(all(_far(ratio, b) for b in (ring_tree, ring_ag, tree_ag)))
    chosen = select_collective(alpha, bw, n, m_bytes, c, "topk", allowed=SPARSE3)
    if chosen == "artopk-ring":
        assert ratio < ring_tree and ratio < ring_ag
    elif chosen == "artopk-tree":
        assert ratio > ring_tree and ratio < tree_ag
    else:
        assert chosen == "allgather"
        assert ratio > ring_ag and ratio > tree_ag


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(2, 1024),
    m_bytes=st.floats(1e3, 1e9),
    c=st.sampled_from([1.0, 0.3, 0.01, 0.001]),
    alpha=st.floats(1e-7, 0.1),
    bw=st.floats(1e6, 1e11),
    comp=st.sampled_from(["none", "topk", "randomk"]),
)
def test_selected_collective_is_the_cheapest_compatible(
    n: int, m_bytes: float, c: float, alpha: float, bw: float, comp: str
) -> None:
    d = 1.0 if comp == "none" else c
    chosen = select_collective(alpha, bw, n, m_bytes, d, comp)
    spec = get_spec(comp)
    assert spec.supports(chosen)
    best = collective_time_s(chosen, alpha, bw, n, m_bytes, d, comp)
    for other in DEFAULT_ALLOWED:
        if spec.supports(other):
            assert best <= collective_time_s(other, alpha, bw, n, m_bytes, d, comp)


def test_known_regimes() -> None:
    # Tiny latency, big payload: AR-Topk over a ring; huge latency: allgather (fewest alphas).
    assert select_collective(1e-7, 1e9, 64, 100e6, 0.1, "topk") == "artopk-ring"
    assert select_collective(0.05, 1e10, 64, 100e6, 0.001, "topk") == "allgather"
    assert select_collective(1e-6, 1e9, 64, 100e6, 1.0, "none") == "ring"
    assert select_collective(0.05, 1e10, 64, 1e3, 1.0, "none") in ("tree", "ps")


def test_artopk_terms_are_seed003_closed_forms() -> None:
    n, m, c = 64, 100e6, 0.01
    mc = get_spec("topk").payload(int(m / 4), c).value_bytes
    lg = math.log2(n)
    ring = collective_cost_terms("artopk-ring", n, m, c, "topk")
    assert math.isclose(ring.n_alpha, 2 * (n - 1) + lg)
    assert math.isclose(ring.n_bytes, mc * (2 * (n - 1) / n + lg))
    tree = collective_cost_terms("artopk-tree", n, m, c, "topk")
    assert math.isclose(tree.n_alpha, 3 * lg)
    assert math.isclose(tree.n_bytes, 3 * mc * lg)
    ag = collective_cost_terms("allgather", n, m, c, "topk")
    assert math.isclose(ag.n_bytes, (n - 1) * 2 * mc)


def test_unknown_link_falls_back_to_first_compatible() -> None:
    assert select_collective(None, None, 8, 1e6, 0.01, "topk") == "allgather"
    # Unknown latency counts as zero: bytes rank the candidates.
    assert select_collective(None, 1e9, 64, 100e6, 0.01, "topk") == "artopk-ring"


def test_incompatible_or_unknown_allowed_is_an_input_error() -> None:
    with pytest.raises(InputError, match="can use none"):
        select_collective(1e-3, 1e9, 8, 1e6, 0.01, "topk", allowed=("ring", "tree"))
    with pytest.raises(InputError, match="unknown collective"):
        select_collective(1e-3, 1e9, 8, 1e6, 0.01, "topk", allowed=("mesh",))


def test_a_tie_goes_to_the_earlier_allowed_collective() -> None:
    """At 2 workers ring, rhd and double-tree have the same terms: the order of ``allowed``
    decides, whatever the link."""
    for lat, bw in ((1e-3, 1e9), (1e-6, 1e6), (0.0, 1e12)):
        for allowed in (("ring", "rhd", "double-tree"), ("rhd", "ring"), ("double-tree", "ring")):
            got = select_collective(lat, bw, 2, 1e6, 1.0, "none", allowed=allowed)
            assert got == allowed[0]


@pytest.mark.parametrize("bw", [None, 0.0, -1.0, math.inf, math.nan])
def test_an_unknown_bandwidth_takes_the_first_compatible_collective(bw: float | None) -> None:
    assert select_collective(1e-3, bw, 64, 1e8, 1.0, "none", allowed=("tree", "ring")) == "tree"
    assert select_bucket_collectives(1e-3, bw, 64, (1e8, 1e6), 1.0, "none",
                                     allowed=("tree", "ring")) == ("tree", "tree")


def test_a_negative_or_unknown_latency_counts_as_zero() -> None:
    args = (1e9, 1024, 1e6, 0.01, "topk")
    zero = select_collective(0.0, *args)
    assert select_collective(-5e-3, *args) == select_collective(None, *args) == zero
    assert select_bucket_collectives(-5e-3, 1e9, 1024, (1e6, 1e3), 0.01, "topk") == (
        select_bucket_collectives(0.0, 1e9, 1024, (1e6, 1e3), 0.01, "topk"))


def test_a_decision_whose_buckets_agree_names_one_collective() -> None:
    d = select_decision(1e-3, 1e9, 8, 3e6, (1_000_000, 1_000_000, 1_000_000), 1.0, "none")
    assert d.bucket_collectives == () and d.collective in DEFAULT_ALLOWED


@pytest.mark.parametrize(("value", "want"), [
    (None, None), ("default", "default"), (" all ", "all"), (["all"], "all"),
    ("ring, tree", "ring,tree"), (("tree", "ring"), "tree,ring"),
])
def test_auto_collectives_in_their_stored_form(value: object, want: str | None) -> None:
    assert canonical_auto_collectives(value) == want


@pytest.mark.parametrize(("value", "needle"), [
    ("ring,ring", "named twice"), ("ring,,tree", "empty collective name"),
    ("", "empty collective name"), ([], "empty collective name"),
    (["default", "ring"], "unknown collective 'default'"), ("ring,warp", "unknown collective"),
    (["ring", 3], "neither|must be default, all or a list"), (42, "must be default, all"),
])
def test_bad_auto_collectives_are_input_errors(value: object, needle: str) -> None:
    with pytest.raises(InputError, match=needle):
        canonical_auto_collectives(value)
