"""``netns`` emulation: each rank in its own network namespace, bandwidth shaped by tbf.

Topology for ``n`` ranks (names carry a per-run tag so concurrent runs never collide)::

    ns <tag>-r0: ci0 10.<x>.<y>.1/24 ──veth── cb0 ┐
    ns <tag>-r1: ci1 10.<x>.<y>.2/24 ──veth── cb1 ┼─ bridge br0 in ns <tag>-hub
    ...                                             ┘

Each rank's egress (``ci<i>``) gets ``tbf rate R``; R follows the trace through
``tc qdisc change`` (:class:`~realrun.shaper.TraceShaper`). ``congestion_control`` sets the
TCP congestion controller of the rank namespaces (``net.ipv4.tcp_congestion_control``, one of
the kernel's ``tcp_allowed_congestion_control``; default: the system's). BBR, where it is the
system default, misjudges this topology: tbf lets a burst pass at the veth's speed and the path
has no propagation delay, so BBR measured 1.1-1.2 Gbit/s of bandwidth on a 10 Mbit/s link
(2026-11-26, ``ss -ti``), overfilled the tbf queue (2-10% of packets dropped) and retransmitted
13% of the bytes of a 512 KiB allreduce: large transfers reached 0.72-0.89 of the rate at
10 Mbit/s against ~0.93 at 200 Mbit/s. A loss-based controller (``reno``) fills the queue
without dropping much and moves the 512 KiB allreduce at 0.92 of the rate there too.

The kernel here has no netem, so delay is added by the hook
(:class:`~realrun.emulation.HookEmulator`, mode ``netns``). Gloo is bound to ``ci<i>`` with
``GLOO_SOCKET_IFNAME``.

:class:`NetnsLab` is a context manager: every namespace it created is deleted on exit, also on
errors and Ctrl-C (deleting a namespace deletes its veth ends and the bridge). Needs root.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import subprocess
from dataclasses import replace
from types import TracebackType

from sim.errors import InputError
from sim.transports import Transport

from .shaper import run_tc, run_tc_all
from .traceplayer import Breakpoint

__all__ = ["NetnsLab", "TBF_BURST_S", "TBF_MIN_BURST_BYTES", "check_congestion_control",
           "netns_unavailable_reason", "tbf_args", "with_tbf_burst"]

#: tbf's bucket: this many seconds of traffic at the rate ...
TBF_BURST_S = 0.001
#: ... but at least two full-size (1514 B) frames.
TBF_MIN_BURST_BYTES = 3028

log = logging.getLogger(__name__)


def netns_unavailable_reason() -> str | None:
    """Why netns emulation cannot run here (``None`` if it can): root, ``ip``, ``tc``, netns."""
    if os.geteuid() != 0:
        return "netns emulation needs root (network namespaces and tc)"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"netns emulation needs the `{tool}` command (iproute2)"
    name = f"cc-probe-{os.getpid()}-{secrets.token_hex(2)}"
    res = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True)
    if res.returncode != 0:
        return f"`ip netns add` failed: {res.stderr.strip() or res.returncode}"
    subprocess.run(["ip", "netns", "del", name], capture_output=True)
    return None


def tbf_args(bandwidth_Bps: float) -> list[str]:
    """``tbf`` parameters for a rate: burst of 1 ms of traffic but at least two full-size
    packets, queue up to 100 ms. A small burst matters: between iterations the bucket refills,
    and a large one would let the start of every collective pass at line rate."""
    rate_bit = max(int(round(bandwidth_Bps * 8)), 8000)
    burst = max(int(bandwidth_Bps * TBF_BURST_S), TBF_MIN_BURST_BYTES)
    return ["rate", f"{rate_bit}bit", "burst", str(burst), "latency", "100ms"]


def check_congestion_control(name: str) -> None:
    """InputError unless ``name`` can be a TCP congestion controller's name (letters and
    digits: it goes into a ``sysctl`` argument). Whether the kernel allows it is found when a
    namespace is set up."""
    if not (name.isascii() and name.isalnum()):
        raise InputError(f"not a congestion controller name: {name!r}")


def with_tbf_burst(transport: Transport) -> Transport:
    """``transport`` with the netns links' tbf burst (:func:`tbf_args`) as its shaper burst
    (``burst_s``, ``burst_bytes``: :mod:`sim.transports`), for simulating netns runs."""
    return replace(transport, burst_s=TBF_BURST_S, burst_bytes=float(TBF_MIN_BURST_BYTES))


class NetnsLab:
    """Namespaces, veth pairs and a bridge for ``n`` ranks; use as a context manager.

    Args:
        n: number of ranks.
        bandwidth_Bps: initial rate of every rank's egress (``None``: unshaped).
        tag: name prefix (by default ``cc<pid>-<random>``: the creating process's id, so that
            a stray namespace names its owner).
        congestion_control: TCP congestion controller of the rank namespaces (e.g. ``reno``;
            ``None``: the system default).
    """

    def __init__(self, n: int, *, bandwidth_Bps: float | None = None, tag: str | None = None,
                 congestion_control: str | None = None):
        if n < 1 or n > 250:
            raise InputError(f"netns emulation supports 1..250 ranks, got {n}")
        self.n = n
        self.tag = tag or f"cc{os.getpid()}-{secrets.token_hex(2)}"
        self.hub = f"{self.tag}-hub"
        self._subnet = f"10.{200 + secrets.randbelow(50)}.{secrets.randbelow(250)}"
        self._bw0 = bandwidth_Bps
        if congestion_control is not None:
            check_congestion_control(congestion_control)
        self.congestion_control = congestion_control
        self._created: list[str] = []

    def ns(self, rank: int) -> str:
        """Namespace of ``rank``."""
        return f"{self.tag}-r{rank}"

    def iface(self, rank: int) -> str:
        """The rank's interface inside its namespace."""
        return f"ci{rank}"

    def addr(self, rank: int) -> str:
        """The rank's IPv4 address."""
        return f"{self._subnet}.{rank + 1}"

    def exec_prefix(self, rank: int) -> list[str]:
        """Command prefix that runs a program inside the rank's namespace."""
        return ["ip", "netns", "exec", self.ns(rank)]

    # --------------------------------------------------------------------------- lifecycle
    def __enter__(self) -> NetnsLab:
        reason = netns_unavailable_reason()
        if reason is not None:
            raise InputError(reason)
        try:
            self._setup()
        except BaseException:
            self.cleanup()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cleanup()

    def _ip(self, *args: str, netns: str | None = None) -> None:
        run_tc(["ip", *args], netns=netns)

    def _setup(self) -> None:
        for name in [self.hub] + [self.ns(r) for r in range(self.n)]:
            self._ip("netns", "add", name)
            self._created.append(name)
            self._ip("link", "set", "lo", "up", netns=name)
            if self.congestion_control is not None and name != self.hub:
                run_tc(["sysctl", "-q", "-w",
                        f"net.ipv4.tcp_congestion_control={self.congestion_control}"],
                       netns=name)
        self._ip("link", "add", "br0", "type", "bridge", netns=self.hub)
        self._ip("link", "set", "br0", "up", netns=self.hub)
        for r in range(self.n):
            ns, ci, cb = self.ns(r), self.iface(r), f"cb{r}"
            # Create the pair inside the rank's namespace, then move one end to the hub.
            self._ip("link", "add", ci, "type", "veth", "peer", "name", cb, netns=ns)
            self._ip("link", "set", cb, "netns", self.hub, netns=ns)
            self._ip("link", "set", cb, "master", "br0", netns=self.hub)
            self._ip("link", "set", cb, "up", netns=self.hub)
            self._ip("addr", "add", f"{self.addr(r)}/24", "dev", ci, netns=ns)
            self._ip("link", "set", ci, "up", netns=ns)
            if self._bw0 is not None:
                run_tc(["tc", "qdisc", "add", "dev", ci, "root", "tbf", *tbf_args(self._bw0)],
                       netns=ns)
        log.info("netns lab %s: %d ranks on %s.0/24", self.tag, self.n, self._subnet)

    def set_bandwidth(self, bandwidth_Bps: float) -> None:
        """Change every rank's egress rate now (``tc qdisc change``; add if none yet)."""
        verb = "change" if self._bw0 is not None else "add"
        run_tc_all([(["tc", "qdisc", verb, "dev", self.iface(r), "root", "tbf",
                      *tbf_args(bandwidth_Bps)], self.ns(r)) for r in range(self.n)])
        self._bw0 = bandwidth_Bps

    def apply(self, bp: Breakpoint) -> None:
        """Apply a trace breakpoint's bandwidth (its latency is the hook's job)."""
        self.set_bandwidth(bp.bandwidth_Bps)

    def cleanup(self) -> None:
        """Delete every namespace this lab created (idempotent; errors are logged)."""
        while self._created:
            name = self._created.pop()
            res = subprocess.run(["ip", "netns", "del", name], capture_output=True, text=True)
            if res.returncode != 0:
                log.warning("could not delete netns %s: %s", name, res.stderr.strip())
