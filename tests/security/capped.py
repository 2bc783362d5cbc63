"""Run ``compctl`` in a child process under a hard memory cap and measure its CPU time.

A regression in a resource bound would otherwise take the machine's memory with it; under
``RLIMIT_AS`` it fails at once instead (a MemoryError traceback, or a kill), and the test says so.
CPU time rather than wall time is measured because the test machine may be busy.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "Capped",
    "run_capped",
    "run_capped_batch",
    "tree_snapshot",
    "CAP_BYTES",
    "CPU_LIMIT_S",
]

#: The address-space cap of the issue's done-when (2 GiB).
CAP_BYTES = 2 << 30
#: CPU seconds a bounded input may take before it is answered (issue 19's done-when).
CPU_LIMIT_S = 5.0
_HARD_CPU_S = 60  # the kernel stops a runaway child here whatever the test asserts


@dataclass(frozen=True)
class Capped:
    """What a capped child did: exit status, its output, and the CPU seconds it used."""

    rc: int
    stdout: str
    stderr: str
    cpu_s: float
    max_rss_bytes: int

    def one_error_line(self) -> str:
        """The single non-empty stderr line (AssertionError when there are more or none)."""
        lines = [line for line in self.stderr.splitlines() if line.strip()]
        assert len(lines) == 1, f"expected one line on stderr, got:\n{self.stderr}"
        return lines[0]


def _limit() -> None:  # runs in the child between fork and exec
    resource.setrlimit(resource.RLIMIT_AS, (CAP_BYTES, CAP_BYTES))
    resource.setrlimit(resource.RLIMIT_CPU, (_HARD_CPU_S, _HARD_CPU_S))


def run_capped(
    args: list[str], *, cwd: str | os.PathLike[str] | None = None, env: dict[str, str] | None = None
) -> Capped:
    """Run ``compctl ARGS`` under the cap; returns status, output and the child's CPU time."""
    code = "import sys; from sim.entry import main; sys.exit(main(sys.argv[1:]))"
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(  # noqa: S603 - fixed interpreter and arguments
            [sys.executable, "-c", code, *args],
            cwd=cwd,
            env={**os.environ, **(env or {})},
            stdout=out,
            stderr=err,
            preexec_fn=_limit,  # noqa: PLW1509 - the test process is single-threaded here
        )
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Capped(
            rc=proc.returncode,
            stdout=out.read().decode(errors="replace"),
            stderr=err.read().decode(errors="replace"),
            cpu_s=usage.ru_utime + usage.ru_stime,
            max_rss_bytes=usage.ru_maxrss * 1024,  # Linux reports KiB
        )


# One interpreter runs every case in turn (a fresh ``compctl`` costs about 1.5 s of CPU to start):
# each case's exit status, stderr and CPU seconds are written back as one JSON line.
_BATCH = """
import contextlib, io, json, logging, resource, sys, traceback
from sim.entry import main

def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime

for name, argv in json.loads(sys.argv[1]).items():
    logging.root.handlers.clear()  # main() binds its log handler to this case's stderr
    err, start = io.StringIO(), cpu()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            traceback.print_exc(file=err)
            rc = 1
    line = {"name": name, "rc": rc, "stderr": err.getvalue(), "cpu_s": cpu() - start}
    sys.__stdout__.write(json.dumps(line) + "\\n")
    sys.__stdout__.flush()
"""


def run_capped_batch(cases: dict[str, list[str]]) -> dict[str, Capped]:
    """Run several ``compctl`` command lines in one capped child; per-case status and CPU time.

    A case that dies (a kill, or the cap breaking the interpreter itself) leaves the cases after
    it without a result; they are reported with exit status -1 and the child's stderr.
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(  # noqa: S603 - fixed interpreter and arguments
            [sys.executable, "-c", _BATCH, json.dumps(cases)],
            stdout=out,
            stderr=err,
            preexec_fn=_limit,  # noqa: PLW1509 - the test process is single-threaded here
        )
        _, status, usage = os.wait4(proc.pid, 0)
        out.seek(0)
        err.seek(0)
        lines = [json.loads(x) for x in out.read().decode().splitlines() if x.startswith("{")]
        crash = err.read().decode(errors="replace")
    done = {
        d["name"]: Capped(d["rc"], "", d["stderr"], d["cpu_s"], usage.ru_maxrss * 1024)
        for d in lines
    }
    for name in cases:
        done.setdefault(name, Capped(-1, "", f"child ended ({status}):\n{crash}", 0.0, 0))
    return done


def tree_snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (relative path -> bytes), to check nothing was touched."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }
