"""Dependencies point one way.

* No import cycle among the package's modules, counting the imports made inside functions
  too (a lazy import hides a cycle, it does not remove it).
* The folders are layers, read top to bottom: a module imports its own folder or the layers
  below it, never a layer above nor a folder beside it in its own layer::

      cli -> testing -> rehearsal | trace -> commands -> lifecycle -> plan -> lint -> gate
          -> authoring -> window -> expand | data -> policy -> core

* Nothing lives loose at the package root but ``__init__`` and the shims kept at the paths
  projects import (each only re-exports its folder's module).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "migrations_policy"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        found = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                base = package[:len(package) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else []))
                for alias in node.names:
                    child = f"{target}.{alias.name}"
                    found.add(child if child in files else target)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
        # a module importing its own package's __init__ (or a name from it) is not a cycle of modules
        graph[name] = {m for m in found if m in files and m != name and not name.startswith(m + ".")}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


#: Top to bottom; folders in one tuple are one layer and must not import each other.
LAYERS = (
    ("cli",),
    ("testing",),
    ("rehearsal", "trace"),
    ("commands",),
    ("lifecycle",),
    ("plan",),
    ("lint",),
    ("gate",),
    ("authoring",),
    ("window",),
    ("expand", "data"),
    ("policy",),
    ("core",),
)
#: Root modules kept at the path projects import (env.py, generated scripts, services, embedders).
SHIMS = {"environment": "gate.environment", "sync_triggers": "window.sync_triggers", "compat": "lifecycle.compat",
         "project": "core.project", "result": "core.result", "errors": "core.errors"}
#: Folders holding no code of the product (templates: alembic's env template as package data).
NOT_LAYERED = {"templates"}


def _folder(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _layer_violations(graph: dict[str, set[str]]) -> list[str]:
    rank = {folder: index for index, layer in enumerate(LAYERS) for folder in layer}
    wrong = []
    for module, imports in sorted(graph.items()):
        source = _folder(module)
        if source in SHIMS or source == "__init__":
            continue
        for imported in sorted(imports):
            target = _folder(imported)
            if target == source or target == "__init__":
                continue
            if source not in rank or target not in rank or rank[target] <= rank[source]:
                wrong.append(f"{module} imports {imported}")
    return wrong


def test_the_graph_is_read():
    graph = _import_graph()
    assert "migrations_policy.gate.verdict" in graph["migrations_policy.gate.hook.runtime"]
    assert "migrations_policy.data.remaining.pending" in graph["migrations_policy.gate.verdict"]  # an import inside a function


def test_folders_import_only_the_layers_below():
    assert _layer_violations(_import_graph()) == []


def test_a_layer_violation_is_found():
    graph = {"migrations_policy.core.config": {"migrations_policy.gate.verdict"},
             "migrations_policy.expand.journal": {"migrations_policy.data.ledger"},
             "migrations_policy.gate.verdict": {"migrations_policy.core.config", "migrations_policy.gate.hook.runtime"},
             "migrations_policy.newthing.x": {"migrations_policy.core.config"}}
    assert _layer_violations(graph) == [
        "migrations_policy.core.config imports migrations_policy.gate.verdict",
        "migrations_policy.expand.journal imports migrations_policy.data.ledger",
        "migrations_policy.newthing.x imports migrations_policy.core.config",
    ]


def test_every_folder_is_placed_and_the_root_holds_only_shims():
    placed = {folder for layer in LAYERS for folder in layer} | NOT_LAYERED
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders == placed
    loose = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__"}
    assert loose == set(SHIMS)
    for name, target in SHIMS.items():
        tree = ast.parse((PACKAGE / f"{name}.py").read_text())
        imports = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
        assert [node.module for node in imports] == [f"migrations_policy.{target}"], name
        others = [node for node in tree.body if node not in imports and not (
            isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)) and not (
            isinstance(node, ast.Assign) and node.targets[0].id == "__all__")]
        assert others == [], f"{name}.py holds more than a re-export"


def test_every_folder_says_what_it_owns():
    for init in PACKAGE.glob("*/__init__.py"):
        assert ast.get_docstring(ast.parse(init.read_text())), f"{init.parent.name}/__init__.py has no docstring"


def test_no_import_cycle():
    assert _cycles(_import_graph()) == []


def test_a_cycle_is_found():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
