"""Content-addressed run ids: the same configuration always maps to the same directory name.

The id hashes the canonical JSON of a run's configuration together with the record-schema
version, the compctl version and the SHA-256 of every file the configuration names (a trace
file edited in place must not reuse the old results). A re-run sweep therefore finds finished
runs by name and skips them, and two sweeps sharing runs share their ids.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from typing import Any

from sim.schema import SCHEMA_VERSION

__all__ = ["canonical_json", "run_id", "ID_VERSION", "ID_LENGTH"]

#: Bumped when the meaning of a configuration changes in a way the other inputs do not capture.
ID_VERSION = 1
#: Hex digits kept from the SHA-256 (64 bits: collisions are not a practical concern here).
ID_LENGTH = 16


def canonical_json(config: Any) -> str:
    """Key-sorted, whitespace-free JSON; raises :class:`TypeError` for non-JSON values."""
    return json.dumps(config, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


@functools.lru_cache(maxsize=1)
def _code_version() -> str:
    try:
        from importlib.metadata import version

        return version("compctl")
    except Exception:  # not installed (running from a bare checkout): the schema still counts
        return "unknown"


@functools.lru_cache(maxsize=256)
def _file_digest(path: str, mtime_ns: int, size: int) -> str:
    # mtime and size are part of the cache key so an edited file is hashed again.
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _named_files(config: Any) -> list[str]:
    found: list[str] = []
    if isinstance(config, dict):
        for value in config.values():
            found.extend(_named_files(value))
    elif isinstance(config, list):
        for value in config:
            found.extend(_named_files(value))
    elif isinstance(config, str) and os.path.isabs(config) and os.path.isfile(config):
        found.append(config)
    return found


def run_id(config: dict[str, Any]) -> str:
    """The content-addressed id (16 hex digits) of one run configuration."""
    digests = {}
    for path in sorted(set(_named_files(config))):
        st = os.stat(path)
        digests[path] = _file_digest(path, st.st_mtime_ns, st.st_size)
    material = canonical_json(
        {
            "config": config,
            "files": digests,
            "schema": SCHEMA_VERSION,
            "id_version": ID_VERSION,
            "code": _code_version(),
        }
    )
    return hashlib.sha256(material.encode("ascii")).hexdigest()[:ID_LENGTH]
