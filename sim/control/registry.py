"""Registry of control policies by name.

A policy module registers its class with :func:`register_policy`; users build one with
:func:`make_policy` from a name and keyword parameters (the CLI passes ``--param key=value``
pairs). Parameters are the keyword-only arguments of the class constructor, so the registry can
list them with their defaults without running anything.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from sim.errors import InputError

from .types import Controller

__all__ = ["PolicyInfo", "register_policy", "make_policy", "policy_names", "policy_info"]

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


def _load_builtin() -> None:
    # Importing the package registers every built-in policy module.
    from . import policies  # noqa: F401


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
            f"unknown policy {name!r}; known: {', '.join(sorted(_REGISTRY))}"
        ) from None


def make_policy(name: str, *, seed: int = 0, **params: Any) -> Controller:
    """Build and reset the policy ``name`` with keyword ``params``.

    Unknown parameter names and values the constructor rejects raise :class:`InputError`.
    """
    info = policy_info(name)
    known = info.parameters()
    bad = sorted(set(params) - set(known))
    if bad:
        raise InputError(
            f"policy {name!r} has no parameter {bad[0]!r}; parameters: {', '.join(known) or 'none'}"
        )
    try:
        ctl = info.factory(**params)
    except (TypeError, ValueError) as exc:
        raise InputError(f"policy {name!r}: {exc}") from None
    ctl.reset(seed=seed)
    return ctl
