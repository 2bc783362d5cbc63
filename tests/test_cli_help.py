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
