"""What the project's own code did when it stopped a command: one line, never a traceback.

A revision script, env.py, a data-migration module or a model module runs inside our
commands.  Whatever it raises (``sys.exit(0)`` included, which would otherwise end
``dbsync check`` with "success") is reported as one line naming the file and line of
the innermost frame that is the project's (not migrations_policy's, alembic's,
SQLAlchemy's, a driver's or the standard library's), and what it did.
"""

from __future__ import annotations

import os
import sysconfig
from pathlib import Path

_LIBRARY_PACKAGES = ("migrations_policy", "alembic", "sqlalchemy", "psycopg", "pymysql", "sqlparse", "mako",
                     "_pytest", "pluggy")


def _paths(*keys: str) -> tuple[str, ...]:
    found = (sysconfig.get_paths().get(key) for key in keys)
    return tuple(dict.fromkeys(os.path.realpath(path) + os.sep for path in found if path))


def _library_roots() -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """(the libraries' package directories, the standard library, the installed packages'
    directories: a project installed there, with its migrations, is not the standard library)."""
    import importlib.util

    packages = []
    for name in _LIBRARY_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            packages.extend(os.path.realpath(p) + os.sep for p in spec.submodule_search_locations)
    return tuple(packages), _paths("stdlib", "platstdlib"), _paths("purelib", "platlib")


_ROOTS: tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]] | None = None


def _is_library(filename: str) -> bool:
    global _ROOTS
    if _ROOTS is None:
        _ROOTS = _library_roots()
    if filename.startswith("<"):  # <frozen importlib._bootstrap>, <string>
        return True
    packages, stdlib, installed = _ROOTS
    path = os.path.realpath(filename)
    return path.startswith(packages) or path.startswith(stdlib) and not path.startswith(installed)


def culprit(exc: BaseException) -> str | None:
    """``path:line`` of the innermost frame of *exc*'s traceback that is the project's code
    (None: it was raised by libraries alone, ours included)."""
    found = None
    tb = exc.__traceback__
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if not _is_library(filename):
            found = f"{_shown(filename)}:{tb.tb_lineno}"
        tb = tb.tb_next
    return found


def _shown(filename: str) -> str:
    """Relative to the working directory when below it."""
    try:
        return str(Path(filename).resolve().relative_to(Path.cwd()))
    except ValueError:
        return filename


def first_line(exc: BaseException) -> str:
    """The first line of an exception's text, at most 200 characters (also for one whose
    ``__str__`` raises)."""
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001 - an exception whose __str__ raises
        text = ""
    return (text.strip().splitlines() or [""])[0][:200]


def what(exc: BaseException) -> str:
    """``called sys.exit(0)`` or ``RuntimeError: boom`` (its first line)."""
    if isinstance(exc, SystemExit):
        return f"called sys.exit({exc.code!r})"
    first = first_line(exc)
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def describe(exc: BaseException) -> str:
    """``path:line: what`` (just ``what`` when no frame is the project's)."""
    where = culprit(exc)
    return f"{where}: {what(exc)}" if where else what(exc)


def stopped_by_project(exc: BaseException) -> bool:
    """Whether *exc* is the project's doing: raised in its code, or a ``sys.exit`` /
    ``GeneratorExit`` (migrations_policy raises neither inside a command).  An exception
    from the libraries alone is ours to fix, and keeps its traceback."""
    return isinstance(exc, (SystemExit, GeneratorExit)) or culprit(exc) is not None
