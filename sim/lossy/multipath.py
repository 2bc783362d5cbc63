"""Several equal paths between racks: per-flow hashing versus per-packet spraying.

A rack's uplink in a leaf-spine fabric with ``S`` spines is ``S`` parallel links of ``1/S`` of
its bandwidth. ECMP *hashing* puts every flow (a source-destination pair) on one spine chosen by
a hash of the pair, so one elephant flow gets ``1/S`` of the uplink and colliding flows share one
spine while another idles; *spraying* sends each packet on the next spine, so every flow gets the
whole uplink. TCP cannot spray (reordered packets look lost and trigger retransmissions); the
bounded-loss transport can, because gradient packets are order-independent (DLCP).

The simulator keeps one link per rack uplink (the spines' sum) and states the imbalance as load:
under hashing, an uplink's effective bytes are ``S * max_s bytes_on_spine_s``; under spraying
they are its bytes (the ideal split). :func:`effective_uplink_bytes` computes it for one phase.

Pure numpy.
"""

from __future__ import annotations

import numpy as np

__all__ = ["LOAD_BALANCING", "effective_uplink_bytes", "spine_of"]

#: Load-balancing modes a topology may name (``auto``: spray under the bounded-loss transport,
#: hash under the plain one).
LOAD_BALANCING: tuple[str, ...] = ("auto", "hash", "spray")

_MIX_A = np.uint64(0x9E3779B97F4A7C15)
_MIX_B = np.uint64(0xC2B2AE3D27D4EB4F)


def spine_of(src: np.ndarray, dst: np.ndarray, spines: int) -> np.ndarray:
    """The spine ECMP hashing gives each flow ``src -> dst`` (a fixed mix of the pair)."""
    s = np.asarray(src, dtype=np.uint64)
    d = np.asarray(dst, dtype=np.uint64)
    with np.errstate(over="ignore"):
        h = s * _MIX_A ^ (d + np.uint64(1)) * _MIX_B
        h ^= h >> np.uint64(29)
        h *= _MIX_A
        h ^= h >> np.uint64(32)
    return (h % np.uint64(spines)).astype(np.int64)


def effective_uplink_bytes(
    link_ids: np.ndarray,
    nbytes: np.ndarray,
    src: np.ndarray,
    dst: np.ndarray,
    spines: int,
    mode: str,
) -> dict[int, float]:
    """Effective bytes per uplink for messages crossing uplinks ``link_ids`` (one per message,
    -1 for none) with ``nbytes`` each: ``S * max over spines`` under ``hash``, the plain sum
    under ``spray``."""
    out: dict[int, float] = {}
    used = link_ids >= 0
    if not used.any():
        return out
    ids, b = link_ids[used], nbytes[used]
    if mode == "spray" or spines <= 1:
        for lid in np.unique(ids):
            out[int(lid)] = float(b[ids == lid].sum())
        return out
    spine = spine_of(src[used], dst[used], spines)
    for lid in np.unique(ids):
        on = ids == lid
        per = np.bincount(spine[on], weights=b[on], minlength=spines)
        out[int(lid)] = float(spines * per.max())
    return out
