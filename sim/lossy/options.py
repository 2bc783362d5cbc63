"""The bounded-loss options shared by ``compctl sim`` and ``compctl real`` (``--loss-bound``,
``--deadline-ms``; for the simulator also ``--packet-loss`` and ``--rto-ms``), parsed once."""

from __future__ import annotations

import argparse
import math
from typing import Any

from compctl_base.errors import InputError

__all__ = ["add_loss_args", "loss_config"]


def add_loss_args(p: argparse.ArgumentParser, *, simulator: bool) -> None:
    """``--loss-bound`` and ``--deadline-ms`` (and, for the simulator, ``--packet-loss``,
    ``--loss-feedback`` and ``--rto-ms``): the bounded-loss transport (:mod:`sim.lossy`)."""
    p.add_argument(
        "--loss-bound",
        type=float,
        help="bounded-loss transport: fraction of gradient entries a collective may lose, "
        "in [0, 1) (default: none, the plain transport)",
    )
    p.add_argument(
        "--deadline-ms",
        type=float,
        help="bounded-loss transport: per-collective deadline in ms (default: none)",
    )
    if simulator:
        p.add_argument(
            "--packet-loss",
            help="per-packet loss probability in [0, 1), or 'trace' for the trace's loss column "
            "(default: no loss)",
        )
        p.add_argument(
            "--loss-feedback",
            action="store_true",
            help="bounded-loss transport: lost entries are kept by error feedback "
            "(convergence model; default: they are gone)",
        )
        p.add_argument(
            "--rto-ms",
            type=float,
            default=5.0,
            help="plain transport's retransmission timeout in ms (default: 5)",
        )


def loss_config(args: argparse.Namespace) -> dict[str, Any]:
    """The loss fields of a config from ``--loss-bound`` / ``--deadline-ms`` / ``--packet-loss``
    / ``--rto-ms`` (SI units); :class:`InputError` for a value out of range."""
    from sim.lossy import check_fraction

    out: dict[str, Any] = {}
    if args.loss_bound is not None:
        out["loss_bound"] = check_fraction("--loss-bound", args.loss_bound)
    if args.deadline_ms is not None:
        d = args.deadline_ms
        if math.isnan(d) or d <= 0:
            raise InputError(f"--deadline-ms must be > 0 (inf: none), got {d!r}")
        if args.loss_bound is None:
            raise InputError("--deadline-ms needs --loss-bound")
        if math.isfinite(d):
            out["deadline_s"] = d * 1e-3
    raw = getattr(args, "packet_loss", None)
    if raw is not None:
        if raw.strip().lower() == "trace":
            out["trace_loss"] = True
        else:
            try:
                value = float(raw)
            except ValueError:
                raise InputError(
                    f"--packet-loss must be a number in [0, 1) or 'trace', got {raw!r}"
                ) from None
            out["packet_loss"] = check_fraction("--packet-loss", value)
    if getattr(args, "loss_feedback", False):
        if args.loss_bound is None:
            raise InputError("--loss-feedback needs --loss-bound")
        out["loss_feedback"] = True
    rto = getattr(args, "rto_ms", None)
    if rto is not None and rto != 5.0:
        if not math.isfinite(rto) or rto < 0:
            raise InputError(f"--rto-ms must be a finite number >= 0, got {rto!r}")
        out["rto_s"] = rto * 1e-3
    return out
