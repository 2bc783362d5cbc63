"""Load plugin modules by name, so a registry never imports the modules that register with it.

A registry (policies, compressors, ...) is a module with a ``register_*`` function; each plugin
module imports the registry and registers itself when imported. The registry loads its plugins
on first lookup with :func:`load_plugins`: every module of a built-in package (found on disk, so
adding a plugin is adding one file) and every module named by a Python entry point of a group
(``[project.entry-points."compctl.policies"]`` in a third party's ``pyproject.toml``).
"""

from __future__ import annotations

import importlib
import pkgutil
from importlib.metadata import entry_points

from .errors import InputError

__all__ = ["load_plugins", "package_modules"]


def package_modules(package: str) -> list[str]:
    """Dotted names of the modules directly in ``package`` (not ``_private`` ones), sorted."""
    pkg = importlib.import_module(package)
    return sorted(
        f"{package}.{info.name}"
        for info in pkgutil.iter_modules(pkg.__path__)
        if not info.name.startswith("_")
    )


def load_plugins(package: str | None, group: str | None) -> list[str]:
    """Import every module of the built-in ``package``, then every entry point of ``group``.

    Returns the dotted names of what was loaded, built-ins first. An entry point's value is a
    module (``mypkg.my_policy``) or an object in one (``mypkg.my_policy:register``: called with
    no arguments after import). A plugin that fails to load raises :class:`InputError` naming it.
    """
    loaded = []
    if package is not None:
        for name in package_modules(package):
            importlib.import_module(name)
            loaded.append(name)
    if group is not None:
        for ep in sorted(entry_points(group=group), key=lambda e: (e.name, e.value)):
            try:
                obj = ep.load()
                if ep.attr and callable(obj):
                    obj()
            except Exception as exc:
                raise InputError(
                    f"plugin {ep.name!r} ({ep.value}) of group {group} failed to load: "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
            loaded.append(ep.value)
    return loaded
