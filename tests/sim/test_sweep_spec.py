"""Sweep specs: expansion, validation before any run, content-addressed ids."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sweep_fakes import normalize

from sim.errors import InputError
from sim.sweep import expand_spec, load_spec, parse_spec, run_id
from sim.sweep.executor import normalize_config


def _write(tmp_path: Path, text: str, name: str = "spec.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_grid_cases_and_seeds_multiply() -> None:
    spec = parse_spec(
        {
            "seeds": 3,
            "base": {"iterations": 4},
            "grid": {"trace": ["lan", "wan"], "policy_params": {"density": [0.01, 0.1]}},
            "cases": [{"policy": "fixed"}, {"policy": "dc2"}],
        }
    )
    runs = expand_spec(spec, normalize)
    assert spec.n_runs == 2 * 2 * 2 * 3 == len(runs)
    first = runs[0].config
    assert first["iterations"] == 4 and first["policy_params"] == {"density": 0.01}
    assert sorted({r.config["seed"] for r in runs}) == [0, 1, 2]
    assert "case 0" in runs[0].origin and "seed 0" in runs[0].origin


def test_duplicates_collapse_to_one_run() -> None:
    spec = parse_spec({"grid": {"policy": ["dense", "dense"]}})
    assert len(expand_spec(spec, normalize)) == 1


def test_case_overrides_base_and_nested_tables_merge() -> None:
    spec = parse_spec(
        {
            "base": {"policy_params": {"density": 0.5, "alpha": 2}},
            "cases": [{"policy_params": {"density": 0.1}}],
        }
    )
    (run,) = expand_spec(spec)
    assert run.config["policy_params"] == {"density": 0.1, "alpha": 2}


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("gird = {policy = ['dense']}", "unknown top-level key 'gird'"),
        ("[grid]\npolicy = 'dense'", "grid.policy"),
        ("[grid]\npolicy = []", "grid.policy"),
        ("seeds = 0\n[base]\npolicy='dense'", "seeds"),
        ("seeds = [1, 1]\n[base]\npolicy='dense'", "seeds"),
        ("seeds = 2\n[base]\nseed = 1", "seeds"),
        ("cases = 3", "cases"),
        ("[grid\npolicy = 1", "malformed TOML"),
        ("name = 'x'", "defines no runs"),
        ("[base]\niterations = 0", "iterations"),
        ("[[cases]]\ntrace = 'moon'", "trace"),
        ("[base]\npolicy='dense'\n[report]\nheatmap = 'x'", "report.heatmap: unknown report hint"),
        ("[base]\npolicy='dense'\n[report]\ntta_target = 'high'", "report.tta_target"),
    ],
)
def test_malformed_spec_names_the_field(tmp_path: Path, text: str, needle: str) -> None:
    p = _write(tmp_path, text)
    with pytest.raises(InputError, match=needle.replace("[", r"\[")) as err:
        expand_spec(load_spec(p), normalize)
    assert str(p) in str(err.value)
    assert "\n" not in str(err.value)


def test_simulator_validation_names_field_and_run(tmp_path: Path) -> None:
    p = _write(
        tmp_path,
        "[base]\nworkload='resnet50'\ntrace='delay-lowvar'\n[grid]\nworkers = [4, 0]\n",
    )
    with pytest.raises(InputError, match=r"workers=0.*workers must be an integer"):
        expand_spec(load_spec(p), normalize_config)


def test_missing_spec_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such spec file"):
        load_spec(tmp_path / "nope.toml")


def test_relative_trace_files_resolve_next_to_the_spec(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("time_s,latency_s,bandwidth_Bps\n0,0.001,1e9\n")
    p = _write(tmp_path, "[grid]\ntrace = ['t.csv', 'seed003-steps']\n")
    traces = [r.config["trace"] for r in expand_spec(load_spec(p))]
    assert traces == [str((tmp_path / "t.csv").resolve()), "seed003-steps"]


def test_run_id_tracks_file_contents(tmp_path: Path) -> None:
    f = tmp_path / "t.csv"
    f.write_text("a")
    cfg = {"trace": str(f), "policy": "dense"}
    before = run_id(cfg)
    f.write_text("b")
    assert run_id(cfg) != before
    assert run_id({"trace": "lan", "policy": "dense"}) != run_id({"trace": "wan", "policy": "dense"})


json_scalars = st.one_of(st.integers(), st.text(max_size=5), st.booleans(), st.floats(-1e9, 1e9))


@given(st.dictionaries(st.text(min_size=1, max_size=6), json_scalars, min_size=1, max_size=6))
def test_run_id_ignores_key_order(cfg: dict) -> None:
    reordered = dict(reversed(list(cfg.items())))
    assert run_id(cfg) == run_id(reordered)
    assert len(run_id(cfg)) == 16


def test_a_case_grid_is_crossed_for_that_case_only() -> None:
    spec = parse_spec(
        {
            "seeds": 2,
            "grid": {"trace": ["lan", "wan"]},
            "cases": [
                {"policy": "dense"},
                {"policy": "fixed", "grid": {"policy_params": {"density": [0.1, 0.01, 0.001]}}},
            ],
        }
    )
    runs = expand_spec(spec, normalize)
    assert spec.n_runs == len(runs) == (1 + 3) * 2 * 2
    fixed = {r.config["policy_params"]["density"] for r in runs if r.config["policy"] == "fixed"}
    assert fixed == {0.1, 0.01, 0.001}
    assert all("grid" not in r.config for r in runs)
    with pytest.raises(InputError, match=r"cases\[0\].*grid.policy"):
        parse_spec({"cases": [{"grid": {"policy": "dense"}}]})


@given(
    st.dictionaries(
        st.sampled_from(["a", "b", "c", "params.x"]),
        st.lists(st.integers(0, 50), min_size=1, max_size=4, unique=True),
        min_size=1,
        max_size=4,
    ),
    st.integers(1, 3),
)
def test_expansion_is_the_full_cross_product(grid: dict, n_seeds: int) -> None:
    nested: dict = {}
    for key, values in grid.items():
        node = nested
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = values
    spec = parse_spec({"seeds": n_seeds, "grid": nested})
    runs = expand_spec(spec)
    assert len(runs) == spec.n_runs
    assert len({run_id(r.config) for r in runs}) == len(runs)
    for key, values in grid.items():
        parts = key.split(".")
        seen = set()
        for r in runs:
            node = r.config
            for part in parts:
                node = node[part]
            seen.add(node)
        assert seen == set(values)
