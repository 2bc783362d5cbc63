"""The ``compctl`` command: assembles each package's subcommands into one parser.

Each package owns its subcommands in a ``cli`` module exposing ``register(subparsers)``. The
entry point knows every subcommand's name, module and one-line help from :data:`COMMANDS`, so
``compctl --help`` imports no subcommand module at all and ``compctl NAME ...`` imports only the
module of NAME (which in turn imports its heavy dependencies, torch among them, only when needed).
Bad input anywhere surfaces as :class:`sim.errors.InputError`: one line on stderr, exit status 2.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence
from typing import NoReturn

from sim.errors import InputError

__all__ = ["OneLineErrorParser", "main", "build_parser"]

#: Every subcommand, in the order it appears in ``--help``: its name, the module whose
#: ``register`` adds it, and its one-line help (the same text that module gives it; a test
#: checks both agree). A module's subcommands are listed together.
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("sim", "sim.cli_sim", "simulate data-parallel training over a network trace"),
    ("cost", "sim.cli_sim", "closed-form time of one collective on a constant link"),
    ("list", "sim.cli_list", "list policies, compressors, collectives, workloads or bundled traces"),
    ("sweep", "analysis.sweep_cli",
     "run a sweep spec (policies x traces x scales x seeds), then write its report"),
    ("trace", "sim.cli_trace", "list, generate, import, show and plot network traces"),
    ("bench", "sim.compress.cli", "benchmarks (compressors)"),
    ("real", "realrun.cli",
     "real multi-process DDP training with a controller (records in the sim schema)"),
    ("validate", "analysis.validate_cli",
     "compare a real run with the simulator's prediction (MAPE, correlation, plot)"),
    ("capture", "realrun.capture_cli", "train a real workload and record its gradient trace"),
    ("convergence-run", "realrun.capture_cli",
     "real compressed runs (fixed or scheduled density)"),
    ("convergence-calibrate", "realrun.capture_cli", "fit the convergence model to real runs"),
    ("convergence-predict", "realrun.capture_cli", "predicted progress and time-to-target"),
    ("calibrate", "realrun.calibrate_cli",
     "fit transport parameters to allreduce measurements (or measure this machine)"),
    ("report", "analysis.cli",
     "write an HTML report (plots + tables) of a sweep, run or folder of runs"),
)

#: Modules that contribute subcommands, in ``--help`` order.
CLI_MODULES = tuple(dict.fromkeys(module for _, module, _ in COMMANDS))

_EPILOG = """\
examples:
  compctl sweep examples/quick.toml --out results/quick   # the main job: sweep, then report
  compctl sim --workload resnet50 --workers 64 --trace seed003-steps --policy dense --out runs/x
  compctl cost --collective ring --workers 8 --bytes 100MB --latency-ms 1 --bandwidth-gbps 10
  compctl trace list
  compctl list policies

Units: MB = 10^6 bytes, MiB = 2^20 bytes, Gbit/s = 10^9 bit/s. Every subcommand has --help.
"""


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("compctl")
    except Exception:  # running from a bare checkout, not installed
        return "unknown (not installed)"


class OneLineErrorParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line on stderr and exit status 2, as every
    other bad input of compctl is: ``compctl sim: error: ... (see 'compctl sim --help')``.
    Subcommand parsers are of the same class (argparse builds them from the parent's type)."""

    #: The command whose ``--help`` the message points to, where it is not this parser's own
    #: (the top-level parser reports a subcommand's unrecognized arguments).
    help_prog: str | None = None

    def error(self, message: str) -> NoReturn:
        """Write ``message`` as one line and exit with status 2 (argparse's default prints
        the whole usage block first)."""
        text = " ".join(message.split())
        self.exit(2, f"{self.prog}: error: {text} (see '{self.help_prog or self.prog} --help')\n")


def build_parser(command: str | None = None) -> OneLineErrorParser:
    """The ``compctl`` parser.

    With no ``command``, every package's subcommands are built in full (importing every CLI
    module). With a ``command`` name, only that subcommand's module is imported and its
    subcommands built in full; the others are listed by name and help only, which is all that
    ``compctl --help`` shows. An unknown name builds no module (argparse then rejects it).
    """
    parser = OneLineErrorParser(
        prog="compctl",
        description=(
            "Compression control for data-parallel training over unpredictable networks: "
            "simulate policies and collectives over network traces, run the same controllers "
            "in real PyTorch DDP, and compare."
        ),
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging")
    parser.add_argument(
        "--version", action="version", version=f"compctl {_version()}", help="print the version"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    wanted = {module for name, module, _ in COMMANDS if command is None or name == command}
    registered: set[str] = set()
    for name, module, help_text in COMMANDS:
        if module not in wanted:
            sub.add_parser(name, help=help_text)  # listed only; never parsed into
        elif module not in registered:
            importlib.import_module(module).register(sub)
            registered.add(module)
    return parser


def _command_name(argv: Sequence[str]) -> str | None:
    """The subcommand named in ``argv``: the first word that is not a top-level option."""
    for word in argv:
        if word == "--":
            return None
        if not word.startswith("-"):
            return word
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``compctl`` console script; returns the exit status."""
    from sim.signals import exit_status, interrupt_on_signals

    try:
        # SIGTERM and SIGHUP stop every command the way Ctrl-C does (clean-up, 128 + signal).
        with interrupt_on_signals():
            return _main(argv)
    except KeyboardInterrupt as exc:  # while the subcommands are still being imported
        sys.stderr.write(f"compctl: interrupted ({exc or 'SIGINT'})\n")
        return exit_status(exc)


def _main(argv: Sequence[str] | None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    command = _command_name(words)
    parser = build_parser(command or "")
    if command in {name for name, _, _ in COMMANDS}:
        parser.help_prog = f"compctl {command}"
    args = parser.parse_args(words)
    logging.basicConfig(
        level=logging.WARNING - 10 * min(args.verbose, 2),
        format="%(levelname)s %(name)s: %(message)s",
    )
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    try:
        return int(func(args) or 0)
    except InputError as exc:
        # One line per problem (a sweep lists every bad run), each with the same prefix.
        lines = str(exc).splitlines() or [""]
        sys.stderr.write("".join(f"compctl: error: {line}\n" for line in lines))
        return 2
    except FileNotFoundError as exc:
        sys.stderr.write(f"compctl: error: {exc.filename or exc}: no such file\n")
        return 2
    except KeyboardInterrupt as exc:
        from sim.signals import exit_status

        # Commands that keep partial results (sweep) have said what was kept already.
        if not getattr(exc, "reported", False):
            sys.stderr.write(f"compctl: interrupted ({exc or 'SIGINT'})\n")
        return exit_status(exc)
    except BrokenPipeError:
        # Output piped into `head` and the like: stop quietly, as Unix tools do.
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
