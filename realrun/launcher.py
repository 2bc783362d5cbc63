"""Launch a real run on this machine: one process per rank, emulation set up and torn down.

:func:`launch` validates everything in the parent (workload, policy, trace, emulation mode,
output directory), then starts ``nproc`` processes of :mod:`realrun.worker` (inside their own
network namespaces in ``netns`` mode) with torchrun's environment variables, follows the trace
with the kernel shaper where the mode needs one, and waits. Rank 0 writes the run directory
atomically at the end, so a failed or interrupted run leaves nothing that looks finished.
Namespaces are deleted and stray processes killed on every exit path, Ctrl-C included.

For several machines use torchrun directly (see docs/realrun.md).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO

from sim.errors import InputError
from sim.rundir import check_out_dir

from .config import RealConfig
from .worker import T0_FILE_ENV

__all__ = ["launch", "free_port"]

log = logging.getLogger(__name__)


def free_port() -> int:
    """A TCP port that is free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tail(path: Path, n: int = 15) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-n:])


def _first_error_line(text: str) -> str | None:
    for line in text.splitlines():
        if "realrun.worker" in line and "error:" in line:
            return line.split("error:", 1)[1].strip()
    return None


def launch(
    cfg: RealConfig,
    out: str | os.PathLike[str],
    *,
    force: bool = False,
    progress: bool = False,
    timeout_s: float | None = None,
) -> Path:
    """Run ``cfg`` with ``cfg.nproc`` local ranks and write the run directory ``out``."""
    dest = check_out_dir(out, force=force)
    cfg.check()
    if cfg.emulation == "tc":
        from .tcmode import check_tc_mode

        check_tc_mode(cfg.iface or "")
    if cfg.emulation == "netns":
        from .netns import netns_unavailable_reason

        reason = netns_unavailable_reason()
        if reason is not None:
            raise InputError(reason)
    trace = cfg.link_trace()
    with tempfile.TemporaryDirectory(prefix="compctl-real-") as tmp, contextlib.ExitStack() as st:
        scratch = Path(tmp)
        cfg_path = scratch / "config.json"
        cfg_path.write_text(json.dumps(cfg.to_dict()))
        t0_file = scratch / "t0"
        prefixes: list[list[str]] = [[] for _ in range(cfg.nproc)]
        ifaces = ["lo"] * cfg.nproc
        master = "127.0.0.1"
        if cfg.emulation == "netns":
            from .netns import NetnsLab
            from .shaper import TraceShaper

            lab = st.enter_context(NetnsLab(cfg.nproc, bandwidth_Bps=trace.bandwidth_at(0.0)))
            shaper = TraceShaper(trace, lab.apply)
            shaper.start(t0_file=t0_file)
            st.callback(shaper.stop)
            prefixes = [lab.exec_prefix(r) for r in range(cfg.nproc)]
            ifaces = [lab.iface(r) for r in range(cfg.nproc)]
            master = lab.addr(0)
        port = free_port()
        procs: list[subprocess.Popen[bytes]] = []
        logs: list[Path] = []
        handles: list[IO[bytes]] = []
        try:
            for r in range(cfg.nproc):
                env = dict(os.environ)
                env.update(
                    RANK=str(r), WORLD_SIZE=str(cfg.nproc), LOCAL_RANK=str(r),
                    LOCAL_WORLD_SIZE=str(cfg.nproc), MASTER_ADDR=master, MASTER_PORT=str(port),
                    OMP_NUM_THREADS=str(cfg.threads), GLOO_SOCKET_IFNAME=ifaces[r],
                    **{T0_FILE_ENV: str(t0_file)},
                )
                cmd = [*prefixes[r], sys.executable, "-m", "realrun.worker",
                       "--config", str(cfg_path)]
                if r == 0:
                    cmd += ["--out", str(dest)] + (["--force"] if force else [])
                    cmd += ["--progress"] if progress else []
                log_path = scratch / f"rank{r}.log"
                fh: IO[bytes] = open(log_path, "wb")  # noqa: SIM115 - closed in finally
                handles.append(fh)
                logs.append(log_path)
                stderr: IO[bytes] | None = None if (progress and r == 0) else fh
                procs.append(subprocess.Popen(cmd, env=env, stdout=fh, stderr=stderr))
            _wait(procs, logs, timeout_s)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            for fh in handles:
                fh.close()
    return dest


def _wait(procs: list[subprocess.Popen[bytes]], logs: list[Path], timeout_s: float | None) -> None:
    """Wait for every rank; on the first failure stop the others and report why."""
    start = time.monotonic()
    while True:
        codes = [p.poll() for p in procs]
        failed = [r for r, c in enumerate(codes) if c not in (None, 0)]
        if failed:
            r = failed[0]
            time.sleep(0.5)  # let the other ranks print their side of it
            for p in procs:
                if p.poll() is None:
                    p.terminate()
            text = _tail(logs[r])
            line = _first_error_line(text)
            if line is not None and codes[r] == 2:
                raise InputError(line)
            raise RuntimeError(f"rank {r} exited with status {codes[r]}:\n{text}")
        if all(c == 0 for c in codes):
            return
        if timeout_s is not None and time.monotonic() - start > timeout_s:
            raise RuntimeError(f"real run timed out after {timeout_s:.0f} s")
        time.sleep(0.1)
