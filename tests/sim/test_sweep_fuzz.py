"""Hypothesis-made sweep specs: whatever the spec, a one-line-per-problem error, never a traceback.

Two generators: spec *structures* (what TOML would parse into: tables, lists, scalars of every
type, under the keys a spec knows and some it does not) checked through parse + expand with the
simulator's own validation, and spec *texts* (a valid spec with one line replaced by a random
``key = value``, or plain garbage) run through ``compctl sweep --dry-run`` itself.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sim.entry import main
from sim.errors import InputError
from sim.sweep import expand_spec, normalize_config, parse_spec

FIELDS = [
    "workload", "workers", "trace", "policy", "policy_params", "collective", "density",
    "compressor", "iterations", "seed", "straggler_sigma", "gpus_per_node", "monitor",
    "convergence", "fidelity", "bucket_bytes", "grid", "nonsense",
]
GOOD = {
    "workload": ["tiny", "resnet50", "nope"],
    "trace": ["delay-lowvar", "const", "const:lat_ms=1", "nope", ""],
    "policy": ["dense", "fixed", "dc2-aimd", "moo", "nope"],
    "collective": ["ring", "allgather", "auto", "nope"],
    "compressor": ["topk", "randomk", "none", "nope"],
}

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from([v for vals in GOOD.values() for v in vals]),
    st.datetimes(min_value=datetime.datetime(2000, 1, 1)),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(FIELDS + ["density", "x"]), inner, max_size=3),
    ),
    max_leaves=8,
)
tables = st.dictionaries(st.sampled_from(FIELDS), values, max_size=5)
specs = st.fixed_dictionaries(
    {},
    optional={
        "name": st.one_of(st.text(max_size=8), scalars),
        "seeds": st.one_of(
            st.integers(min_value=-3, max_value=10**12), st.lists(scalars, max_size=4), scalars
        ),
        "base": st.one_of(tables, scalars),
        "grid": st.one_of(st.dictionaries(st.sampled_from(FIELDS), st.lists(values, max_size=3)),
                          scalars),
        "cases": st.one_of(st.lists(tables, max_size=3), scalars),
        "report": st.one_of(st.dictionaries(st.text(max_size=10), scalars, max_size=2), scalars),
        "extra": scalars,
    },
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=specs)
# A billion-run spec must be refused from its counts, before anything is allocated.
@example(raw={"seeds": 10**12, "base": {"workload": "tiny", "workers": 2, "trace": "const"}})
@example(raw={"base": {"workload": "tiny", "policy_params": {"densityy": 0.1}}, "seeds": 1})
def test_any_spec_structure_is_valid_or_an_input_error(raw: dict[str, Any]) -> None:
    try:
        spec = parse_spec(raw)
        runs = expand_spec(spec, normalize_config, max_runs=200)
    except InputError as exc:
        assert str(exc).strip(), "an error must say what is wrong"
        for line in str(exc).splitlines():
            assert line.strip() and "Traceback" not in line
        return
    assert all(isinstance(r.config, dict) for r in runs)


VALID = """name = "f"
seeds = 1
[base]
workload = "tiny"
workers = 2
iterations = 5
trace = "delay-lowvar"
[grid]
policy = ["dense", "fixed"]
"""
keys = st.sampled_from(FIELDS + ["seeds", "name", "[grid]", "[[cases]]", "report.tta_target"])
literals = st.one_of(
    st.sampled_from(
        ['"tiny"', "0", "-1", "1e308", "inf", "nan", "true", "[]", "[1, 2]", "{}", '{ density = "x" }',
         '{ densityy = 0.1 }', "1979-05-27", '"../../x"', "[[1], [2]]", '"' + "a" * 300 + '"']
    ),
    st.integers(min_value=-(2**63), max_value=2**63 - 1).map(str),
    st.text(max_size=10).map(lambda t: '"' + t.replace("\\", "").replace('"', "") + '"'),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture])
@given(line_no=st.integers(min_value=0, max_value=VALID.count("\n") - 1), key=keys,
       value=literals, garbage=st.one_of(st.none(), st.binary(max_size=40)))
# A workload name longer than a file name may be: checking for a file of that name next to the
# spec raised OSError (found by this test on 2026-11-28).
@example(line_no=3, key="workload", value='"' + "a" * 300 + '"', garbage=None)
def test_any_spec_text_exits_0_or_2_without_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line_no: int, key: str, value: str,
    garbage: bytes | None,
) -> None:
    spec = tmp_path / "spec.toml"
    if garbage is not None:
        spec.write_bytes(garbage)
    else:
        lines = VALID.splitlines()
        lines[line_no] = key if key.startswith("[") else f"{key} = {value}"
        spec.write_text("\n".join(lines) + "\n")
    out = tmp_path / "never-made"
    rc = main(["sweep", str(spec), "--out", str(out), "--dry-run", "--max-runs", "50"])
    err = capsys.readouterr().err
    assert rc in (0, 2), err
    assert "Traceback" not in err
    if rc == 2:
        assert err.strip() and all(ln.startswith("compctl: error: ") for ln in err.splitlines())
    assert not out.exists()
