"""Rendezvous of the ranks ``compctl real`` starts: rank 0's store listens on one address only.

torch's default ``env://`` rendezvous makes rank 0 open a TCPStore on every interface, without
authentication. Here rank 0 binds the listening socket itself, to ``MASTER_ADDR`` (127.0.0.1 on
one machine, the rank's veth address in netns mode, the address given with ``--rdzv-endpoint``
across nodes), and hands it to the store. The port is ``MASTER_PORT``: chosen free on loopback
for local runs, the endpoint's port for multi-node runs (open it between the nodes).

Gloo then binds its own sockets to the interface named by ``GLOO_SOCKET_IFNAME``, which the
launcher sets (``lo``, the rank's veth, or the interface that routes to the rendezvous host).
"""

from __future__ import annotations

import ipaddress
import socket
import subprocess
from datetime import timedelta
from typing import Any

from sim.errors import InputError

__all__ = ["parse_endpoint", "listen_socket", "make_store", "route_iface"]


def parse_endpoint(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (or ``[V6]:PORT``) to ``(host, port)``; :class:`InputError` if malformed."""
    host, sep, port_s = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_s.isdigit() or not 0 < int(port_s) < 65536:
        raise InputError(f"--rdzv-endpoint must be HOST:PORT with a port in 1..65535, "
                         f"got {text!r}")
    if host in ("0.0.0.0", "::", "*"):
        raise InputError("--rdzv-endpoint must name the address to bind, not all interfaces "
                         f"({host})")
    return host, int(port_s)


def listen_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket bound to ``host:port`` only (IPv4 or IPv6 by the address)."""
    try:
        family = socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET
    except ValueError:
        family = socket.AF_INET  # a host name: resolved by bind
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(256)
    except OSError:
        sock.close()
        raise
    return sock


def make_store(rank: int, world: int, host: str, port: int, timeout_s: float) -> Any:
    """The TCPStore of the run: rank 0 serves it on ``host:port`` only, the others connect."""
    import torch.distributed as dist

    timeout = timedelta(seconds=timeout_s)
    if rank == 0:
        sock = listen_socket(host, port)
        # The store owns the descriptor from here on (it closes it when it is destroyed).
        fd = sock.detach()
        return dist.TCPStore(host, port, world, True, timeout, wait_for_workers=False,
                             master_listen_fd=fd)
    return dist.TCPStore(host, port, world, False, timeout)


def _ip(*args: str) -> list[str]:
    try:
        res = subprocess.run(["ip", "-o", *args], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return res.stdout.split() if res.returncode == 0 else []


def route_iface(host: str) -> str | None:
    """The interface gloo should use to reach ``host``: the one that holds it when it is this
    machine's own address (node 0), else the one the route to it leaves by; ``None`` if
    unknown (gloo then picks by the host name)."""
    words = _ip("route", "get", host)
    if words[:1] == ["local"]:
        owner = _ip("addr", "show", "to", host)
        return owner[1] if len(owner) > 1 else None
    if "dev" not in words:
        return None
    i = words.index("dev")
    return words[i + 1] if i + 1 < len(words) else None
