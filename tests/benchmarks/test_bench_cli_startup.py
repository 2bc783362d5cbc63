"""The CLI start-up benchmark runs both commands and reports the ratio of their medians."""

from __future__ import annotations

import json
from types import ModuleType

import pytest
from bench_scripts import load_script


def _module() -> ModuleType:
    return load_script("bench_cli_startup")


def test_json_result_has_the_ratio_of_the_medians(capsys: pytest.CaptureFixture[str]) -> None:
    assert _module().main(["--repeats", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["command"].endswith("--help") and out["repeats"] == 1
    base, helped = out["python_pass_median_s"], out["compctl_help_median_s"]
    assert 0 < base and 0 < helped
    assert out["ratio"] == pytest.approx(helped / base)


def test_bad_repeats_is_one_line_and_status_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert _module().main(["--repeats", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--repeats" in err
