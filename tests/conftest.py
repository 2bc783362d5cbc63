"""Shared test configuration.

``tests/`` has no ``__init__.py``: pytest puts this directory on ``sys.path`` for this conftest,
so helper modules here (``sweep_fakes``) are importable from every test package.
"""
