"""`compctl list ...`: every registered item shows up, with parameters, as text and JSON."""

from __future__ import annotations

import json

import pytest

from sim.control import policy_names
from sim.entry import main


def test_list_policies_shows_every_policy_with_parameters(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "policies"]) == 0
    out = capsys.readouterr().out
    for name in policy_names():
        assert f"\n{name}" in f"\n{out}"
    assert "target_compute_ratio = 0.5" in out
    assert "oracle  [simulator only]" in out


def test_list_policies_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "policies", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["name"] for r in rows] == policy_names()
    moo = next(r for r in rows if r["name"] == "moo")
    assert moo["parameters"]["candidates"] == [0.1, 0.033, 0.011, 0.004, 0.001]
    assert moo["parameters"]["time_weight"] == 0.6


@pytest.mark.parametrize("kind,expect", [("compressors", "topk"), ("workloads", "resnet50"),
                                         ("traces", "seed003-steps")])
def test_list_other_kinds(kind: str, expect: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", kind]) == 0
    assert expect in capsys.readouterr().out
    assert main(["list", kind, "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert any(r["name"] == expect for r in rows)


def test_unknown_kind_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["list", "nonsense"])
    assert exc.value.code == 2


def test_unknown_policy_in_sim_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["sim", "--workload", "tiny", "--workers", "4", "--trace",
                 "const:lat_ms=1,bw_gbps=10", "--policy", "dc2-nope", "--iterations", "3",
                 "--quiet"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown policy 'dc2-nope'" in err[0]


def test_sim_runs_a_delay_aware_policy(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["sim", "--workload", "tiny", "--workers", "4", "--trace",
                 "const:lat_ms=1,bw_gbps=10", "--policy", "dc2-aimd", "--param",
                 "target_s=0.001", "--iterations", "20", "--json", "--quiet"])
    assert code == 0
