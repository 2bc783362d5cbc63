"""Built-in policies, one module each (plus shared helpers such as :mod:`.density_base`).

:mod:`sim.control.registry` imports every module here on its first lookup, so a new policy is
one new file that registers itself with :func:`~sim.control.registry.register_policy`.
"""
