"""Functions of the project's own modules that a script calls but whose module could not be imported (issue 28).

``module_aliases(tree)``: the names a script binds to modules (``import a.b as m``, ``m = import_module("a.b")``);
``unimported_helper(module, name, line)``: the function *name* of module *module*, found as a local file on
``sys.path`` without importing its packages (an ``__init__`` that needs what is not installed), its module loaded
statement by statement (``missing.load_partially``) -- ``astscan`` reads it like the script's own function.
"""

from __future__ import annotations

import ast

from migrations_policy.lint.loader import is_local_file


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


def unimported_helper(module: str, name: str, line: int):
    """``(FunctionDef, namespace)`` of function *name* of the project's module *module* when that module could not
    be imported (a package whose ``__init__`` needs what is not installed): its file is found on ``sys.path``
    (the current directory first) without importing its packages, loaded statement by statement
    (``missing.load_partially``) and its function read like the script's own, every line at *line*; None when
    there is no such local file or function."""
    import os
    import sys
    import types

    from migrations_policy.lint.loader import one_line
    from migrations_policy.lint.missing import Notes, load_partially

    parts = module.split(".")
    for entry in sys.path:
        base = os.path.join(entry or ".", *parts)
        for candidate in (base + ".py", os.path.join(base, "__init__.py")):
            if not is_local_file(candidate):
                continue
            try:
                with open(candidate, encoding="utf-8") as fh:
                    tree = ast.parse(fh.read(), candidate)
            except (OSError, SyntaxError, ValueError, UnicodeDecodeError, RecursionError, MemoryError):
                return None
            fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name), None)
            if fn is None:
                return None
            namespace = types.ModuleType(module)
            namespace.__file__ = candidate
            namespace.__package__ = module if candidate.endswith("__init__.py") else module.rpartition(".")[0]
            try:
                load_partially(tree, namespace, candidate, Notes(), one_line)
            except MemoryError:
                raise
            except BaseException:  # noqa: BLE001 - SystemExit and the like of the helper's module: not followed
                return None
            for sub in ast.walk(fn):
                if hasattr(sub, "lineno"):
                    sub.lineno = sub.end_lineno = line
                    sub.col_offset = sub.end_col_offset = 0  # one position: a valid range for compile()
            return fn, vars(namespace)
    return None
