"""Launch the ranks of a real run on this machine (one node), set up emulation, always clean up.

:func:`launch` validates everything in the parent (workload, policy, trace, device, emulation
mode, output directory), then starts ``nproc`` processes of :mod:`realrun.worker` (inside their
own network namespaces in ``netns`` mode) in one process group of their own, follows the trace
with the kernel shaper where the mode needs one, and watches them:

* every rank appends its measurements to a log as it goes (:mod:`realrun.rank_log`);
* when all ranks succeed, the launcher writes the run rank 0 produced, marked ``complete``;
* when a rank dies, or makes no progress for ``timeout_s``, the others are stopped and the run
  is written from the logs, marked ``failed`` with the reason, the rank and its last stderr;
* on SIGINT, SIGTERM or SIGHUP the ranks are stopped and the run is marked ``interrupted``.

On every exit path the process group is killed, namespaces deleted, an interface's qdisc
restored and the temp folder removed. Ranks die with the launcher (``PR_SET_PDEATHSIG``), and
only the launcher writes the run directory, so a stray rank never writes one.

Several nodes: start ``compctl real --nnodes N --node-rank K --rdzv-endpoint HOST:PORT`` on each
(node 0 writes the run), or use torchrun directly (see the README).

Size (over 400 lines): process start, emulation set-up and guaranteed clean-up (signals,
dead ranks, namespaces) must share one try/finally structure.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from sim.errors import InputError
from sim.rundir import check_out_dir

from .affinity import available_cores, core_for, pin_to
from .config import RealConfig
from .lifecycle import DROP_TO_ENV, LAUNCHER_PID_ENV, readable_by
from .rank_log import log_path, partial_rows, read_rank_logs
from .signals import Interrupted, stop_signals
from .worker import RESOLVED_DEVICE_ENV, T0_FILE_ENV

__all__ = ["launch", "free_port", "RunFailed", "default_timeout_s"]

log = logging.getLogger(__name__)

#: Seconds a rank may take to log its first iteration, whatever ``timeout_s`` says.
_STARTUP_S = 120.0
#: SCHED_FIFO priority of a netns run's trace shaper (as root): the lowest real-time one
SHAPER_RT_PRIORITY = 1
#: Seconds a rank gets to exit after SIGTERM before SIGKILL.
_GRACE_S = 3.0


class RunFailed(Exception):
    """A rank died or hung; the run was written from the ranks' logs, marked ``failed``."""

    def __init__(self, message: str, dest: Path | None) -> None:
        super().__init__(message)
        self.dest = dest


def free_port() -> int:
    """A TCP port that is free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def default_timeout_s(cfg: RealConfig, params: int) -> float:
    """How long a rank may go without finishing an iteration: 20 dense iterations' worth of
    communication at the trace's slowest and highest-latency state, and never under 120 s
    (start-up, data loading and DDP's first iteration fit in that)."""
    trace = cfg.link_trace()
    comm_s = 0.0
    if trace is not None:
        bw = float(min(trace.bandwidth_Bps))
        lat = float(max(trace.latency_s))
        comm_s = 2.0 * params * 4 / bw + 2.0 * cfg.world_size * lat
    return max(120.0, 20.0 * comm_s)


@dataclass(frozen=True)
class _Failure:
    rank: int
    reason: str
    stderr_tail: str
    input_error: str | None = None


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


def _unprivileged_ids() -> tuple[int, int]:
    """Who netns-mode ranks become after set-up: the sudo user, else ``nobody``."""
    uid = int(os.environ.get("SUDO_UID") or 65534)
    gid = int(os.environ.get("SUDO_GID") or 65534)
    return (uid, gid) if uid != 0 else (65534, 65534)


def _drop_plan() -> tuple[str, int, int]:
    """How netns-mode ranks give up root: ``UID:GID`` when that user can read the interpreter,
    torch and this package, else ``caps`` (uid 0 without capabilities)."""
    import torch

    uid, gid = _unprivileged_ids()
    needed = [sys.executable, os.path.dirname(torch.__file__),
              os.path.dirname(os.path.abspath(__file__))]
    if readable_by(uid, gid, needed):
        return f"{uid}:{gid}", uid, gid
    return "caps", 0, 0


def _count_lines(path: Path, offset: int) -> tuple[int, int]:
    """Newlines in ``path`` after byte ``offset`` (only the new part is read), and the offset
    of the end of what was read."""
    with open(path, "rb") as fh:
        fh.seek(offset)
        data = fh.read()
    return data.count(b"\n"), offset + len(data)


def _proc_stat(pid: int) -> list[str]:
    """Fields of ``/proc/PID/stat`` after the command name (empty where unreadable)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return []
    return text[text.rindex(")") + 2:].split()


def _cpu_s(pid: int) -> float:
    """CPU seconds ``pid`` has used (user + system; 0 where unknown)."""
    fields = _proc_stat(pid)
    if len(fields) < 13:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _suspicion(pid: int, cpu_then_s: float, lines: int, written_ns: int) -> tuple[int, ...]:
    """Sort key for stalled ranks, most likely culprit first: a stopped process, then one that
    burnt CPU since its last progress (spinning; ranks waiting for it in a collective sleep),
    then the one with the fewest lines, then the one whose log was written longest ago."""
    fields = _proc_stat(pid)
    stopped = bool(fields) and fields[0] in ("T", "t")
    spinning = _cpu_s(pid) - cpu_then_s > 0.5
    return (not stopped, not spinning, lines, written_ns)


def _consequence_rank(code: int | None) -> int:
    """How likely an exit is a consequence of another rank's failure (lower: a root cause).

    When several ranks are found dead by the same poll, the one to blame is the one that died
    first, which polling cannot see. A rank killed by a signal other than SIGABRT was killed from
    outside or crashed by itself; gloo aborts (SIGABRT) or raises (exit 1) in the ranks whose
    peer vanished, so those rank last; an input error (exit 2) is the rank's own.
    """
    if code is not None and code < 0 and -code != signal.SIGABRT:
        return 0
    if code == 2:
        return 1
    return 2


def _blame(codes: list[int | None]) -> int:
    """The failed rank to report among ``codes`` (exit codes, ``None`` while running)."""
    failed = [r for r, c in enumerate(codes) if c not in (None, 0)]
    return min(failed, key=lambda r: (_consequence_rank(codes[r]), r))


class _Ranks:
    """The rank processes of this node, in one process group."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []
        self.stderr: list[Path] = []
        self._handles: list[IO[bytes]] = []
        self.pgid: int | None = None

    def start(self, cmd: list[str], env: dict[str, str], err_path: Path,
              show_stderr: bool, core: int | None = None) -> None:
        fh: IO[bytes] = open(err_path, "wb")  # noqa: SIM115 - closed in close()
        self._handles.append(fh)
        self.stderr.append(err_path)
        proc = subprocess.Popen(cmd, env=env, stdout=fh, stderr=None if show_stderr else fh,
                                process_group=0 if self.pgid is None else self.pgid,
                                preexec_fn=None if core is None else pin_to(core))
        if self.pgid is None:
            self.pgid = proc.pid
        self.procs.append(proc)

    def wait(self, log_dir: Path, first_rank: int, timeout_s: float) -> _Failure | None:
        """Until every rank exits 0 (``None``), one fails, or one stalls (the failure)."""
        n = len(self.procs)
        now = time.monotonic()
        progress_at = [now] * n
        sizes = [0] * n
        lines = [0] * n
        written_ns = [0] * n
        cpu_at = [_cpu_s(p.pid) for p in self.procs]
        while True:
            codes = [p.poll() for p in self.procs]
            failed = [r for r, c in enumerate(codes) if c not in (None, 0)]
            if failed:
                r = _blame(codes)
                time.sleep(0.5)  # let the other ranks print their side of it
                text = _tail(self.stderr[r])
                status = codes[r]
                how = (f"killed by {signal.Signals(-status).name}" if status is not None
                       and status < 0 else f"exited with status {status}")
                return _Failure(first_rank + r, f"rank {first_rank + r} {how}", text,
                                _first_error_line(text) if status == 2 else None)
            if all(c == 0 for c in codes):
                return None
            now = time.monotonic()
            for r in range(n):
                path = log_path(log_dir, first_rank + r)
                try:
                    st = path.stat()
                except FileNotFoundError:
                    continue
                if st.st_size != sizes[r]:
                    new_lines, sizes[r] = _count_lines(path, sizes[r])
                    lines[r] += new_lines
                    written_ns[r] = st.st_mtime_ns
                    progress_at[r] = now
                    cpu_at[r] = _cpu_s(self.procs[r].pid)
            # Until its first line a rank may also be starting up (imports, data, rendezvous).
            stalled = [r for r in range(n) if codes[r] is None and now - progress_at[r]
                       > (timeout_s if lines[r] else max(timeout_s, _STARTUP_S))]
            if stalled:
                r = min(stalled, key=lambda i: _suspicion(self.procs[i].pid, cpu_at[i],
                                                          lines[i], written_ns[i]))
                return _Failure(first_rank + r,
                                f"rank {first_rank + r} made no progress for {timeout_s:.0f} s "
                                f"(hung after {lines[r]} logged line(s); --timeout-s)",
                                _tail(self.stderr[r]))
            time.sleep(0.1)

    def stop(self) -> None:
        """Stop the whole process group: SIGCONT+SIGTERM, then SIGKILL after a grace period."""
        if self.pgid is not None:
            for sig in (signal.SIGCONT, signal.SIGTERM):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.pgid, sig)
            deadline = time.monotonic() + _GRACE_S
            for p in self.procs:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(timeout=max(deadline - time.monotonic(), 0.01))
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pgid, signal.SIGKILL)
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()

    def close(self) -> None:
        for fh in self._handles:
            fh.close()
        self._handles = []


def _check(cfg: RealConfig, node_rank: int, rdzv: tuple[str, int] | None) -> tuple[str, str]:
    """Everything checkable before a process starts; returns (device kind, backend)."""
    from .devices import check_nproc, machine_facts, resolve_backend, resolve_device

    cfg.check()
    if not 0 <= node_rank < cfg.nnodes:
        raise InputError(f"--node-rank must be in 0..{cfg.nnodes - 1}, got {node_rank}")
    if cfg.nnodes > 1 and rdzv is None:
        raise InputError("--nnodes > 1 needs --rdzv-endpoint HOST:PORT (node 0's address)")
    facts = machine_facts()
    kind = resolve_device(cfg.device, local_ranks=cfg.nproc, facts=facts,
                          share_gpu=cfg.share_gpu)
    check_nproc(cfg.nproc, kind, facts=facts, share_gpu=cfg.share_gpu)
    backend = resolve_backend(cfg.backend, kind)
    if cfg.emulation == "tc":
        from .tcmode import check_tc_mode

        check_tc_mode(cfg.iface or "")
    if cfg.emulation == "netns":
        from .netns import netns_unavailable_reason

        reason = netns_unavailable_reason()
        if reason is not None:
            raise InputError(reason)
    return kind, backend


def launch(
    cfg: RealConfig,
    out: str | os.PathLike[str] | None,
    *,
    force: bool = False,
    progress: bool = False,
    timeout_s: float | None = None,
    node_rank: int = 0,
    rdzv: tuple[str, int] | None = None,
) -> Path | None:
    """Run this node's ``cfg.nproc`` ranks; node 0 writes the run directory ``out``.

    Returns the run directory (``None`` on nodes other than 0). Raises :class:`InputError` for
    bad input (nothing started or written), :class:`RunFailed` when a rank died or hung and
    :class:`~realrun.signals.Interrupted` (a ``KeyboardInterrupt``) on SIGINT/SIGTERM/SIGHUP;
    in the last two cases node 0 has written the run from the ranks' logs, marked ``failed`` or
    ``interrupted``.
    """
    dest = check_out_dir(out, force=force) if node_rank == 0 and out is not None else None
    kind, backend = _check(cfg, node_rank, rdzv)
    from .run_meta import parameter_count

    params = parameter_count(cfg)
    limit_s = default_timeout_s(cfg, params) if timeout_s is None else float(timeout_s)
    if not (math.isfinite(limit_s) and limit_s > 0):
        raise InputError(f"--timeout-s must be a number > 0, got {timeout_s!r}")
    with stop_signals(), tempfile.TemporaryDirectory(prefix="compctl-real-") as tmp:
        scratch = Path(tmp)
        shaped: dict[str, Any] = {}
        try:
            failure = _run_node(cfg, scratch, node_rank, rdzv, progress, limit_s,
                                resolved=(kind, backend), notes=shaped)
        except Interrupted as exc:
            # The ranks are stopped and the namespaces gone; the logs are still here.
            _write_partial(cfg, scratch / "logs", dest, force, params, backend, kind,
                           "interrupted", f"interrupted by {signal.Signals(exc.signum).name}",
                           None)
            raise
        if failure is None:
            if dest is not None:
                notes: dict[str, Any] = dict(_launch_notes(cfg))
                if shaped.get("link_changes"):
                    notes["link_changes"] = shaped["link_changes"]
                _publish(scratch / "run", dest, force, notes)
            return dest
        if failure.input_error is not None:
            raise InputError(failure.input_error)
        _write_partial(cfg, scratch / "logs", dest, force, params, backend, kind, "failed",
                       failure.reason, failure)
        raise RunFailed(failure.reason, dest)


def _run_node(cfg: RealConfig, scratch: Path, node_rank: int, rdzv: tuple[str, int] | None,
              progress: bool, limit_s: float,
              resolved: tuple[str, str] | None = None,
              notes: dict[str, Any] | None = None) -> _Failure | None:
    """Start, watch and stop this node's ranks inside ``scratch``; the failure, if any.

    ``notes``: where a netns run's trace shaper leaves the link changes it applied
    (``link_changes``: :meth:`~realrun.shaper.TraceShaper.link_changes`), once it stopped.

    ``resolved`` (device kind, backend) as the launcher decided them: the ranks use these
    rather than resolving ``auto`` again on their own."""
    log_dir = scratch / "logs"
    log_dir.mkdir()
    cfg_path = scratch / "config.json"
    cfg_path.write_text(json.dumps(cfg.to_dict()))
    t0_file = scratch / "t0"
    n = cfg.nproc
    first = node_rank * n
    prefixes: list[list[str]] = [[] for _ in range(n)]
    ifaces: list[str | None] = ["lo"] * n
    master, port = rdzv if rdzv is not None else ("127.0.0.1", 0)
    extra_env: dict[str, str] = {LAUNCHER_PID_ENV: str(os.getpid()), T0_FILE_ENV: str(t0_file)}
    if resolved is not None:
        extra_env[RESOLVED_DEVICE_ENV] = ",".join(resolved)
    ranks = _Ranks()
    with contextlib.ExitStack() as st:
        # Registered first, so it runs last: the ranks stop before namespaces or qdiscs go.
        st.callback(ranks.close)
        trace = cfg.link_trace()
        if cfg.emulation == "netns":
            from .netns import NetnsLab
            from .shaper import TraceShaper

            lab = st.enter_context(NetnsLab(n, bandwidth_Bps=trace.bandwidth_at(0.0),
                                                congestion_control=cfg.tcp_cc))
            # SCHED_FIFO as root: a change applied on time while the ranks fill the cores
            shaper = TraceShaper(trace, lab.apply,
                                 rt_priority=SHAPER_RT_PRIORITY if os.geteuid() == 0 else 0)
            shaper.start(t0_file=t0_file)
            if notes is not None:
                st.callback(lambda: notes.update(link_changes=shaper.link_changes()))
            st.callback(shaper.stop)
            prefixes = [lab.exec_prefix(r) for r in range(n)]
            ifaces = [lab.iface(r) for r in range(n)]
            master = lab.addr(0)
            plan, uid, gid = _drop_plan()
            if plan != "caps":
                for path in (scratch, log_dir):
                    os.chown(path, uid, gid)
            extra_env[DROP_TO_ENV] = plan
        elif cfg.emulation == "tc":
            from .qdisc_guard import RootQdiscGuard
            from .tcmode import start_tc_shaper_from_file

            st.enter_context(RootQdiscGuard(cfg.iface or ""))
            st.callback(start_tc_shaper_from_file(cfg.iface or "", trace, t0_file).stop)
        if rdzv is not None:
            from .rendezvous import route_iface

            ifaces = [os.environ.get("GLOO_SOCKET_IFNAME") or route_iface(master)] * n
        if port == 0:
            port = free_port()
        st.callback(ranks.stop)
        cores = available_cores() if cfg.pin_cores else []
        for r in range(n):
            env = dict(os.environ)
            env.update(
                RANK=str(first + r), WORLD_SIZE=str(cfg.world_size), LOCAL_RANK=str(r),
                LOCAL_WORLD_SIZE=str(n), MASTER_ADDR=master, MASTER_PORT=str(port),
                OMP_NUM_THREADS=str(cfg.threads), **extra_env,
            )
            iface = ifaces[r]
            if iface:
                env["GLOO_SOCKET_IFNAME"] = iface
            cmd = [*prefixes[r], sys.executable, "-m", "realrun.worker",
                   "--config", str(cfg_path), "--log-dir", str(log_dir),
                   "--timeout-s", str(max(limit_s, _STARTUP_S))]
            if first + r == 0:
                cmd += ["--out", str(scratch / "run")]
                cmd += ["--progress"] if progress else []
            ranks.start(cmd, env, scratch / f"rank{first + r}.err",
                        show_stderr=progress and first + r == 0,
                        core=core_for(r, cores) if cores else None)
        return ranks.wait(log_dir, first, limit_s)
    return None  # pragma: no cover - the block returns


def _launch_notes(cfg: RealConfig) -> dict[str, str]:
    """What the launcher knows and the ranks do not, for ``meta.json``."""
    if cfg.emulation != "netns":
        return {"rank_privileges": "as launched"}
    plan = _drop_plan()[0]
    how = "uid 0 without capabilities" if plan == "caps" else f"uid:gid {plan}"
    return {"rank_privileges": f"root for set-up, then {how}"}


def _publish(src: Path, dest: Path, force: bool, notes: dict[str, Any]) -> None:
    """Copy rank 0's finished run to ``dest`` (the launcher is the only writer of ``dest``),
    with its recorded observation stream when it wrote one."""
    from sim.control.obs_stream import STREAM_FILE
    from sim.rundir import read_run, write_run

    rec, meta = read_run(src)
    stream = src / STREAM_FILE
    extra = {STREAM_FILE: stream.read_bytes()} if stream.is_file() else None
    write_run(dest, rec, {**meta, **notes}, force=force, extra_files=extra)


def _write_partial(cfg: RealConfig, log_dir: Path | None, dest: Path | None, force: bool,
                   params: int, backend: str, kind: str, status: str, reason: str,
                   failure: _Failure | None) -> None:
    """Write the run from the ranks' logs, marked ``status`` (node 0 only)."""
    import pandas as pd

    from sim.rundir import write_run

    from .rank_log import ROW_KEYS
    from .run_meta import run_meta

    if dest is None or log_dir is None or not log_dir.exists():
        return
    rank_logs = read_rank_logs(log_dir)
    policy = cfg.policy if cfg.use_hook else "ddp-builtin"
    rows = partial_rows(rank_logs, policy)
    meta = run_meta(cfg, world=cfg.world_size, params=params, backend=backend, device=kind,
                    status=status)
    meta.update(_launch_notes(cfg))
    meta["reason"] = reason
    meta["records"] = ("partial: each rank's own measurements as logged, maximum over the "
                       "ranks that logged an iteration (not agreed across ranks)")
    meta["iterations_logged"] = {str(r): sum(1 for x in v if x.get("kind") == "iteration")
                                 for r, v in sorted(rank_logs.items())}
    if failure is not None:
        meta["failed_rank"] = failure.rank
        meta["failed_rank_stderr"] = failure.stderr_tail.splitlines()[-15:]
    try:
        write_run(dest, pd.DataFrame(rows, columns=list(ROW_KEYS)), meta, force=force)
    except (OSError, ValueError, InputError) as exc:
        log.error("could not write the %s run to %s: %s", status, dest, exc)
