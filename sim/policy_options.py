"""The controller options of ``compctl sim`` and ``compctl real``: one set of names, one parser.

Both commands add them with :func:`add_policy_args` and read them with :func:`policy_from_args`;
the configurations resolve the shortcuts the same way
(:func:`sim.control.world.resolve_policy_params`).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any

from compctl_base.errors import InputError
from sim.control.params import parse_param

__all__ = ["PolicyChoice", "add_policy_args", "policy_from_args"]


@dataclass(frozen=True)
class PolicyChoice:
    """What the controller options say: policy, its ``--param`` values, the shortcuts, seed
    and length of the run."""

    policy: str
    params: dict[str, Any] = field(default_factory=dict)
    collective: str | None = None
    density: float | None = None
    compressor: str | None = None
    auto_collectives: str | None = None
    iterations: int = 100
    seed: int = 0


def add_policy_args(
    p: argparse.ArgumentParser, *, default_policy: str, default_iterations: int
) -> None:
    """Add ``--policy``, ``--param``, ``--collective``, ``--auto-collectives``, ``--density``,
    ``--compressor``, ``--iterations`` and ``--seed`` to ``p``."""
    p.add_argument(
        "--policy", default=default_policy, help=f"control policy (default: {default_policy})"
    )
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="policy parameter (repeatable); see compctl list policies",
    )
    p.add_argument(
        "--collective",
        help="collective for the static policies (fixed, dense), or auto (cost-model choice)",
    )
    p.add_argument(
        "--auto-collectives",
        metavar="SET",
        help="candidates of collective auto: default (ring, tree, ps, allgather, artopk-ring, "
        "artopk-tree), all (adds rhd, hierarchical, double-tree, allgather-ring, "
        "allgather-direct) or comma-separated names, earlier ones winning ties "
        "(default: the policy's own, i.e. default)",
    )
    p.add_argument("--density", type=float, help="density kept, in (0, 1]")
    p.add_argument("--compressor", help="compressor name (see compctl list compressors)")
    p.add_argument(
        "--iterations",
        type=int,
        default=default_iterations,
        help=f"iterations (default: {default_iterations})",
    )
    p.add_argument("--seed", type=int, default=0, help="root seed (default: 0)")


def policy_from_args(args: argparse.Namespace) -> PolicyChoice:
    """The :class:`PolicyChoice` of parsed options; :class:`InputError` for a malformed or
    repeated ``--param``."""
    params = dict(parse_param(s) for s in args.param)
    if len(params) != len(args.param):
        raise InputError("a --param key is given twice")
    return PolicyChoice(
        policy=args.policy,
        params=params,
        collective=args.collective,
        density=args.density,
        compressor=args.compressor,
        auto_collectives=args.auto_collectives,
        iterations=args.iterations,
        seed=args.seed,
    )
