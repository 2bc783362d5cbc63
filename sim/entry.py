"""The ``compctl`` command: assembles each package's subcommands into one parser.

Each package owns its subcommands in a ``cli`` module exposing ``register(subparsers)``; the
modules import their heavy dependencies inside the handlers so ``compctl --help`` stays fast.
Bad input anywhere surfaces as :class:`sim.errors.InputError`: one line on stderr, exit status 2.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from sim.errors import InputError

__all__ = ["main", "build_parser"]

#: Modules that contribute subcommands, in the order they appear in ``--help``.
CLI_MODULES = (
    "sim.cli_sim",
    "sim.cli_list",
    "sim.sweep.cli",
    "traces.cli",
    "sim.compress.cli",
    "realrun.cli",
    "realrun.capture_cli",
    "realrun.calibrate_cli",
    "analysis.cli",
)

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


def build_parser() -> argparse.ArgumentParser:
    """The full ``compctl`` parser with every package's subcommands."""
    parser = argparse.ArgumentParser(
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
    for mod in CLI_MODULES:
        importlib.import_module(mod).register(sub)
    return parser


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
    parser = build_parser()
    args = parser.parse_args(argv)
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
