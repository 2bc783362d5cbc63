"""``compctl list policies|compressors|collectives|workloads|traces``: what can be named on the
command line.

Each listing reads its registry (policies, compressor specs, collectives, workload profiles,
bundled traces),
so a new plugin shows up here without touching this module. ``--json`` prints one JSON object per
line for scripts.
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from collections.abc import Callable
from typing import Any

__all__ = [
    "register",
    "policy_rows",
    "compressor_rows",
    "collective_rows",
    "workload_rows",
    "trace_rows",
]

_EPILOG = """\
examples:
  compctl list policies            # every policy, its parameters and defaults
  compctl list policies --json     # one JSON object per line
  compctl list compressors         # compressors and the collectives that can carry them
  compctl list collectives         # collectives, their closed forms, which "auto" considers
  compctl list workloads
  compctl list traces

Use a policy with its parameters:
  compctl sim --workload resnet50 --workers 64 --trace seed003-steps \\
      --policy dc2-aimd --param target_s=0.05 --param min_density=0.003
"""


def _default_text(value: Any) -> str:
    if value is inspect.Parameter.empty:
        return "(required)"
    return repr(value)


def _jsonable(value: Any) -> Any:
    if value is inspect.Parameter.empty:
        return None
    if isinstance(value, tuple):
        return list(value)
    return value


def policy_rows() -> list[dict[str, Any]]:
    """One row per registered policy: name, description, sim_only, parameters with defaults."""
    from sim.control.registry import policy_info, policy_names

    rows = []
    for name in policy_names():
        info = policy_info(name)
        rows.append(
            {
                "name": name,
                "description": info.description,
                "sim_only": info.sim_only,
                "parameters": {k: _jsonable(v) for k, v in info.parameters().items()},
                "_raw": info.parameters(),
            }
        )
    return rows


def compressor_rows() -> list[dict[str, Any]]:
    """One row per compressor spec: name, description, collectives."""
    from sim.compress.spec import get_spec, spec_names

    return [
        {
            "name": n,
            "description": get_spec(n).description,
            "collectives": list(get_spec(n).collectives),
        }
        for n in spec_names()
    ]


def collective_rows() -> list[dict[str, Any]]:
    """One row per collective: name, kind, description, closed form, whether ``auto`` (the
    selector's default candidates) considers it."""
    from sim.collectives.catalog import COLLECTIVE_INFO
    from sim.control.selector import DEFAULT_ALLOWED
    from sim.control.types import COLLECTIVES

    rows = []
    for name in COLLECTIVES:
        kind, description, closed = COLLECTIVE_INFO[name]
        rows.append(
            {
                "name": name,
                "kind": kind,
                "description": description,
                "closed_form": closed,
                "auto": name in DEFAULT_ALLOWED,
            }
        )
    return rows


def workload_rows() -> list[dict[str, Any]]:
    """One row per built-in workload profile."""
    from sim.workloads import load_profile, profile_names

    rows = []
    for n in profile_names():
        prof = load_profile(n)
        rows.append(
            {
                "name": n,
                "description": prof.description,
                "params": prof.total_params,
                "grad_bytes": prof.grad_bytes(),
                "compute_s": prof.forward_s + prof.backward_s + prof.optimizer_s,
                "buckets_25MB": len(prof.buckets(25e6)),
            }
        )
    return rows


def trace_rows() -> list[dict[str, Any]]:
    """One row per bundled network trace."""
    from traces.bundled import bundled_info

    return [{"name": n, "description": d, "source": s} for n, d, s in bundled_info()]


def _write_policies(rows: list[dict[str, Any]]) -> None:
    for row in rows:
        tag = "  [simulator only]" if row["sim_only"] else ""
        sys.stdout.write(f"{row['name']}{tag}\n    {row['description']}\n")
        for key, value in row["_raw"].items():
            sys.stdout.write(f"      {key} = {_default_text(value)}\n")


def _write_compressors(rows: list[dict[str, Any]]) -> None:
    for row in rows:
        sys.stdout.write(
            f"{row['name']:<12} {row['description']}\n{'':<12} collectives: "
            f"{', '.join(row['collectives'])}\n"
        )


def _write_collectives(rows: list[dict[str, Any]]) -> None:
    for row in rows:
        tag = "  [auto]" if row["auto"] else ""
        sys.stdout.write(
            f"{row['name']:<17} {row['kind']:<10} {row['description']}{tag}\n"
            f"{'':<28} {row['closed_form']}\n"
        )
    sys.stdout.write(
        "a: latency per step, b: seconds per byte, L = ceil(log2 n), t: trailing zero bits of "
        "n-1;\n[auto]: a candidate of collective=auto\n"
    )


def _write_workloads(rows: list[dict[str, Any]]) -> None:
    for row in rows:
        sys.stdout.write(
            f"{row['name']:<14} {row['params'] / 1e6:9.3f} M params  "
            f"compute {row['compute_s'] * 1e3:8.2f} ms  {row['buckets_25MB']:3d} buckets  "
            f"{row['description']}\n"
        )


def _write_traces(rows: list[dict[str, Any]]) -> None:
    for row in rows:
        src = f"  (source: {row['source']})" if row["source"] else ""
        sys.stdout.write(f"{row['name']:<24} {row['description']}{src}\n")


_KINDS: dict[str, tuple[Callable[[], list[dict[str, Any]]], Callable[..., None]]] = {
    "policies": (policy_rows, _write_policies),
    "compressors": (compressor_rows, _write_compressors),
    "collectives": (collective_rows, _write_collectives),
    "workloads": (workload_rows, _write_workloads),
    "traces": (trace_rows, _write_traces),
}


def _run(args: argparse.Namespace) -> int:
    rows_fn, write = _KINDS[args.kind]
    rows = rows_fn()
    if args.json:
        for row in rows:
            clean = {k: v for k, v in row.items() if not k.startswith("_")}
            sys.stdout.write(json.dumps(clean, sort_keys=True) + "\n")
    else:
        write(rows)
    return 0


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add ``list`` to ``sub``."""
    p = sub.add_parser(
        "list",
        help="list policies, compressors, collectives, workloads or bundled traces",
        description=(
            "List what can be named on the command line: control policies (with their "
            "parameters, defaults and a one-line description), compressors (with the "
            "collectives that can carry them), collectives (with their closed forms), "
            "workload profiles and bundled network traces."
        ),
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("kind", choices=sorted(_KINDS), help="what to list")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.set_defaults(func=_run)
