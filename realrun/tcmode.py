"""``tc`` emulation: netem delay + rate on a named interface, following the trace (root).

For clusters whose kernel has the netem qdisc: every node's local rank 0 runs
``tc qdisc replace dev IF root netem delay D rate R`` at each breakpoint. On a kernel without
netem (as on the machines this project is developed on) :func:`netem_unavailable_reason` says so
and ``compctl real --emulation tc`` stops with one clear line before any process starts.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from pathlib import Path

from sim.errors import InputError
from traces.model import PiecewiseTrace

from .shaper import TraceShaper, run_tc
from .traceplayer import Breakpoint

__all__ = ["netem_unavailable_reason", "check_tc_mode", "netem_args", "start_tc_shaper",
           "start_tc_shaper_from_file"]


def netem_unavailable_reason() -> str | None:
    """Why netem cannot be used here (``None`` if it can).

    Probes by adding a netem qdisc to the loopback of a scratch network namespace, so nothing
    of the host's own networking is touched.
    """
    if os.geteuid() != 0:
        return "emulation 'tc' needs root (it changes qdiscs)"
    if shutil.which("tc") is None or shutil.which("ip") is None:
        return "emulation 'tc' needs the `tc` and `ip` commands (iproute2)"
    name = f"cc-netem-{secrets.token_hex(3)}"
    res = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True)
    if res.returncode != 0:
        return f"cannot create a scratch namespace to probe netem: {res.stderr.strip()}"
    try:
        probe = subprocess.run(
            ["ip", "netns", "exec", name, "tc", "qdisc", "add", "dev", "lo", "root", "netem",
             "delay", "1ms"],
            capture_output=True,
            text=True,
        )
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)
    if probe.returncode != 0:
        said = (probe.stderr or probe.stdout).strip().splitlines()
        return (
            "emulation 'tc' needs the netem qdisc (sch_netem), which this kernel lacks "
            f"(tc said: {said[0] if said else probe.returncode}); use --emulation netns "
            "(bandwidth by tbf, delay in the hook) or --emulation hook"
        )
    return None


def check_tc_mode(iface: str) -> None:
    """:class:`InputError` unless netem works and ``iface`` exists."""
    reason = netem_unavailable_reason()
    if reason is not None:
        raise InputError(reason)
    if not os.path.exists(f"/sys/class/net/{iface}"):
        raise InputError(f"emulation 'tc': no network interface {iface!r}")


def netem_args(latency_s: float, bandwidth_Bps: float) -> list[str]:
    """netem parameters for one link state."""
    return ["netem", "delay", f"{latency_s * 1e6:.0f}us", "rate", f"{int(bandwidth_Bps * 8)}bit"]


def start_tc_shaper(
    iface: str, trace: PiecewiseTrace, t0_s: float, *, horizon_s: float
) -> TraceShaper:
    """Apply the trace's first state to ``iface`` now and follow the trace from ``t0_s``."""
    lat0, bw0, _ = trace.state_at(0.0)
    run_tc(["tc", "qdisc", "replace", "dev", iface, "root", *netem_args(lat0, bw0)])

    def apply(bp: Breakpoint) -> None:
        run_tc(["tc", "qdisc", "replace", "dev", iface, "root",
                *netem_args(bp.latency_s, bp.bandwidth_Bps)])

    shaper = TraceShaper(trace, apply, horizon_s=horizon_s)
    shaper.start(t0_s)
    return shaper


def start_tc_shaper_from_file(iface: str, trace: PiecewiseTrace, t0_file: Path) -> TraceShaper:
    """Apply the trace's first state to ``iface`` now and follow the trace from the origin rank
    0 writes to ``t0_file`` (the launcher's shaper; the launcher restores the qdisc)."""
    lat0, bw0, _ = trace.state_at(0.0)
    run_tc(["tc", "qdisc", "replace", "dev", iface, "root", *netem_args(lat0, bw0)])

    def apply(bp: Breakpoint) -> None:
        run_tc(["tc", "qdisc", "replace", "dev", iface, "root",
                *netem_args(bp.latency_s, bp.bandwidth_Bps)])

    shaper = TraceShaper(trace, apply)
    shaper.start(t0_file=t0_file)
    return shaper
