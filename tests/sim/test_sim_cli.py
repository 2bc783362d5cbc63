"""``compctl sim``, ``compctl cost`` and ``compctl list workloads`` through the real entry point."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from sim.cli_sim import parse_bytes, parse_param
from sim.entry import main
from sim.rundir import read_run
from sim.schema import REQUIRED_COLUMNS


def _errors(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("compctl: error:")]


def test_parse_bytes_units() -> None:
    assert parse_bytes("100MB") == 1e8
    assert parse_bytes("1MiB") == 2**20
    assert parse_bytes("1.5 GiB") == 1.5 * 2**30
    assert parse_bytes("4096") == 4096
    assert parse_bytes("2e3kB") == 2e6
    for bad in ("ten MB", "5 parsecs", "", "-3MB"):
        with pytest.raises(ValueError):
            parse_bytes(bad)


def test_parse_param_types() -> None:
    assert parse_param("a=3") == ("a", 3)
    assert parse_param("a=0.5") == ("a", 0.5)
    assert parse_param("a=true") == ("a", True)
    assert parse_param("a=ring") == ("a", "ring")
    with pytest.raises(ValueError):
        parse_param("novalue")


def test_cost_text_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "cost",
        "--collective",
        "ring",
        "--workers",
        "8",
        "--bytes",
        "100MB",
        "--latency-ms",
        "1",
        "--bandwidth-gbps",
        "10",
    ]
    assert main(argv) == 0
    assert capsys.readouterr().out.startswith("0.154 s")
    assert main([*argv, "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["collective"] == "ring" and math.isclose(obj["time_s"], 0.154, rel_tol=1e-12)


def test_cost_density_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    base = [
        "cost",
        "--workers",
        "8",
        "--bytes",
        "100MB",
        "--latency-ms",
        "1",
        "--bandwidth-gbps",
        "10",
        "--density",
        "0.01",
        "--json",
    ]
    assert main([*base, "--collective", "allgather"]) == 0
    obj = json.loads(capsys.readouterr().out)
    # top-k: 250k values + 250k indices = 2 MB; 3 alpha + 7 * 2e6 / 1.25e9
    assert obj["compressor"] == "topk" and math.isclose(obj["time_s"], 0.0142, rel_tol=1e-12)
    assert main([*base, "--collective", "ring"]) == 0
    obj = json.loads(capsys.readouterr().out)
    # random-k: 1 MB of values over a ring: 14 alpha + 1.75 * 1e6 / 1.25e9
    assert obj["compressor"] == "randomk" and math.isclose(obj["time_s"], 0.0154, rel_tol=1e-12)


@pytest.mark.parametrize(
    "change",
    [
        ["--bandwidth-gbps", "0"],
        ["--bandwidth-gbps", "-5"],
        ["--collective", "butterfly"],
        ["--bytes", "lots"],
        ["--compressor", "topk"],  # topk cannot ride a ring
        ["--density", "2"],
    ],
)
def test_cost_bad_input(change: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    argv = {
        "--collective": "ring",
        "--workers": "8",
        "--bytes": "1MB",
        "--latency-ms": "1",
        "--bandwidth-gbps": "10",
    }
    argv.update(dict(zip(change[::2], change[1::2], strict=True)))
    flat = ["cost"] + [x for kv in argv.items() for x in kv]
    assert main(flat) == 2
    captured = capsys.readouterr()
    assert len(_errors(captured.err)) == 1 and captured.out == ""


def test_sim_writes_a_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "x"
    argv = [
        "sim",
        "--workload",
        "resnet50",
        "--workers",
        "64",
        "--trace",
        "seed003-steps",
        "--collective",
        "ring",
        "--density",
        "0.01",
        "--iterations",
        "40",
        "--seed",
        "1",
        "--out",
        str(out),
        "--json",
        "--quiet",
    ]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    rec, meta = read_run(out)
    assert set(REQUIRED_COLUMNS) <= set(rec.columns) and len(rec) == 40
    assert (rec["source"] == "sim").all() and (rec["compressor"] == "randomk").all()
    assert math.isclose(summary["mean_iter_s"], rec["iter_s"].mean(), rel_tol=1e-12)
    assert meta["config"]["workers"] == 64 and meta["seed"] == 1
    # Same command again into another directory: identical bytes.
    out2 = tmp_path / "y"
    assert main([*argv[:-4], "--out", str(out2), "--quiet"]) == 0
    assert (out / "records.parquet").read_bytes() == (out2 / "records.parquet").read_bytes()
    assert (out / "meta.json").read_bytes() == (out2 / "meta.json").read_bytes()
    # Refuses to overwrite, then --force replaces it.
    assert main(argv) == 2
    assert main([*argv, "--force"]) == 0


def test_sim_policy_params(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "sim",
        "--workload",
        "tiny",
        "--workers",
        "4",
        "--trace",
        "const:lat_ms=1,bw_gbps=1",
        "--param",
        "density=0.2",
        "--param",
        "collective=artopk-ring",
        "--iterations",
        "3",
        "--out",
        str(tmp_path / "r"),
        "--quiet",
    ]
    assert main(argv) == 0
    rec, meta = read_run(tmp_path / "r")
    assert (rec["collective"] == "artopk-ring").all() and (rec["density"] == 0.2).all()
    assert meta["policy"]["params"]["density"] == 0.2


@pytest.mark.parametrize(
    "change",
    [
        ["--workload", "resnet51"],
        ["--collective", "butterfly"],
        ["--trace", "no-such-trace"],
        ["--trace", "BADFILE"],
        ["--workers", "0"],
        ["--policy", "nope"],
        ["--param", "frobnicate=1"],
        ["--bucket-size", "12 parsecs"],
        ["--intra-bandwidth-gbps", "-1"],
    ],
)
def test_sim_bad_input_leaves_nothing(
    change: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("time_s,latency_s,bandwidth_Bps\n0,0.001,0\n")
    opts = {"--workload": "tiny", "--workers": "4", "--trace": "const:lat_ms=1,bw_gbps=1"}
    opts.update(
        {
            k: (str(bad) if v == "BADFILE" else v)
            for k, v in zip(change[::2], change[1::2], strict=True)
        }
    )
    out = tmp_path / "out"
    argv = ["sim"] + [x for kv in opts.items() for x in kv] + ["--out", str(out), "--quiet"]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert len(_errors(captured.err)) == 1 and captured.out == ""
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["bad.csv"]


def test_workloads_listing(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "workloads", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    by_name = {r["name"]: r for r in rows}
    assert by_name["gpt2-small"]["params"] == 124_439_808
    assert by_name["resnet50"]["buckets_25MB"] >= 4


def test_sim_help_has_examples(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["sim", "--help"])
    text = capsys.readouterr().out
    assert "examples:" in text and "--density 0.01" in text
