"""Remember an interface's root qdisc before a run shapes it, and put it back afterwards.

``tc`` mode replaces the root qdisc of a real interface; leaving netem behind would slow the
host's traffic long after the run. :class:`RootQdiscGuard` reads the root qdisc first
(``tc qdisc show dev IF root``) and on exit restores it: the kernel's default (handle ``0:``,
nothing shown) by deleting the run's qdisc, anything else by replacing the root with the saved
kind, handle and parameters. Failures to restore are logged, never raised over the run's error.
"""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Callable, Sequence
from types import TracebackType

__all__ = ["RootQdiscGuard", "parse_root_qdisc"]

log = logging.getLogger(__name__)

Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


def _run(cmd: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(cmd), capture_output=True, text=True, check=False)


def parse_root_qdisc(show: str) -> list[str] | None:
    """``["handle", H, kind, *params]`` of the root qdisc in ``tc qdisc show`` output, or
    ``None`` when the root is the kernel's default (not shown, or handle ``0:``)."""
    for line in show.splitlines():
        words = line.split()
        if len(words) < 3 or words[0] != "qdisc" or "root" not in words:
            continue
        kind, handle = words[1], words[2]
        if handle == "0:":
            return None
        rest = words[words.index("root") + 1:]
        if rest[:1] == ["refcnt"]:
            rest = rest[2:]
        return ["handle", handle, kind, *rest]
    return None


class RootQdiscGuard:
    """Context manager: the root qdisc of ``iface`` (in ``netns`` if given) is restored on exit."""

    def __init__(self, iface: str, *, netns: str | None = None, runner: Runner = _run) -> None:
        self.iface = iface
        self._prefix = ["ip", "netns", "exec", netns] if netns else []
        self._run = runner
        self.saved: list[str] | None = None

    def __enter__(self) -> RootQdiscGuard:
        res = self._run([*self._prefix, "tc", "qdisc", "show", "dev", self.iface, "root"])
        self.saved = parse_root_qdisc(res.stdout) if res.returncode == 0 else None
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.restore()

    def restore(self) -> None:
        """Put the saved root qdisc back (or the default); logs what it could not do."""
        base = [*self._prefix, "tc", "qdisc"]
        if self.saved is None:
            res = self._run([*base, "del", "dev", self.iface, "root"])
            if res.returncode != 0 and "handle of zero" not in res.stderr:
                log.warning("could not remove the run's qdisc from %s: %s", self.iface,
                            res.stderr.strip())
            return
        res = self._run([*base, "replace", "dev", self.iface, "root", *self.saved])
        if res.returncode != 0:
            log.warning("could not restore the root qdisc of %s (%s): %s", self.iface,
                        " ".join(self.saved), res.stderr.strip())
