"""`compctl trace ...` through the real entry point: outputs, exit codes, nothing half-written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sim.entry import main
from traces.csvio import read_trace


def test_list_table_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "list"]) == 0
    out = capsys.readouterr().out
    assert "seed003-steps" in out and "geo-8region" in out
    assert main(["trace", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    by_name = {r["name"]: r for r in rows}
    assert by_name["geo-8region"]["links"] == 8
    assert by_name["seed003-steps"]["duration_s"] == 360.0
    assert "Apache" in by_name["geo-8region"]["source"]


def test_show_human_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "show", "seed003-steps"]) == 0
    out = capsys.readouterr().out
    assert "25 Gbit/s" in out and "32 ms" in out and "then holds" in out
    assert main(["trace", "show", "const:lat_ms=2,bw_mbps=80", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    link = doc["links"][0]
    assert link["latency_mean_s"] == pytest.approx(2e-3)
    assert link["bandwidth_mean_Bps"] == pytest.approx(1e7)


def test_show_mean_is_time_weighted(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "show", "steps:dur_s=1/3,lat_ms=4/8,bw_gbps=8/16", "--json"]) == 0
    link = json.loads(capsys.readouterr().out)["links"][0]
    assert link["latency_mean_s"] == pytest.approx((4 + 3 * 8) / 4 * 1e-3)
    assert link["bandwidth_mean_Bps"] == pytest.approx((1e9 + 3 * 2e9) / 4)


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_gen_writes_readable_file(tmp_path: Path, suffix: str) -> None:
    out = tmp_path / f"g{suffix}"
    rc = main(
        [
            "trace",
            "gen",
            "markov",
            "--param",
            "seed=4",
            "--param",
            "bw_gbps=10",
            "--name",
            "m4",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    ts = read_trace(out)
    assert ts.name == "m4" and ts.links["*"].bandwidth_Bps.max() == pytest.approx(1.25e9)


def test_import_then_show(
    tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "p.csv"
    assert (
        main(
            [
                "trace",
                "import",
                "pensieve",
                str(data_dir / "sample_pensieve.tsv"),
                "--latency-ms",
                "20",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    tr = read_trace(out).links["*"]
    assert tr.latency_s[0] == pytest.approx(0.02) and tr.period_s == pytest.approx(4.5)
    assert (
        main(
            [
                "trace",
                "import",
                "ping",
                str(data_dir / "ping_D.txt"),
                "--bandwidth-gbps",
                "10",
                "--out",
                str(tmp_path / "ping.parquet"),
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "trace",
                "import",
                "skyplane",
                "bundled",
                "--regions",
                "aws:us-east-1,gcp:us-central1-a",
                "--out",
                str(tmp_path / "sky.csv"),
            ]
        )
        == 0
    )
    assert read_trace(tmp_path / "sky.csv").labels == ["aws:us-east-1", "gcp:us-central1-a"]
    assert main(["trace", "import", "skyplane", "bundled", "--list-regions"]) == 0
    assert "aws:us-east-1" in capsys.readouterr().out


def test_plot_writes_png(tmp_path: Path) -> None:
    out = tmp_path / "p.png"
    assert main(["trace", "plot", "geo-8region", "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (
        main(["trace", "plot", "norway-bus-1", "--horizon-s", "400", "--out", str(out), "--force"])
        == 0
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["trace", "show", "no-such-trace"],
        ["trace", "gen", "nope", "--out", "{tmp}/x.csv"],
        ["trace", "gen", "const", "--param", "speed=3", "--out", "{tmp}/x.csv"],
        ["trace", "gen", "const", "--out", "{tmp}/x.txt"],
        ["trace", "import", "pensieve", "{data}/ping_D.txt", "--out", "{tmp}/x.csv"],
        ["trace", "import", "mahimahi", "{data}/missing", "--out", "{tmp}/x.csv"],
        [
            "trace",
            "import",
            "pensieve",
            "{data}/sample_pensieve.tsv",
            "--window-ms",
            "5",
            "--out",
            "{tmp}/x.csv",
        ],
        ["trace", "import", "ping", "{data}/ping_D.txt", "--out", "{tmp}/x.csv"],
        [
            "trace",
            "import",
            "skyplane",
            "bundled",
            "--regions",
            "aws:us-east-1,moon:1",
            "--out",
            "{tmp}/x.csv",
        ],
        ["trace", "import", "iperf3", "{data}/iperf3_error.json", "--out", "{tmp}/x.csv"],
        ["trace", "plot", "seed003-steps", "--out", "{tmp}/x.csv"],
        ["trace", "plot", "nope", "--out", "{tmp}/x.png"],
    ],
)
def test_bad_input_exits_2_and_writes_nothing(
    tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    args = [a.format(tmp=tmp_path, data=data_dir) for a in argv]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("compctl: error: ") and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_gen_name_may_hold_any_character(tmp_path: Path) -> None:
    out = tmp_path / "n.csv"
    assert main(["trace", "gen", "seed003:step_s=1", "--name", "a,b=c", "--out", str(out)]) == 0
    assert read_trace(out).name == "a,b=c"
