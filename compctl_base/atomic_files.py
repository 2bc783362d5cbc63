"""Write files and replace folders atomically, never through a link someone else planted.

Every temporary file is created by :func:`tempfile.mkstemp` in the destination's own folder
(``O_CREAT | O_EXCL`` with a random name: an existing file or symbolic link of that name makes the
call pick another name instead of opening it), written, flushed and renamed over the destination.
A reader therefore sees the old file or the new one, never half of one, and a planted
``.name.tmp`` symlink is never written through.

:func:`swap_in_dir` puts a finished temporary folder in the place of an existing one: on Linux
with ``renameat2(RENAME_EXCHANGE)`` (one atomic step), elsewhere by renaming the old folder aside
first. The old contents end up in the temporary folder's place and are removed after the swap.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

__all__ = [
    "atomic_open",
    "atomic_path",
    "atomic_write_bytes",
    "atomic_write_text",
    "shared_file_mode",
    "swap_in_dir",
]


def shared_file_mode() -> int:
    """The mode a plain ``open()`` would give a new file under the current umask (e.g. 0o644)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str], *, suffix: str = ".tmp") -> Iterator[Path]:
    """Yield a fresh, empty temporary file beside ``path``; rename it over ``path`` on success.

    For writers that insist on a file name (``DataFrame.to_csv``, ``savefig``): the name was
    created exclusively by this process, so writing to it cannot follow a planted link. ``suffix``
    lets writers that pick a format from the extension see the right one (``".tmp.png"``). On an
    exception the temporary file is removed and ``path`` is left as it was.
    """
    dest = Path(path)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=suffix)
    os.close(fd)
    try:
        os.chmod(tmp, shared_file_mode())  # mkstemp makes 0600; results are meant to be shared
        yield Path(tmp)
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_open(
    path: str | os.PathLike[str], mode: str = "w", *, encoding: str | None = "utf-8"
) -> Iterator[IO[Any]]:
    """Open a temporary sibling of ``path`` for writing; rename it over ``path`` on success.

    ``mode`` is ``"w"`` (text, ``encoding``) or ``"wb"``. The handle is flushed and fsynced before
    the rename so a crash right after it cannot leave an empty file under the final name.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open: mode must be 'w' or 'wb', not {mode!r}")
    dest = Path(path)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, shared_file_mode())
        enc = None if mode == "wb" else encoding
        with os.fdopen(fd, mode, encoding=enc) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically; returns the path."""
    with atomic_open(path, "wb") as fh:
        fh.write(data)
    return Path(path)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically; returns the path."""
    with atomic_open(path, "w") as fh:
        fh.write(text)
    return Path(path)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: str, b: str) -> bool:
    """Swap two paths in one step with Linux ``renameat2``; False where that is unavailable."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):  # no libc found, or a libc older than glibc 2.28
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (22, 38, 95):  # EINVAL, ENOSYS, EOPNOTSUPP: the file system cannot exchange
        return False
    raise OSError(err, os.strerror(err), b)


def swap_in_dir(tmp_dir: str | os.PathLike[str], dest: str | os.PathLike[str]) -> None:
    """Put the finished folder ``tmp_dir`` at ``dest``, replacing the folder there, then delete it.

    Both must be siblings on one file system. ``dest`` is never missing for longer than one
    rename, and when anything fails the old folder stays at (or goes back to) ``dest``.
    """
    tmp, target = os.fspath(tmp_dir), os.fspath(dest)
    if not os.path.lexists(target):
        os.rename(tmp, target)
        return
    if _exchange(tmp, target):
        shutil.rmtree(tmp)  # now holds the old contents
        return
    aside = tempfile.mkdtemp(dir=os.path.dirname(target) or ".", prefix=".old.", suffix=".tmp")
    os.rename(target, aside)  # replaces the empty folder mkdtemp made
    try:
        os.rename(tmp, target)
    except BaseException:
        os.rename(aside, target)
        raise
    shutil.rmtree(aside)
