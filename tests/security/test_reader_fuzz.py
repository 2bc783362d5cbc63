"""Fuzzing the input readers: any bytes give a result or one :class:`InputError`, never a crash.

Each reader gets random bytes, and valid files with random bytes overwritten or cut off (which
reach deeper than pure noise). An exception other than ``InputError`` is a bug: on the command
line it would be a traceback instead of one line and exit status 2.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.errors import InputError
from traces.bundled import DATA_DIR
from traces.csvio import read_trace
from traces.gradtrace import GRADS_DIR, read_gradtrace
from traces.importers import import_iperf3

_FUZZ = settings(
    max_examples=int(os.environ.get("COMPCTL_FUZZ_EXAMPLES", "60")), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
_VALID_CSV = (DATA_DIR / "fcc-10322.csv").read_bytes()
_VALID_NPZ = sorted(GRADS_DIR.glob("*.npz"))[0].read_bytes()
_VALID_IPERF = json.dumps(
    {
        "intervals": [
            {"sum": {"start": i, "end": i + 1, "bits_per_second": 1e9}, "streams": []}
            for i in range(3)
        ]
    }
).encode()


def _mutated(valid: bytes) -> st.SearchStrategy[bytes]:
    """``valid`` with a few bytes overwritten, or cut short, or both."""

    @st.composite
    def build(draw: st.DrawFn) -> bytes:
        data = bytearray(valid)
        for _ in range(draw(st.integers(0, 8))):
            pos = draw(st.integers(0, len(data) - 1))
            data[pos] = draw(st.integers(0, 255))
        cut = draw(st.integers(0, len(data)))
        return bytes(data[:cut]) if draw(st.booleans()) else bytes(data)

    return build()


def _survives(reader: Callable[[Path], Any], data: bytes, suffix: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"input{suffix}"
        path.write_bytes(data)
        try:
            reader(path)
        except InputError as exc:
            assert "\n" not in str(exc).strip(), str(exc)


@_FUZZ
@given(st.one_of(st.binary(max_size=400), _mutated(_VALID_CSV)))
def test_csv_trace_reader(data: bytes) -> None:
    _survives(read_trace, data, ".csv")


@_FUZZ
@given(
    st.lists(
        st.lists(st.one_of(st.floats(), st.text(max_size=5)), min_size=1, max_size=5),
        max_size=6,
    )
)
def test_csv_trace_reader_on_tables(rows: list[list[Any]]) -> None:
    body = "\n".join(",".join(str(v) for v in row) for row in rows)
    _survives(read_trace, ("time_s,latency_s,bandwidth_Bps\n" + body).encode(), ".csv")


@_FUZZ
@given(st.one_of(st.binary(max_size=400), _mutated(_VALID_NPZ)))
def test_gradient_trace_reader(data: bytes) -> None:
    _survives(read_gradtrace, data, ".npz")


@_FUZZ
@given(
    st.dictionaries(
        st.sampled_from(["header", "steps", "numel", "kept_sq", "comp_sq", "evil"]),
        st.one_of(
            st.just(np.zeros(3)),
            st.just(np.asarray("{}")),
            st.just(np.asarray('{"format": 1, "layers": 3}')),
            st.just(np.arange(4, dtype=np.int8)),
            st.just(np.zeros((2, 0))),
        ),
        max_size=6,
    )
)
def test_gradient_trace_reader_on_wrong_arrays(arrays: dict[str, np.ndarray]) -> None:
    buf = io.BytesIO()
    np.savez(buf, **arrays)  # type: ignore[arg-type]
    _survives(read_gradtrace, buf.getvalue(), ".npz")


@_FUZZ
@given(st.one_of(st.binary(max_size=300), _mutated(_VALID_IPERF)))
def test_iperf3_importer(data: bytes) -> None:
    _survives(import_iperf3, data, ".json")


@pytest.mark.parametrize("reader", [read_trace, read_gradtrace])
def test_readers_accept_their_valid_input(reader: Callable[[Path], Any]) -> None:
    """The fuzz above mutates these; they must read cleanly unmutated."""
    if reader is read_trace:
        assert read_trace(DATA_DIR / "fcc-10322.csv").links
    else:
        assert read_gradtrace(sorted(GRADS_DIR.glob("*.npz"))[0]).steps.size >= 2


def _generator_keys() -> dict[str, list[str]]:
    from traces.genspec import GENERATOR_KINDS, generator_help

    help_rows = {kind: params for kind, _, params in generator_help()}
    return {k: [p.split("=")[0] for p in help_rows.get(k, [])] for k in GENERATOR_KINDS}


_NUMBERS = st.sampled_from(
    ["0", "-1", "1e-300", "1e300", "inf", "nan", "1", "0.5", "3", "1e7", "x", "none", "true"]
)


@st.composite
def _generator_specs(draw: st.DrawFn) -> str:
    keys = _generator_keys()
    kind = draw(st.sampled_from(sorted(keys)))
    names = keys[kind] or ["duration_s"]
    pairs = draw(st.lists(st.tuples(st.sampled_from(names), _NUMBERS), max_size=4))
    return kind + (":" + ",".join(f"{k}={v}" for k, v in pairs) if pairs else "")


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # overflow on the way to a refusal
@_FUZZ
@given(_generator_specs())
def test_generator_specs(spec: str) -> None:
    from traces.genspec import generate

    try:
        generate(spec)
    except InputError as exc:
        assert "\n" not in str(exc).strip(), str(exc)
