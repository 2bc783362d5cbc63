"""Shared test configuration.

``tests/`` has no ``__init__.py``: pytest puts this directory on ``sys.path`` for this conftest,
so helper modules here (``sweep_fakes``) are importable from every test package.
"""

import os

# The suite describes a machine without a GPU: on a CUDA machine `--device auto` would pick the
# GPU and the CPU-sized real runs (two ranks, one GPU) would be refused. GPUs are hidden from
# this process and every rank it starts, unless COMPCTL_TEST_GPU=1 asks for the CUDA variants of
# the device-parametrised tests (the compressor conformance and device tests; see
# benchmarks/gpu_checks.sh).
if os.environ.get("COMPCTL_TEST_GPU") != "1":
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
