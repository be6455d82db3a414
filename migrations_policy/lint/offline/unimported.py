"""Functions of the project's own modules that a script calls but whose module could not be imported (issue 28).

``module_aliases(tree)``: the names a script binds to modules (``import a.b as m``, ``m = import_module("a.b")``);
``unimported_helper(module, name, line)``: the function *name* of module *module*, found as a local file on
``sys.path`` without importing its packages (an ``__init__`` that needs what is not installed), its module loaded
statement by statement (``missing.load_partially``) -- ``astscan`` reads it like the script's own function;
``unimported_method(module, cls, name, line)``: the same for a method (own or inherited, static, class or instance)
of a class of such a module, re-exports (``from .x import *``) followed.
"""

from __future__ import annotations

import ast

from migrations_policy.lint.offline.loader import is_local_file


def module_aliases(tree: ast.Module) -> dict[str, str]:
    """``{name: module}`` of the top-level ``import a.b as name`` and ``name = import_module("a.b")``
    (``importlib.import_module`` too) of a script: a function called as ``name.f()`` is followed even when the
    module could not be imported (``unimported_helper``)."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            found.update({alias.asname: alias.name for alias in node.names if alias.asname})
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and isinstance(node.value, ast.Call) and len(node.value.args) == 1 and not node.value.keywords \
                and isinstance(node.value.args[0], ast.Constant) and isinstance(node.value.args[0].value, str):
            func = node.value.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name == "import_module" and not node.value.args[0].value.startswith("."):
                found[node.targets[0].id] = node.value.args[0].value
    return found


def _module_file(module: str) -> str | None:
    """The local file of *module* on ``sys.path`` (the current directory first), found without importing it."""
    import os
    import sys

    parts = module.split(".")
    for entry in sys.path:
        base = os.path.join(entry or ".", *parts)
        for candidate in (base + ".py", os.path.join(base, "__init__.py")):
            if is_local_file(candidate):
                return candidate
    return None


def _parse(path: str) -> ast.Module | None:
    try:
        with open(path, encoding="utf-8") as fh:
            return ast.parse(fh.read(), path)
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError, RecursionError, MemoryError):
        return None


def _source_module(module: str, path: str, node: ast.ImportFrom) -> str:
    """The absolute name of the module ``node`` (a ``from ... import``, maybe relative) of *module* imports from."""
    if not node.level:
        return node.module or ""
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def _module_bound(tree: ast.Module, module: str, path: str, name: str) -> str | None:
    """The module *name* is bound to in *module* (``from . import name``, ``import a.b as name``), if any."""
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    candidate = f"{_source_module(module, path, node)}.{alias.name}".lstrip(".")
                    if _module_file(candidate):
                        return candidate
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname == name:
                    return alias.name
    return None


def _definition(module: str, name: str, seen: set) -> tuple[str, str, ast.Module, ast.stmt] | None:
    """``(module, file, tree, node)`` of the class or function *name* of the project's module *module*, read from
    the files without importing them: defined there, or re-exported (``from .x import name``, ``from .x import *``,
    ``name = x.name``) -- the last binding of the module that leads to a definition."""
    if (module, name) in seen or len(seen) > 64:
        return None
    seen.add((module, name))
    path = _module_file(module)
    tree = _parse(path) if path else None
    if tree is None:
        return None
    for node in reversed(tree.body):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name == name:
            return module, path, tree, node
        if isinstance(node, ast.ImportFrom):
            source = _source_module(module, path, node)
            for alias in node.names:
                if alias.name == "*" or (alias.asname or alias.name) == name:
                    found = _definition(source, name if alias.name == "*" else alias.name, seen)
                    if found is not None:
                        return found
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id == name and isinstance(node.value, ast.Attribute) \
                and isinstance(node.value.value, ast.Name):
            bound = _module_bound(tree, module, path, node.value.value.id)
            found = _definition(bound, node.value.attr, seen) if bound else None
            if found is not None:
                return found
    return None


def _method(module: str, cls: str, name: str, depth: int = 0) -> tuple[str, str, ast.Module, ast.FunctionDef] | None:
    """``(module, file, tree, FunctionDef)`` of method *name* of class *cls* of *module*: its own, else the first
    of its bases (named in its module, defined or imported there) that has it, depth first as Python's MRO for
    single inheritance."""
    found = _definition(module, cls, set()) if depth < 16 else None
    if found is None or not isinstance(found[3], ast.ClassDef):
        return None
    where, path, tree, node = found
    for item in node.body:
        if isinstance(item, ast.FunctionDef) and item.name == name:
            return where, path, tree, item
    for base in node.bases:
        if isinstance(base, ast.Name):
            method = _method(where, base.id, name, depth + 1)
        elif isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name):
            bound = _module_bound(tree, where, path, base.value.id)
            method = _method(bound, base.attr, name, depth + 1) if bound else None
        else:
            method = None
        if method is not None:
            return method
    return None


class ClassRef:
    """A class of the project's modules that could not be imported, named by ``(module, name)``: what ``cls`` or
    ``self`` is in one of its methods read from source (``unimported_method``)."""

    __slots__ = ("module", "name")

    def __init__(self, module: str, name: str):
        self.module, self.name = module, name


def unimported_method(module: str, cls: str, name: str, line: int):
    """``(FunctionDef, namespace, kind)`` of method *name* of class *cls* of the project's module *module* when
    that module could not be imported: the class is found in the files (re-exports followed), the method is its
    own or inherited; *kind* is "static", "class" or "instance" (its first parameter is then bound to a
    ``ClassRef`` of *cls*: ``cls.other()`` is followed the same way); None when not found."""
    found = _method(module, cls, name)
    if found is None:
        return None
    where, path, tree, fn = found
    decorators = {d.id for d in fn.decorator_list if isinstance(d, ast.Name)}
    kind = "static" if "staticmethod" in decorators else "class" if "classmethod" in decorators else "instance"
    loaded = _load(where, path, tree, fn, line)
    return None if loaded is None else (*loaded, kind)


def unimported_helper(module: str, name: str, line: int):
    """``(FunctionDef, namespace)`` of function *name* of the project's module *module* when that module could not
    be imported (a package whose ``__init__`` needs what is not installed): its file is found on ``sys.path``
    (the current directory first) without importing its packages, loaded statement by statement
    (``missing.load_partially``) and its function read like the script's own, every line at *line*; None when
    there is no such local file or function."""
    path = _module_file(module)
    tree = _parse(path) if path else None
    if tree is None:
        return None
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name), None)
    return None if fn is None else _load(module, path, tree, fn, line)


def _load(module: str, path: str, tree: ast.Module, fn: ast.FunctionDef, line: int):
    """``(fn, namespace)``: *module* (file *path*, *tree*) loaded statement by statement, *fn*'s lines at *line*."""
    import types

    from migrations_policy.lint.offline.loader import one_line
    from migrations_policy.lint.offline.missing import Notes, load_partially

    namespace = types.ModuleType(module)
    namespace.__file__ = path
    namespace.__package__ = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    try:
        load_partially(tree, namespace, path, Notes(), one_line)
    except MemoryError:
        raise
    except BaseException:  # noqa: BLE001 - SystemExit and the like of the helper's module: not followed
        return None
    for sub in ast.walk(fn):
        if hasattr(sub, "lineno"):
            sub.lineno = sub.end_lineno = line
            sub.col_offset = sub.end_col_offset = 0  # one position: a valid range for compile()
    return fn, vars(namespace)
