"""The built-in compressors, one module each: its analytic spec (payload, compute model,
compatible collectives, description) and its torch algorithm, registered together.

The registries (:mod:`sim.compress.spec`, :mod:`sim.compress.base`) import every module here on
first lookup, so a new compressor is one new file. The modules name torch through
:mod:`sim.compress.kernels.lazy`: loading the specs (all the simulator needs) imports no torch.
"""
