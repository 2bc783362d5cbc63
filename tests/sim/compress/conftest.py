"""Compressor tests run torch on one thread: on a shared 2-core machine, torch's second
OpenMP thread waiting for a busy core made single calls ~100x slower."""

import torch

torch.set_num_threads(1)
