"""Custom operations: the modules the lint worker imports before any script runs.

A project registers operations with ``@Operations.register_operation("name")`` (and
``@Operations.implementation_for``) in ``env.py`` or in a module ``env.py`` imports;
its scripts then call ``op.name(...)``.  The linter never runs ``env.py`` (it would run
the migrations), so it imports, once per run in its worker (``lint.sandbox.worker``; each
script's process starts after these imports):

1. the modules named in the ``lint_plugins`` setting (an import failure is a
   ``ConfigError``: one line, exit 2);
2. the project's own modules that ``env.py`` imports (directly, or through other
   modules of the project, up to ``MAX_DEPTH`` imports deep) whose source calls
   ``register_operation``: found by reading ``env.py``'s source, never by running it.
   ``env.py`` is the nearest one in the linted scripts' parent directories (up to three
   levels up: ``versions/expand/x.py`` -> ``env.py``).  One that fails to import is left
   out: its operations are then reported as ``MP005``.

Operations registered in ``env.py`` itself cannot be imported without running it:
move them to a module, or name that module in ``lint_plugins``.  Modules are found
and imported with the current directory and ``env.py``'s directory first on
``sys.path`` (alembic's ``prepend_sys_path = .``).
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from pathlib import Path

MAX_DEPTH = 3
MAX_FILES = 200
_MARKER = "register_operation"


@dataclass(frozen=True)
class Plugins:
    #: Module names, configured first, then found through env.py.
    configured: tuple[str, ...] = ()
    found: tuple[str, ...] = ()
    #: Directories put first on ``sys.path`` while they are imported.
    paths: tuple[str, ...] = ()
    #: The settings file that named ``configured`` (for its one-line error).
    source: str = ""

    def key(self) -> str:
        return f"{','.join(self.configured)}|{','.join(self.found)}|{','.join(self.paths)}"


def _env_py(directory: Path) -> Path | None:
    """The nearest ``env.py`` in *directory* (a linted script's) or up to three levels above it."""
    directory = directory.resolve()
    for candidate in (directory, *list(directory.parents)[:3]):
        if (candidate / "env.py").is_file():
            return candidate / "env.py"
    return None


def _module_file(name: str, roots: list[str]) -> str | None:
    """The source of module *name* under one of *roots* (the project's directories: found there, it is the
    project's own module, not an installed one); None when it is not there."""
    parts = name.split(".")
    for root in roots:
        base = os.path.join(root, *parts)
        for candidate in (base + ".py", os.path.join(base, "__init__.py")):
            if os.path.isfile(candidate):
                return candidate
    return None


def _imports(source: str, filename: str, package: str) -> list[str]:
    """Absolute names of the modules *source* imports (``from a import b``: ``a.b`` and ``a``)."""
    try:
        tree = ast.parse(source, filename)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: max(0, len(package.split(".")) - node.level + 1)] if package else []
                if not anchor:
                    continue
                base = ".".join(anchor + ([base] if base else []))
            names.extend(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
            names.append(base)
    return [name for name in dict.fromkeys(names) if name]


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return ""


def registering_modules(env_py: Path, roots: list[str]) -> list[str]:
    """The project's modules reachable from *env_py*'s imports whose source registers operations."""
    found: list[str] = []
    seen: set[str] = set()
    frontier = [(name, 1) for name in _imports(_read(str(env_py)), str(env_py), "")]
    while frontier and len(seen) < MAX_FILES:
        name, depth = frontier.pop(0)
        if name in seen:
            continue
        seen.add(name)
        file = _module_file(name, roots)
        if file is None:
            continue
        source = _read(file)
        if _MARKER in source:
            found.append(name)
        if depth < MAX_DEPTH:
            package = name if file.endswith("__init__.py") else name.rpartition(".")[0]
            frontier.extend((child, depth + 1) for child in _imports(source, file, package) if child not in seen)
    return found


def plugins(configured: list[str], scripts: list[Path], source: str = "") -> Plugins:
    """What the worker imports for a run over *scripts* (see the module docstring)."""
    cwd = os.getcwd()
    envs = [env for env in dict.fromkeys(map(_env_py, dict.fromkeys(p.parent for p in scripts))) if env]
    paths = [cwd, *dict.fromkeys(str(env.parent) for env in envs if str(env.parent) != cwd)]
    found: list[str] = []
    for env in envs:
        found.extend(name for name in registering_modules(env, paths) if name not in configured)
    source = source if configured else str(envs[0]) if found else ""
    return Plugins(tuple(configured), tuple(dict.fromkeys(found)), tuple(paths) if (configured or found) else (),
                   source)


def import_plugins(plugins: Plugins) -> str | None:
    """Import *plugins* (in the worker, output swallowed); the one-line error of a configured one that fails."""
    import importlib
    import sys

    from migrations_policy.lint.offline.loader import one_line, sandbox

    with sandbox():
        sys.path[:0] = list(plugins.paths)
        for name in plugins.configured + plugins.found:
            try:
                importlib.import_module(name)
            except BaseException as exc:  # noqa: BLE001 - a plugin's failure is one line
                if name in plugins.configured:
                    return f"{plugins.source}: lint_plugins: cannot import {name}: {one_line(exc)}"
    return None
