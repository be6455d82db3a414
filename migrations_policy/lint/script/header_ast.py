"""Revision header values that are not plain literals, read from the module's AST (see ``headers``).

``header_values(text, path)`` returns ``{"revision": ..., "down_revision": ...,
"branch_labels": ...}`` for the module-level assignments it can resolve, the way the
imported module would have them: several statements per line are fine, and names
are followed through the module's own constants and through the modules it imports
(``from glance.db import migration`` then ``migration.CONTRACT_BRANCH``).  An imported
module is found as a file under the script's directory or one of its parents, the
current directory or ``sys.path``, then parsed -- never executed.  The files of the
modules consulted are appended to *consulted* when given: the header depends on them
(the lint cache re-reads it when one changes).
"""

from __future__ import annotations

import ast
import os
import re
import stat
import sys
from functools import lru_cache
from pathlib import Path

NAMES = ("revision", "down_revision", "branch_labels", "depends_on")
_MAX_DEPTH = 8
_PARENTS = 8
_UNRESOLVED = object()


def _parse(text: str) -> ast.Module:
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        # a truncated or broken file: the statements of the lines that mention a header name
        body: list[ast.stmt] = []
        for line in text.splitlines():
            if any(name in line for name in NAMES) and not line[:1].isspace():
                try:
                    body.extend(ast.parse(line).body)
                except (SyntaxError, ValueError, RecursionError, MemoryError):
                    continue
        return ast.Module(body=body, type_ignores=[])


class _Module:
    """A module's top-level constants and imports (alias -> dotted module, or (module, name)).

    ``bound``: every name the module binds at its top level in any way (assignment targets in tuples, lists,
    starred, ``:=``, ``for``, ``with``, ``except``, ``import``, ``def``, ``class``, ``global`` in a function);
    ``assigned`` holds the value of those whose value an assignment gives (first one wins)."""

    def __init__(self, tree: ast.Module, path: Path | None):
        self.path = path
        self.assigned: dict[str, ast.AST] = {}
        self.bound: set[str] = set()
        self.modules: dict[str, str] = {}
        self.imported: dict[str, tuple[str, str]] = {}
        for node in tree.body:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.modules[alias.asname] = alias.name
                    else:
                        top = alias.name.split(".")[0]
                        self.modules[top] = top
            elif isinstance(node, ast.ImportFrom):
                base = self._absolute(node.module or "", node.level)
                for alias in node.names:
                    self.imported[alias.asname or alias.name] = (base, alias.name)
        for node in _top_level_nodes(tree):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    self._assign(target, node.value)
            elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
                self._assign(node.target, node.value)
            self.bound.update(_bound_names(node))

    def _assign(self, target: ast.AST, value: ast.AST) -> None:
        """Record ``target = value``, element by element for ``a, b = x, y`` and ``*_, a = [x, y]``."""
        if isinstance(target, ast.Name):
            self.assigned.setdefault(target.id, value)
        elif isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)):
            targets, values = target.elts, value.elts
            if any(isinstance(v, ast.Starred) for v in values):
                return
            stars = [i for i, t in enumerate(targets) if isinstance(t, ast.Starred)]
            if not stars and len(targets) == len(values):
                pairs = zip(targets, values)
            elif len(stars) == 1 and len(values) >= len(targets) - 1:
                after = len(targets) - stars[0] - 1
                pairs = [*zip(targets[:stars[0]], values), *zip(targets[len(targets) - after:],
                                                                  values[len(values) - after:])]
            else:
                return
            for one_target, one_value in pairs:
                self._assign(one_target, one_value)

    def _absolute(self, module: str, level: int) -> str:
        if not level or self.path is None:
            return module
        return "\0" + str(self.path.parents[level - 1]) + ("/" + module.replace(".", "/") if module else "")


def _top_level_nodes(tree: ast.Module):
    """The nodes that run in the module's own scope (not inside a ``def``, ``class`` or ``lambda`` body)."""
    stack = list(reversed(tree.body))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            inner = [*getattr(node, "decorator_list", ()), *getattr(getattr(node, "args", None), "defaults", ()),
                     *getattr(node, "bases", ())]
            stack.extend(reversed(inner))
            stack.extend(n for n in ast.walk(node) if isinstance(n, ast.Global))  # ``global x`` binds the module's x
        else:
            stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _bound_names(node: ast.AST) -> tuple[str, ...]:
    if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
        return (node.id,)
    if isinstance(node, ast.alias):
        return ((node.asname or node.name).split(".")[0],)
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return (node.name,)
    if isinstance(node, ast.Global):
        return tuple(node.names)
    name = getattr(node, "name", None) if isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) else None
    return (name,) if isinstance(name, str) else ()


def _roots(path: Path | None) -> list[Path]:
    roots = []
    if path is not None:
        roots.extend(list(path.resolve().parents)[:_PARENTS])
    roots.append(Path(os.getcwd()))
    roots.extend(Path(p) for p in sys.path if p and os.path.isdir(p))
    return list(dict.fromkeys(roots))


@lru_cache(maxsize=256)
def _load(file: str, stamp: tuple[int, int]) -> _Module | None:
    """The parsed module of *file* as of *stamp* (its mtime and size: an edited file is parsed again)."""
    try:
        fd = os.open(file, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO swapped in: no block at open
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with open(fd, encoding="utf-8", errors="replace", closefd=False) as fh:
            return _Module(_parse(fh.read(200_000)), Path(file))
    except OSError:
        return None
    finally:
        os.close(fd)


def _find(dotted: str, near: Path | None, consulted: list[str] | None = None) -> _Module | None:
    if dotted.startswith("\0"):  # a relative import: an absolute directory
        candidates = [Path(dotted[1:])]
    else:
        parts = dotted.split(".")
        candidates = [root.joinpath(*parts) for root in _roots(near)]
    for base in candidates:
        for file in (base.with_suffix(".py"), base / "__init__.py"):
            try:
                found = file.stat()  # follows a symlink: a link to a FIFO or a device is not a module either
            except OSError:
                continue
            if stat.S_ISREG(found.st_mode):  # only a regular file: opening a FIFO would block the run
                if consulted is not None:
                    consulted.append(os.path.abspath(file))
                return _load(str(file), (found.st_mtime_ns, found.st_size))
    return None


def _join(dotted: str, name: str) -> str:
    return f"{dotted}/{name}" if dotted.startswith("\0") else f"{dotted}.{name}"


class _Resolver:
    def __init__(self, module: _Module, near: Path | None, consulted: list[str] | None):
        self.module, self.near, self.consulted = module, near, consulted

    def find(self, dotted: str) -> _Module | None:
        return _find(dotted, self.near, self.consulted)

    def value(self, node: ast.AST, module: _Module, depth: int = 0):
        if depth > _MAX_DEPTH:
            return _UNRESOLVED
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = [self.value(elt, module, depth + 1) for elt in node.elts]
            return _UNRESOLVED if any(i is _UNRESOLVED for i in items) else tuple(items)
        if isinstance(node, ast.Name):
            return self.name(node.id, module, depth + 1)
        if isinstance(node, ast.Attribute):
            target, _ = self.namespace(node.value, module)
            if target is not None:
                return self.name(node.attr, target, depth + 1)
        return _UNRESOLVED

    def namespace(self, node: ast.AST, module: _Module) -> tuple[_Module | None, str | None]:
        """The module *node* names and its dotted name (either may be unknown)."""
        if isinstance(node, ast.Name):
            if node.id in module.modules:
                dotted = module.modules[node.id]
                return self.find(dotted), dotted
            if node.id in module.imported:
                base, name = module.imported[node.id]
                dotted = _join(base, name)
                return self.find(dotted), dotted
        elif isinstance(node, ast.Attribute):
            _, outer = self.namespace(node.value, module)
            if outer is not None:
                dotted = _join(outer, node.attr)
                return self.find(dotted), dotted
        return None, None

    def name(self, name: str, module: _Module, depth: int):
        if name in module.assigned:
            return self.value(module.assigned[name], module, depth + 1)
        if name in module.imported:
            base, attr = module.imported[name]
            source = self.find(base)
            if source is not None and source is not module:
                return self.name(attr, source, depth + 1)
        return _UNRESOLVED


def header_values(text: str, path: Path | None = None, consulted: list[str] | None = None) -> dict[str, object]:
    """The header assignments of *text* that resolve (see the module docstring)."""
    return header_facts(text, path, consulted)[0]


def header_facts(text: str, path: Path | None = None,
                 consulted: list[str] | None = None) -> tuple[dict[str, object], bool]:
    """``header_values`` and whether the module may bind ``revision``: it binds the name at its top level in
    any way, imports ``*``, or names ``revision`` elsewhere than in a comment or a bare string statement
    (``globals()["revision"] = ...``, ``exec("revision = ...")``, ``setattr(module, "revision", ...)``)."""
    tree = _parse(text)
    module = _Module(tree, path)
    resolver = _Resolver(module, path, consulted)
    found = {}
    for name in NAMES:
        if name in module.assigned:
            value = resolver.value(module.assigned[name], module)
            if value is not _UNRESOLVED and not isinstance(value, _Module):
                found[name] = value
    return found, bool({"revision", "*"} & module.bound) or _mentions(tree)


_WORD = re.compile(r"\brevision\b")


def _mentions(tree: ast.Module) -> bool:
    bare = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)) and id(node) not in bare:
            text = node.value if isinstance(node.value, str) else node.value.decode("latin-1")
            if _WORD.search(text):
                return True
        elif "revision" in (getattr(node, "attr", None), getattr(node, "arg", None), getattr(node, "id", None)):
            return True  # module.revision, f(revision=...), a name read
    return False
