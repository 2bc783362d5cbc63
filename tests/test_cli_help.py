"""Every subcommand's ``--help`` shows at least one real example, and ``--version`` works."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from sim.entry import build_parser, main


def _leaf_parsers() -> list[tuple[str, argparse.ArgumentParser]]:
    found: list[tuple[str, argparse.ArgumentParser]] = []

    def walk(path: str, parser: argparse.ArgumentParser) -> None:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if path:
            found.append((path, parser))
        for action in subs:
            for name, child in action.choices.items():
                walk(f"{path} {name}".strip(), child)

    walk("", build_parser())
    return found


@pytest.mark.parametrize("path,parser", _leaf_parsers(), ids=lambda v: str(v))
def test_every_subcommand_help_shows_an_example(
    path: str, parser: argparse.ArgumentParser
) -> None:
    text = parser.format_help()
    assert "example" in text.lower(), f"compctl {path} --help has no example"
    # The example is a command line of this very subcommand (or, for a group, of one of its
    # actions), so it can be copied as it is.
    assert f"compctl {path}" in (parser.epilog or ""), f"compctl {path}: no runnable example"


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("compctl ") and len(out.split()) >= 2


def test_version_from_the_console_script() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "sim.entry", "--version"], capture_output=True, text=True
    )
    assert proc.returncode == 0 and proc.stdout.startswith("compctl ")


@pytest.mark.parametrize("path,parser", _leaf_parsers(), ids=lambda v: str(v))
def test_every_parser_reports_usage_errors_in_one_line(
    path: str, parser: argparse.ArgumentParser, capsys: pytest.CaptureFixture[str]
) -> None:
    # Every subcommand's parser is the one-line kind (argparse builds it from the parent's).
    with pytest.raises(SystemExit) as exc:
        parser.error("argument --x: expected one argument")
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err == (f"compctl {path}: error: argument --x: expected one argument "
                   f"(see 'compctl {path} --help')\n")


@pytest.mark.parametrize("argv,prog", [
    (["sim", "--workload"], "compctl sim"),
    (["trace", "import", "nosuchformat", "f.txt"], "compctl trace import"),
    (["sweep"], "compctl sweep"),
    (["nosuchcommand"], "compctl"),
])
def test_usage_errors_are_one_line_with_status_2(
    argv: list[str], prog: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"{prog}: error: ")
    assert err.endswith(f"(see '{prog} --help')\n") and "usage:" not in err


def test_unrecognized_arguments_point_to_the_subcommand_help(
    capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["cost", "--collective", "ring", "--workers", "8", "--bytes", "1MB",
              "--latency-ms", "1", "--bandwidth-gbps", "10", "--no-such-option", "3"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err == ("compctl: error: unrecognized arguments: --no-such-option 3 "
                   "(see 'compctl cost --help')\n")
