"""Fixtures of the data-migration tests (helpers live in ``tests.data.support``)."""

from .support import project_dir  # noqa: F401  (fixture)
