"""compctl's model of a training cluster.

This package stays import-light: ``import sim`` and ``import sim.control`` pull in neither SimPy
nor torch nor pandas. The SimPy engine lives in its own modules and is imported only where a
simulation actually runs.
"""

__all__: list[str] = []
