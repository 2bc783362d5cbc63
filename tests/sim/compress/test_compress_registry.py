"""A compressor is one file in ``sim/compress/algorithms/``: its spec and its algorithm are
registered together, the registries find the file without a list to edit, and loading every
spec (what the simulator does) imports no torch."""

from __future__ import annotations

import importlib
import subprocess
import sys

from compctl_base.plugins import package_modules
from sim.compress.base import compressor_names, make_compressor
from sim.compress.spec import BUILTIN_PACKAGE, CompressorSpec, spec_names


def test_each_algorithm_file_registers_its_specs_and_algorithms() -> None:
    seen: list[str] = []
    for name in package_modules(BUILTIN_PACKAGE):
        module = importlib.import_module(name)
        specs = [v for k, v in vars(module).items() if k.startswith("SPEC") and
                 isinstance(v, CompressorSpec)]
        assert specs, f"{name} declares no spec"
        for spec in specs:
            comp = make_compressor(spec.name)
            # The algorithm of that name is defined in the same file (or a kernel it extends).
            assert type(comp).__module__ == name, (spec.name, type(comp).__module__)
            assert spec.description and spec.collectives
            seen.append(spec.name)
    assert sorted(seen) == spec_names() == compressor_names()


def test_loading_every_spec_imports_no_torch() -> None:
    code = (
        "import sys\n"
        "from sim.compress.spec import get_spec, spec_names\n"
        "[get_spec(n).payload(1000, 0.01) for n in spec_names()]\n"
        "print(len(spec_names()), 'torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    count, torch_loaded = out.stdout.split()
    assert int(count) >= 15 and torch_loaded == "False"
