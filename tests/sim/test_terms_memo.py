"""The memoised cost terms (``collective_terms``, the selector's per-candidate terms) give the
very values the uncached computation gives, keep argument types apart, and never price a
compressor registered again under its name with the old one's payload."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.collectives import closed_form as cf
from sim.compress.spec import CompressorSpec, Payload, register_spec, unregister_spec
from sim.control import selector

COLLS = cf.DENSE_COLLECTIVES + cf.SPARSE_COLLECTIVES


@settings(max_examples=60, deadline=None)
@given(coll=st.sampled_from(COLLS), n=st.integers(1, 4096),
       m=st.floats(0.0, 1e10, allow_nan=False), idx=st.floats(0.0, 1e9, allow_nan=False))
def test_memoised_terms_equal_the_computation(coll: str, n: int, m: float, idx: float) -> None:
    want = cf._collective_terms.__wrapped__(coll, n, m, idx)
    assert cf.collective_terms(coll, n, m, idx) == want
    assert cf.collective_terms(coll, n, m, idx) == want  # the second call, from the cache


def test_argument_types_are_kept_apart() -> None:
    as_int = cf.collective_terms("ring", 8, 1000)
    as_np = cf.collective_terms("ring", 8, np.float64(1000.0))
    as_float = cf.collective_terms("ring", 8, 1000.0)
    assert as_int == as_float == as_np
    assert type(as_float.n_bytes) is float
    assert type(as_np.n_bytes) is np.float64


def test_errors_are_not_remembered_as_answers() -> None:
    for _ in range(2):
        with pytest.raises(Exception, match="unknown collective"):
            cf.collective_terms("no-such-collective", 8, 1.0)


def test_a_spec_registered_again_is_priced_with_its_own_payload() -> None:
    name = "memo-test-compressor"

    def spec(bytes_per_element: float) -> CompressorSpec:
        return CompressorSpec(name, ("allgather",),
                              lambda numel, d, dt: Payload(value_bytes=numel * d * bytes_per_element))

    try:
        register_spec(spec(4.0))
        first = selector.cheapest_collective(("allgather",), 1e-3, 1e9, 8, 1e6, 0.1, name)
        unregister_spec(name)
        register_spec(spec(8.0))
        second = selector.cheapest_collective(("allgather",), 1e-3, 1e9, 8, 1e6, 0.1, name)
    finally:
        unregister_spec(name)
    assert second[1] > first[1]
    assert second[1] == pytest.approx(
        cf.collective_terms("allgather", 8, 2e5).time_s(1e-3, 1e9))
