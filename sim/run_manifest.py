"""Run manifests: the size and SHA-256 of every file of a run folder, written last.

A run folder is trusted only when its ``manifest.json`` lists exactly the files beside it with
their sizes and hashes. The manifest is the last file written into the hidden temporary folder
before the folder is renamed into place, so a folder whose manifest checks out is whole; a file
truncated, edited or lost afterwards (a full disk, a copy cut short, a stray editor) is caught by
:func:`run_problem`, which says in one line which file and what is wrong. Resuming a sweep
recomputes such runs; reports refuse them.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

__all__ = [
    "MANIFEST",
    "MANIFEST_VERSION",
    "DERIVED_FILES",
    "build_manifest",
    "manifest_bytes",
    "run_problem",
]

MANIFEST = "manifest.json"
#: Format of the manifest document; bumped if its fields change meaning.
MANIFEST_VERSION = 1
#: Files made from a finished run later (``compctl report RUN`` writes RUN/report.html); they
#: are not part of the run and may come and go.
DERIVED_FILES = frozenset({"report.html"})
#: A manifest is a short list of file entries; anything larger is not one of ours.
_MANIFEST_MAX_BYTES = 1 << 20


def _digest(path: Path) -> tuple[int, str]:
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
            size += len(chunk)
    return size, h.hexdigest()


def build_manifest(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """The manifest document of every regular file in ``folder`` (the manifest itself excluded)."""
    files: dict[str, dict[str, Any]] = {}
    for p in sorted(Path(folder).iterdir()):
        if p.name == MANIFEST:
            continue
        size, sha = _digest(p)
        files[p.name] = {"bytes": size, "sha256": sha}
    return {"manifest_version": MANIFEST_VERSION, "files": files}


def manifest_bytes(folder: str | os.PathLike[str]) -> bytes:
    """The manifest of ``folder`` serialised (key-sorted, so the same files give the same bytes)."""
    return (json.dumps(build_manifest(folder), indent=2, sort_keys=True) + "\n").encode("ascii")


def _read_manifest(path: Path) -> dict[str, Any] | str:
    try:
        if path.stat().st_size > _MANIFEST_MAX_BYTES:
            return f"{MANIFEST}: larger than any manifest compctl writes"
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return f"{MANIFEST}: missing (the run was cut short, or written before manifests)"
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return f"{MANIFEST}: unreadable ({type(exc).__name__})"
    files = doc.get("files") if isinstance(doc, dict) else None
    if not isinstance(files, dict) or not all(
        isinstance(v, dict) and isinstance(v.get("bytes"), int) and isinstance(v.get("sha256"), str)
        for v in files.values()
    ):
        return f"{MANIFEST}: malformed (no list of files with sizes and hashes)"
    return doc


def run_problem(folder: str | os.PathLike[str]) -> str | None:
    """``None`` when ``folder``'s files match its manifest, else one line: which file, what."""
    p = Path(folder)
    if not p.is_dir() or p.is_symlink():
        return "not a run folder"
    doc = _read_manifest(p / MANIFEST)
    if isinstance(doc, str):
        return doc
    listed: dict[str, dict[str, Any]] = doc["files"]
    present = sorted(
        q.name for q in p.iterdir() if q.name != MANIFEST and q.name not in DERIVED_FILES
    )
    for name in sorted(listed):
        if name not in present:
            return f"{name}: missing (listed in {MANIFEST})"
    for name in present:
        if name not in listed:
            return f"{name}: not listed in {MANIFEST} (added after the run was written)"
    for name in present:
        want = listed[name]
        try:
            size, sha = _digest(p / name)
        except OSError as exc:
            return f"{name}: unreadable ({exc.strerror or type(exc).__name__})"
        if size != want["bytes"]:
            return f"{name}: {size} bytes, the manifest says {want['bytes']} (truncated or altered)"
        if sha != want["sha256"]:
            return f"{name}: contents differ from the manifest's SHA-256 (altered)"
    return None
