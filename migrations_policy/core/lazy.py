"""A package's names resolved on first use: the module ``__getattr__`` (PEP 562) of every lazy
``__init__`` (the package root, ``authoring``, ``commands``, ``lint``).

alembic imports the package root, ``authoring`` and ``lint`` on every ``import alembic`` (our
plugins live under them), so this module imports nothing but ``importlib`` and ``typing``
(loaded by then: the interpreter and alembic import them before our plugins run).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any, Callable


def lazy_getattr(package: str, names: dict[str, str]) -> Callable[[str], Any]:
    """The ``__getattr__`` of *package* (its ``__name__``): each name of *names* is taken from
    its module, a name relative to *package* as in a relative import (``".linter"``,
    ``"..core.result"``), imported on first use; any other name is an ``AttributeError``."""

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(import_module(module, package), name)

    return __getattr__
