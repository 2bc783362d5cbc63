"""How a rank started by ``compctl real`` stays tied to its launcher.

* :func:`die_with_launcher`: the kernel kills the rank when its launcher exits
  (``PR_SET_PDEATHSIG`` on Linux); a rank whose launcher is already gone stops at once, so a
  stray rank can never go on training and write results.
* :func:`drop_privileges`: in netns mode the ranks start as root (``ip netns exec``) and give it
  up once their namespace and sockets are set up: they become an unprivileged user when that
  user can read the Python installation and the project, and otherwise stay uid 0 without any
  capability (no network administration, no signalling or reading other users' processes and
  files, nothing regained through exec).
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys

__all__ = ["LAUNCHER_PID_ENV", "DROP_TO_ENV", "die_with_launcher", "launcher_alive",
           "drop_privileges", "drop_capabilities", "readable_by"]

log = logging.getLogger(__name__)

#: Environment variable holding the launcher's process id.
LAUNCHER_PID_ENV = "COMPCTL_LAUNCHER_PID"
#: Environment variable ``UID:GID`` a netns-mode rank switches to after set-up.
DROP_TO_ENV = "COMPCTL_DROP_TO"

_PR_SET_PDEATHSIG = 1
_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS = 38
_CAP_LAST_MAX = 63
_CAPABILITY_VERSION_3 = 0x20080522


def launcher_alive() -> bool:
    """False when this rank was started by a launcher that is gone (it was re-parented)."""
    pid = os.environ.get(LAUNCHER_PID_ENV)
    return pid is None or os.getppid() == int(pid)


def die_with_launcher() -> bool:
    """Ask for SIGKILL when the parent exits; returns False if the launcher is already gone.

    Does nothing (returns True) outside a ``compctl real`` launch or off Linux."""
    if os.environ.get(LAUNCHER_PID_ENV) is None:
        return True
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):  # pragma: no cover - libc without prctl
            log.warning("PR_SET_PDEATHSIG unavailable: this rank will not die with its launcher")
    return launcher_alive()


def drop_capabilities() -> None:
    """Give up every capability for good (bounding set, then effective/permitted/inheritable),
    and forbid gaining privileges through exec. Linux only; :class:`OSError` on failure."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in range(_CAP_LAST_MAX + 1):
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != 22:
            raise OSError(ctypes.get_errno(), f"PR_CAPBSET_DROP {cap} failed")
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS failed")
    header = (ctypes.c_uint32 * 2)(_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # two {effective, permitted, inheritable} sets, all zero
    if libc.capset(header, data) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")


def drop_privileges() -> str | None:
    """Give up root as :data:`DROP_TO_ENV` says: ``UID:GID`` switches user, ``caps`` drops
    every capability. Returns what was done (``None``: nothing asked, or not root).

    Changing credentials clears the parent-death signal, so it is set again afterwards."""
    spec = os.environ.get(DROP_TO_ENV)
    if not spec or os.geteuid() != 0:
        return None
    if spec == "caps":
        drop_capabilities()
        return "caps"
    uid_s, _, gid_s = spec.partition(":")
    uid, gid = int(uid_s), int(gid_s or uid_s)
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    die_with_launcher()
    return f"uid {uid}"


def readable_by(uid: int, gid: int, paths: list[str]) -> bool:
    """Whether ``uid:gid`` can reach and read every path (by the permission bits of each path
    and of every folder above it; no ACLs)."""
    import stat
    from pathlib import Path

    for raw in paths:
        p = Path(raw).resolve()
        for node in [*reversed(p.parents), p]:
            try:
                st = node.stat()
            except OSError:
                return False
            need = stat.S_IXOTH if node.is_dir() else stat.S_IROTH
            if st.st_uid == uid:
                need = stat.S_IXUSR if node.is_dir() else stat.S_IRUSR
            elif st.st_gid == gid:
                need = stat.S_IXGRP if node.is_dir() else stat.S_IRGRP
            if not st.st_mode & need:
                return False
    return True
