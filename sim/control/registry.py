"""Registry of control policies by name.

A policy module registers its class with :func:`register_policy`; users build one with
:func:`make_policy` from a name and keyword parameters (the CLI passes ``--param key=value``
pairs). Parameters are the keyword-only arguments of the class constructor, so the registry can
list them with their defaults without running anything.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from compctl_base.errors import InputError
from compctl_base.plugins import load_plugins

from .types import Controller

__all__ = [
    "PolicyInfo",
    "register_policy",
    "unregister_policy",
    "make_policy",
    "policy_names",
    "policy_info",
    "check_params",
    "did_you_mean",
]

_T = TypeVar("_T")


@dataclass(frozen=True)
class PolicyInfo:
    """One registered policy: its name, class, one-line description and parameters."""

    name: str
    factory: Callable[..., Controller]
    description: str
    sim_only: bool = False

    def parameters(self) -> dict[str, Any]:
        """Keyword parameters and their defaults (``inspect.Parameter.empty`` if required)."""
        sig = inspect.signature(self.factory)
        return {
            p.name: p.default
            for p in sig.parameters.values()
            if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
        }


_REGISTRY: dict[str, PolicyInfo] = {}


def register_policy(
    name: str, description: str, *, sim_only: bool = False
) -> Callable[[_T], _T]:
    """Class decorator: register a controller class under ``name``."""

    def wrap(cls: _T) -> _T:
        if name in _REGISTRY:
            raise RuntimeError(f"policy {name!r} registered twice")
        _REGISTRY[name] = PolicyInfo(name, cls, description, sim_only)  # type: ignore[arg-type]
        return cls

    return wrap


def unregister_policy(name: str) -> None:
    """Remove ``name`` from the registry (tests and plugins that register temporarily)."""
    _REGISTRY.pop(name, None)


#: Where the built-in policies live (one module each) and the entry-point group of third-party
#: ones; both are loaded by name on first lookup, so this module imports no policy.
BUILTIN_PACKAGE = "sim.control.policies"
ENTRY_POINT_GROUP = "compctl.policies"
_loaded = False


def _load_builtin() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        load_plugins(BUILTIN_PACKAGE, ENTRY_POINT_GROUP)


def policy_names() -> list[str]:
    """Sorted names of every registered policy."""
    _load_builtin()
    return sorted(_REGISTRY)


def policy_info(name: str) -> PolicyInfo:
    """The registry entry for ``name``; :class:`InputError` if unknown."""
    _load_builtin()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise InputError(
            f"unknown policy {name!r}{did_you_mean(str(name), sorted(_REGISTRY))}; "
            f"known: {', '.join(sorted(_REGISTRY))}"
        ) from None


def did_you_mean(word: str, choices: list[str] | tuple[str, ...]) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``choices`` to ``word``, or ``""``."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _expected_kind(default: Any) -> tuple[str, Callable[[Any], bool]] | None:
    """What a parameter with this default accepts: (description, test), or None for anything."""
    if isinstance(default, bool):
        return "a boolean (true/false)", lambda v: isinstance(v, bool)
    if isinstance(default, int):
        return "an integer", lambda v: isinstance(v, int) and not isinstance(v, bool)
    if isinstance(default, float):
        return "a number", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
    if isinstance(default, str):
        return "a string", lambda v: isinstance(v, str)
    return None  # required, or None by default (e.g. "derive it"): the constructor decides


def check_params(name: str, params: Mapping[str, Any]) -> None:
    """Check parameter names and value types of policy ``name`` without building it.

    :class:`InputError` names the parameter, what it expects and the value given; an unknown
    name lists the valid ones with the closest match.
    """
    info = policy_info(name)
    known = info.parameters()
    for key in sorted(params):
        if key not in known:
            raise InputError(
                f"policy {name!r} has no parameter {key!r}{did_you_mean(key, list(known))}; "
                f"parameters: {', '.join(known) or 'none'}"
            )
        kind = _expected_kind(known[key])
        value = params[key]
        if kind is not None and not kind[1](value):
            raise InputError(
                f"policy {name!r}: parameter {key!r} expects {kind[0]} "
                f"(default {known[key]!r}), got {value!r} ({type(value).__name__})"
            )


def make_policy(name: str, *, seed: int = 0, **params: Any) -> Controller:
    """Build and reset the policy ``name`` with keyword ``params``.

    Unknown parameter names, values of the wrong type and values the constructor rejects raise
    :class:`InputError`.
    """
    info = policy_info(name)
    check_params(name, params)
    try:
        ctl = info.factory(**params)
    except (TypeError, ValueError) as exc:
        raise InputError(f"policy {name!r}: {exc}") from None
    ctl.reset(seed=seed)
    return ctl
