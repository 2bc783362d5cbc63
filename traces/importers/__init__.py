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
    "IMPORTERS",
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
