"""The ``compctl`` entry point imports a subcommand's module only when that subcommand runs.

``compctl --help``, ``compctl sim --help``, ``compctl cost ...`` and ``compctl trace ...`` must
not import torch; the table of subcommands in ``sim.entry`` must agree with what each module
registers, so the top-level ``--help`` lists the same names and help as the full parser.
"""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys

from sim.entry import CLI_MODULES, COMMANDS, build_parser

#: Runs each command line in one fresh interpreter; after each it records whether torch has
#: been imported and which subcommand modules have, as one JSON line per command.
_PROBE = """\
import contextlib, io, json, sys
from sim.entry import CLI_MODULES, main
for argv in json.loads(sys.argv[1]):
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = exc.code
    cli = [m for m in CLI_MODULES if m in sys.modules]
    print(json.dumps({"argv": argv, "rc": rc, "torch": "torch" in sys.modules, "cli": cli}))
"""


def _probe(commands: list[list[str]]) -> list[dict[str, object]]:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(commands)],
        capture_output=True, text=True, check=True, timeout=120,
    )
    return [json.loads(line) for line in proc.stdout.splitlines()]


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:  # type: ignore[type-arg]
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def test_light_commands_import_no_torch() -> None:
    commands = [
        ["--help"],
        ["sim", "--help"],
        ["cost", "--collective", "ring", "--workers", "8", "--bytes", "100MB",
         "--latency-ms", "1", "--bandwidth-gbps", "10"],
        ["trace", "--help"],
        ["trace", "list"],
        ["trace", "show", "seed003-steps"],
    ]
    rows = _probe(commands)
    assert [r["argv"] for r in rows] == commands
    for row in rows:
        assert row["rc"] == 0, row
        assert row["torch"] is False, f"compctl {' '.join(row['argv'])} imported torch"  # type: ignore[arg-type]
    # --help imports no subcommand module at all; `sim --help` only the one that defines `sim`.
    assert rows[0]["cli"] == []
    assert rows[1]["cli"] == ["sim.cli_sim"]


def test_a_subcommand_imports_only_its_own_module() -> None:
    rows = _probe([["list", "policies"]])
    assert rows[0]["rc"] == 0
    assert rows[0]["cli"] == ["sim.cli_list"]


def test_table_agrees_with_what_the_modules_register() -> None:
    # Same names, order and one-line help as the full parser, which every module builds itself.
    full = _subparsers(build_parser())
    registered = [(a.dest, a.help) for a in full._choices_actions]
    assert registered == [(name, help_text) for name, _, help_text in COMMANDS]
    # Each module adds exactly the names the table gives it.
    for module in CLI_MODULES:
        parser = argparse.ArgumentParser()
        sub = parser.add_subparsers()
        importlib.import_module(module).register(sub)
        assert list(sub.choices) == [n for n, m, _ in COMMANDS if m == module], module


def test_lazy_parser_gives_the_same_help_as_the_full_one() -> None:
    full = build_parser()
    for name, _, _ in COMMANDS:
        lazy = build_parser(name)
        assert lazy.format_help() == full.format_help()
        assert (
            _subparsers(lazy).choices[name].format_help()
            == _subparsers(full).choices[name].format_help()
        ), name
