"""``benchmarks/bench_netns_validation.py`` without network namespaces: the order of the real
runs (calibration and validated interleaved), which runs ping, the priority block and the
argument errors."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from bench_scripts import load_script


def _module() -> ModuleType:
    return load_script("bench_netns_validation")


def test_runs_interleave_calibration_and_validation(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    mod = _module()
    done: list[tuple[str, int, str]] = []

    def fake_run(tmp: Path, name: str, n: int, policy: str, params: dict[str, Any],
                 trace: str, seed: int, steps: int, agreement: str = "auto") -> Path:
        done.append((name, steps, agreement))
        return tmp / name

    monkeypatch.setattr(mod, "run_one", fake_run)
    monkeypatch.setattr(mod, "CAL_REPEATS", 3)
    runs = mod.real_runs(tmp_path, 2, 100)
    names = [d[0] for d in done]
    kinds = ("dense", "topk", "topk-agree")
    cal_names = [f"n2-cal-{kind}{suffix}" for suffix in ("", "-r1", "-r2") for kind in kinds]
    assert [x for x in names if "-cal-" in x] == cal_names
    assert names[0] == "n2-cal-dense" and names[-1] == "n2-cal-topk-agree-r2"
    cal = [i for i, x in enumerate(names) if "-cal-" in x]
    # the repeats straddle the validated runs: some validated run before the second repeat
    # and after it, none after the last calibration run
    val = [i for i, x in enumerate(names) if "-val-" in x]
    assert val[0] < cal[3] and val[-1] > cal[5] and val[-1] < cal[-1]
    assert len(names) == 9 + 2 * len(mod.POLICIES) and len(set(names)) == len(names)
    assert set(runs) == set(names)
    agreement = dict((d[0], d[2]) for d in done)
    assert agreement["n2-cal-topk-agree"] == agreement["n2-cal-topk-agree-r2"] == "each-step"
    assert dict((d[0], d[1]) for d in done)["n2-val-fixed-topk-10%-stepped"] == 300
    done.clear()
    monkeypatch.setattr(mod, "CAL_REPEATS", 1)
    mod.real_runs(tmp_path, 2, 100)
    assert [d[0] for d in done if "-cal-" in d[0]] == [f"n2-cal-{k}" for k in kinds]


def test_only_adaptive_policies_ping() -> None:
    mod = _module()
    assert mod._pings("dense") == 0 and mod._pings("fixed") == 0
    assert mod._pings("dc2-pi") == mod.LATENCY_PINGS > 0


def test_priority_is_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    mod = _module()
    prio = {"now": 0}
    monkeypatch.setattr(mod.os, "getpriority", lambda which, who: prio["now"])
    monkeypatch.setattr(mod.os, "setpriority",
                        lambda which, who, value: prio.__setitem__("now", value))
    with mod._priority(-5):
        assert prio["now"] == -5
    assert prio["now"] == 0
    with mod._priority(0):
        assert prio["now"] == 0


@pytest.mark.parametrize("argv", [["--latency-pings", "-1"], ["--runs-only"],
                                  ["--delay-policy", "nope"], ["--tcp-cc", "reno;x"],
                                  ["--calibration-repeats", "0"]])
def test_bad_arguments_exit_2(argv: list[str], monkeypatch: pytest.MonkeyPatch,
                              capsys: pytest.CaptureFixture[str]) -> None:
    mod = _module()
    monkeypatch.setattr(sys, "argv", ["bench_netns_validation.py", *argv])
    assert mod.main() == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and err.count("\n") == 1


def test_the_transport_calibration_carries_the_tbf_burst(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Stage 1 re-fitted on kept measurements: the calibration file gets the netns links' tbf
    burst (set from the shaper, not fitted), and ``--no-tbf-burst``'s switch leaves it out."""
    from dataclasses import replace

    from realrun.netns import TBF_BURST_S, TBF_MIN_BURST_BYTES
    from sim.transport_fit import Measurement, predict_s, write_csv
    from sim.transports import TRANSPORTS, load_calibration

    mod = _module()
    truth = replace(TRANSPORTS["gloo"], host_copy_Bps=0.0, bandwidth_efficiency=0.9,
                    allgather_efficiency=0.7, hop_floor_s=3e-4, call_per_tensor=1)
    points = [Measurement(2, float(size), predict_s(truth, 2, size, latency_s=0.0,
                                                    bandwidth_Bps=bw, collective=coll),
                          bw, op)
              for bw in (3.125e6, 12.5e6) for size in mod.CAL_SIZES
              for op, coll in (("allreduce", "ring"), ("allgather", "allgather"))]
    write_csv(str(tmp_path / "transport-n2.csv"), points)
    path, summary = mod.transport_calibration(tmp_path, 2, True)
    tp = load_calibration(str(path))["gloo"]
    assert (tp.burst_s, tp.burst_bytes) == (TBF_BURST_S, TBF_MIN_BURST_BYTES)
    assert tp.allgather_efficiency == pytest.approx(0.7, rel=1e-3)
    monkeypatch.setattr(mod, "TBF_BURST", False)
    path, _ = mod.transport_calibration(tmp_path, 2, True)
    tp = load_calibration(str(path))["gloo"]
    assert (tp.burst_s, tp.burst_bytes) == (0.0, 0.0)
