"""The shared policy code and the trace library must not pull in SimPy, torch or pandas."""

import subprocess
import sys

import pytest


@pytest.mark.parametrize("module", ["sim", "sim.control", "traces", "sim.costmodel", "sim.collectives", "sim.compress.spec"])
def test_import_is_light(module: str) -> None:
    code = (
        f"import sys, {module}\n"
        "heavy = [m for m in ('simpy', 'torch', 'pandas') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"{module} imported {out.stdout.strip()}"


def test_realrun_does_not_import_simpy_engine() -> None:
    code = (
        "import sys, pkgutil, importlib, realrun\n"
        "for m in pkgutil.walk_packages(realrun.__path__, 'realrun.'):\n"
        "    importlib.import_module(m.name)\n"
        "print('simpy' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
