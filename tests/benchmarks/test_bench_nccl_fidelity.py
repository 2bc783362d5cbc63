"""``benchmarks/bench_nccl_fidelity.py``: the bundled published points, the ``compctl cost``
wiring, and the nccl-tests path on a SYNTHETIC all_reduce_perf file made from the model itself
(not a measurement: it checks the harness, not the model's fidelity)."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from bench_scripts import load_script

from sim.entry import main as compctl_main


def _module() -> ModuleType:
    return load_script("bench_nccl_fidelity")


def test_bundled_points_carry_sources_and_settings() -> None:
    pts = _module().read_published()
    assert len(pts) == 20
    assert {p.table for p in pts} == {"gcp-32gbe-tcp", "gcp-32gbe-tcp-8gpu",
                                      "gcp-32gbe-tcp-small", "azure-25g-tcp", "tcp-100g-8gpu"}
    for p in pts:
        assert p.source.startswith("https://github.com/NVIDIA/")
        assert p.ranks >= 2 and p.link_gbps > 0 and p.time_s > 0
    # a busbw row becomes the time it stands for: 2 ranks, 32 MiB at 30.6 Gbit/s
    first = pts[0]
    assert first.time_s == pytest.approx(33554432 * 2 * 1 / 2 / (30.6e9 / 8))


def test_prediction_is_what_compctl_cost_prints(capsys: pytest.CaptureFixture[str]) -> None:
    mod = _module()
    p = mod.read_published()[6]  # 2 nodes x 8 GPUs
    extra = ("--fidelity", "stepwise", "--transport", "nccl")
    assert compctl_main(mod.cost_words(p, extra)) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["workers"] == 16 and printed["transport"] == "nccl"
    assert mod.predict_s(p, extra) == printed["stepwise_time_s"]
    assert compctl_main(mod.cost_words(p)) == 0
    assert mod.predict_s(p) == json.loads(capsys.readouterr().out)["time_s"]


def _synthetic_nccl_tests(path: Path, mod: Any, sizes: list[int]) -> None:
    """A SYNTHETIC all_reduce_perf output whose times are the stepwise nccl model's own."""
    lines = ["# SYNTHETIC: times computed by compctl's stepwise nccl model, not measured",
             "# nThread 1 nGpus 1 minBytes 134217728 maxBytes 268435456 step: 2(factor)"]
    lines += [f"#  Rank {r:2d} Group  0 Pid {100 + r} on node{r // 4} device {r % 4} [0x00] GPU"
              for r in range(16)]
    lines += ["#                                         out-of-place                in-place",
              "#        size        count  type  redop  root  time  algbw  busbw  #wrong"
              "  time  algbw  busbw  #wrong",
              "#         (B)   (elements)                     (us)  (GB/s)  (GB/s)"
              "         (us)  (GB/s)  (GB/s)"]
    for s in sizes:
        p = mod.Point("synthetic", "-", 4, 4, 5.0, 10.0, float(s), 1.0)
        us = mod.predict_s(p, ("--fidelity", "stepwise", "--transport", "nccl")) * 1e6
        lines.append(f"{s:12d} {s // 4:12d}  float  sum  -1  {us:.1f}  0.10  0.19  0  "
                     f"{us:.1f}  0.10  0.19  0")
    path.write_text("\n".join(lines) + "\n")


def test_synthetic_nccl_tests_file_round_trips(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    mod = _module()
    f = tmp_path / "synthetic_all_reduce_perf.txt"
    _synthetic_nccl_tests(f, mod, [128 << 20, 256 << 20])
    argv = ["--nccl-tests", str(f), "--gpus-per-node", "4", "--link-gbps", "5",
            "--delay-ms", "10", "--json"]
    assert mod.main(argv) == 0
    res = json.loads(capsys.readouterr().out)
    t = res["tables"]["synthetic_all_reduce_perf"]
    assert t["rows"] == 2 and {r["ranks"] for r in t["points"]} == {16}
    s = t["summary"]
    # the model reproduces its own times (to the 0.1 us printed) ...
    assert s["stepwise-nccl"]["worst_abs"] < 1e-6
    # ... and the other models differ from it: 4 MiB in flight per connection cannot fill a
    # 5 Gbit/s link at 20 ms round trip, which alpha-beta does not see
    assert s["analytic"]["median_abs"] > 0.10
    assert s["stepwise-ideal"]["median_abs"] > 0.10


def test_markdown_report_names_every_table_and_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert _module().main([]) == 0
    out = capsys.readouterr().out
    for name in ("gcp-32gbe-tcp ", "gcp-32gbe-tcp-8gpu", "azure-25g-tcp", "tcp-100g-8gpu"):
        assert name in out
    assert out.count("stepwise-nccl") == 5


@pytest.mark.parametrize(
    "text, needle",
    [
        ("table,source_url\nx,https://a\n", "missing column"),
        ("table,source_url,nodes,gpus_per_node,link_gbps,added_delay_ms,bytes,"
         "measured_busbw_gbps,measured_time_s\nx,ftp://a,2,1,10,0,1000,1,\n", "source_url"),
        ("table,source_url,nodes,gpus_per_node,link_gbps,added_delay_ms,bytes,"
         "measured_busbw_gbps,measured_time_s\nx,https://a,2,1,10,0,1000,1,0.1\n", "exactly one"),
        ("table,source_url,nodes,gpus_per_node,link_gbps,added_delay_ms,bytes,"
         "measured_busbw_gbps,measured_time_s\nx,https://a,2,1,ten,0,1000,1,\n", "link_gbps"),
    ],
)
def test_bad_published_file_is_one_line_and_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, needle: str
) -> None:
    f = tmp_path / "bad.csv"
    f.write_text(text)
    assert _module().main(["--published", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err


def test_nccl_tests_without_link_rate_is_refused(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "x.txt"
    f.write_text("#  Rank  0 x\n#  Rank  1 x\n")
    assert _module().main(["--nccl-tests", str(f)]) == 2
    assert "--link-gbps" in capsys.readouterr().err


def test_calibration_file_adds_a_model(tmp_path: Path) -> None:
    mod = _module()
    cal = tmp_path / "half.json"
    cal.write_text(json.dumps({"schema": "compctl-transports/1",
                               "transports": {"nccl": {"bandwidth_efficiency": 0.5}}}))
    pts = [p for p in mod.read_published() if p.table == "gcp-32gbe-tcp"]
    res = mod.evaluate(pts, str(cal))
    s = res["tables"]["gcp-32gbe-tcp"]["summary"]
    assert res["models"][-1] == "stepwise-nccl-calibrated"
    # half the link rate doubles the bandwidth-bound time: errors near +90% instead of -4%
    assert s["stepwise-nccl"]["median_signed"] < 0 < 0.8 < s["stepwise-nccl-calibrated"]["median_signed"]
