"""Find the rank processes of a ``compctl real`` launcher through /proc (Linux), for tests that
stop, kill or inspect them."""

from __future__ import annotations

import os
import time
from pathlib import Path


def children(pid: int) -> list[int]:
    """Direct children of ``pid``."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[1]) == pid:
            out.append(int(entry.name))
    return out


def environ(pid: int) -> dict[str, str]:
    """The environment ``pid`` started with."""
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    pairs = (item.decode(errors="replace").partition("=") for item in raw if b"=" in item)
    return {k: v for k, _, v in pairs}


def cmdline(pid: int) -> list[str]:
    """The command line of ``pid``."""
    return [a.decode() for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if a]


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def ranks_of(launcher: int, n: int, timeout_s: float = 60.0) -> dict[int, int]:
    """``{rank: pid}`` of the launcher's ``n`` rank processes, once they all exist."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = {}
        for pid in children(launcher):
            try:
                cmd, env = cmdline(pid), environ(pid)
            except OSError:
                continue
            if "realrun.worker" in cmd and "RANK" in env:
                found[int(env["RANK"])] = pid
        if len(found) == n:
            return found
        time.sleep(0.1)
    raise AssertionError(f"launcher {launcher}: {n} ranks did not appear")


def log_dir_of(pid: int) -> Path:
    """The ``--log-dir`` a rank was given."""
    cmd = cmdline(pid)
    return Path(cmd[cmd.index("--log-dir") + 1])


def wait_logged(log_dir: Path, rank: int, lines: int, timeout_s: float = 60.0) -> None:
    """Until ``rank`` has logged ``lines`` lines."""
    path = log_dir / f"rank{rank}.jsonl"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_bytes().count(b"\n") >= lines:
            return
        time.sleep(0.05)
    raise AssertionError(f"rank {rank} did not log {lines} lines in {timeout_s} s")


def group_gone(pgid: int) -> bool:
    """True when no live process is left in process group ``pgid``."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = entry.joinpath("stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            return False
    return True


def listening_addresses(pid: int) -> list[str]:
    """Local addresses (hex, as /proc/net/tcp writes them) of the TCP sockets ``pid`` listens on,
    read in the process's own network namespace."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    out = []
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if cols[3] == "0A" and cols[9] in inodes:  # 0A = LISTEN
                out.append(cols[1].rsplit(":", 1)[0])
    return out
