"""Importers from measured-trace formats to :class:`~traces.model.TraceSet`.

One module per format, each with ``import_X(path, **options) -> TraceSet``:

========== ============================================ ==========================
format     input                                        gives
========== ============================================ ==========================
mahimahi   one integer ms per line (1500-byte packets)  bandwidth, looping
pensieve   ``time_s<TAB>Mbit/s`` lines                  bandwidth, looping
ping       Linux ``ping`` output (``-D`` optional)      latency, looping
iperf3     ``iperf3 --json`` report                     bandwidth (+ TCP RTT)
skyplane   directory with latency.csv, throughput.csv   one constant link/region
========== ============================================ ==========================

Malformed input raises :class:`~compctl_base.errors.InputError` with ``file:line``.
"""

from __future__ import annotations

from collections.abc import Callable

from ..model import TraceSet
from .iperf3 import import_iperf3
from .mahimahi import import_mahimahi
from .pensieve import import_pensieve
from .ping import import_ping
from .skyplane import import_skyplane, skyplane_regions

__all__ = [
    "ENTRY_POINT_GROUP",
    "PLUGIN_OPTIONS",
    "IMPORTERS",
    "importers",
    "register_importer",
    "import_iperf3",
    "import_mahimahi",
    "import_pensieve",
    "import_ping",
    "import_skyplane",
    "skyplane_regions",
]

#: Format name -> importer.
IMPORTERS: dict[str, Callable[..., TraceSet]] = {
    "mahimahi": import_mahimahi,
    "pensieve": import_pensieve,
    "ping": import_ping,
    "iperf3": import_iperf3,
    "skyplane": import_skyplane,
}

#: Entry-point group of third-party importers: each names a module that calls
#: :func:`register_importer` when imported.
ENTRY_POINT_GROUP = "compctl.trace_importers"
#: The ``compctl trace import`` options a third-party importer may take (``--latency-ms``
#: arrives as ``latency_s``, ``--name`` as ``name``).
PLUGIN_OPTIONS: tuple[str, ...] = ("latency_ms", "name")
_plugins_loaded = False


def register_importer(name: str, importer: Callable[..., TraceSet]) -> Callable[..., TraceSet]:
    """Add ``importer(path, *, latency_s=None, name=None) -> TraceSet`` as format ``name``."""
    if name in IMPORTERS:
        raise RuntimeError(f"trace importer {name!r} registered twice")
    IMPORTERS[name] = importer
    return importer


def importers() -> dict[str, Callable[..., TraceSet]]:
    """Every format and its importer: the built-in ones and those of entry points."""
    global _plugins_loaded
    if not _plugins_loaded:
        _plugins_loaded = True
        from compctl_base.plugins import load_plugins

        load_plugins(None, ENTRY_POINT_GROUP)
    return dict(IMPORTERS)
