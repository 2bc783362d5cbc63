"""Commands that write one file refuse to replace an existing one unless given --force."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.entry import main

DATA = Path(__file__).parent / "traces" / "data"


def _commands(out: Path) -> dict[str, list[str]]:
    return {
        "trace gen": ["trace", "gen", "const", "--param", "lat_ms=1", "--out", str(out)],
        "trace import": [
            "trace", "import", "pensieve", str(DATA / "sample_pensieve.tsv"),
            "--latency-ms", "20", "--out", str(out),
        ],
    }


@pytest.mark.parametrize("name", ["trace gen", "trace import"])
def test_trace_writers_keep_an_existing_file_without_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    out = tmp_path / "t.csv"
    out.write_text("precious\n")
    argv = _commands(out)[name]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "use --force" in err
    assert out.read_text() == "precious\n"
    assert main([*argv, "--force"]) == 0
    assert out.read_text() != "precious\n"


def test_trace_plot_keeps_an_existing_image(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "t.png"
    out.write_bytes(b"precious")
    assert main(["trace", "plot", "const", "--out", str(out)]) == 2
    assert out.read_bytes() == b"precious"


def test_capture_refuses_before_training(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "g.npz"
    out.write_bytes(b"precious")
    assert main(["capture", "--workload", "digits-mlp", "--steps", "1000000", "--out", str(out)]) == 2
    assert "use --force" in capsys.readouterr().err
    assert out.read_bytes() == b"precious"


def test_report_keeps_a_foreign_file_but_regenerates_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    assert main(["sim", "--workload", "tiny", "--workers", "2", "--trace", "const",
                 "--iterations", "5", "--quiet", "--out", str(run)]) == 0
    foreign = tmp_path / "notes.html"
    foreign.write_text("<p>mine</p>")
    assert main(["report", str(run), "--out", str(foreign)]) == 2
    assert "use --force" in capsys.readouterr().err
    assert foreign.read_text() == "<p>mine</p>"
    assert main(["report", str(run), "--out", str(foreign), "--force"]) == 0
    # The default PATH/report.html is compctl's own: written, then regenerated freely ...
    assert main(["report", str(run)]) == 0
    assert main(["report", str(run)]) == 0
    # ... unless someone else's file took its name.
    (run / "report.html").write_text("<p>mine</p>")
    assert main(["report", str(run)]) == 2
