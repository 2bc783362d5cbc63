"""Load a script from ``benchmarks/`` as a module, for the tests of the benchmark scripts.

The scripts are not a package: each test imports one by path. ``load_script("bench_x")``
executes ``benchmarks/bench_x.py`` afresh and registers it as ``sys.modules["bench_x"]`` (its
dataclasses and pickling need the module to be findable by name). A script that imports a
sibling script (``bench_stepwise`` imports ``bench_sim``) needs ``benchmarks/`` on
``sys.path`` while it loads: ``with_dir=True`` puts it there for the load only.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

#: the repository's benchmarks directory
BENCH_DIR = Path(__file__).resolve().parents[1] / "benchmarks"


def load_script(name: str, *, with_dir: bool = False) -> ModuleType:
    """``benchmarks/NAME.py`` executed and registered as the module ``NAME``."""
    spec = importlib.util.spec_from_file_location(name, BENCH_DIR / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    if with_dir:
        sys.path.insert(0, str(BENCH_DIR))
    try:
        spec.loader.exec_module(mod)
    finally:
        if with_dir:
            sys.path.remove(str(BENCH_DIR))
    return mod
