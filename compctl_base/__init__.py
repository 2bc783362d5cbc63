"""The lowest layer of compctl: what every other package may use and which uses none of them.

- :mod:`compctl_base.errors`: :class:`~compctl_base.errors.InputError`, "the user's input is wrong";
- :mod:`compctl_base.units`: human units at the command line (``100MB``, ``1.5GiB``) to SI;
- :mod:`compctl_base.atomic_files`: atomic writes that never follow a planted link;
- :mod:`compctl_base.plugins`: loading plugin modules by name (built-in packages and Python
  entry points), so a registry never imports the plugins that register with it.

Nothing here imports ``traces``, ``sim``, ``realrun`` or ``analysis`` (``tests/test_layers.py``).
"""
