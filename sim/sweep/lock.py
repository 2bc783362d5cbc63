"""One sweep per folder: ``OUT/.sweep.lock``, held with an advisory lock for the sweep's life.

Two sweeps writing into the same folder would recompute and replace each other's runs. The first
takes an exclusive ``flock`` on ``OUT/.sweep.lock`` and writes its process id there; a second
finds the lock taken and stops with one line naming that process. The operating system drops the
lock when the holder exits, however it exits (a crash or ``kill -9`` included), so a stale file
never blocks a later sweep; the file itself stays, empty of meaning until locked again.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from sim.errors import InputError

__all__ = ["LOCK_FILE", "sweep_lock"]

LOCK_FILE = ".sweep.lock"


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
    except OSError:
        return "unknown"
    return text if text.isdigit() else "unknown"


@contextlib.contextmanager
def sweep_lock(out_dir: str | os.PathLike[str]) -> Iterator[Path]:
    """Hold ``out_dir/.sweep.lock`` for the ``with`` block; :class:`InputError` if taken."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no protection, as before
        yield Path(out_dir) / LOCK_FILE
        return
    path = Path(out_dir) / LOCK_FILE
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as exc:
        raise InputError(f"{path}: cannot create the sweep's lock file ({exc.strerror})") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise InputError(
                f"{out_dir}: another sweep is writing here (pid {_holder(fd)}); wait for it to "
                "finish or stop it, or choose another --out"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        yield path
    finally:
        os.close(fd)  # releases the lock
