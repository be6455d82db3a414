"""A contract drops a column that a sync trigger still uses.

## What it does
Reads the revision scripts in the order they are applied and finds each
``drop_column`` (``op.drop_column`` or inside ``op.batch_alter_table``) of a
column that an ``op.create_sync_trigger`` uses, when no ``op.drop_sync_trigger``
of that pair ran before it.  Reported by ``findings(scripts)``, which the linter
calls with the project's scripts (the rule's ``check`` sees one operation at a
time and cannot pair them).

## Why is this bad
The triggers keep copying between the old and the new column.  Once one of them
is gone, MariaDB/MySQL fail every later INSERT and UPDATE on the table
("Unknown column").  PostgreSQL and SQLite refuse the ``DROP COLUMN`` itself
(the contract fails in its transaction), which is safer but still a failed
upgrade.

## Example
```python
# versions/contract/...
def upgrade():
    with op.batch_alter_table("nodes") as batch_op:
        batch_op.drop_column("name")   # the expand's sync trigger still uses it
```

## Use instead
```python
def upgrade():
    op.drop_sync_trigger("nodes", old="name", new="display_name")
    with op.batch_alter_table("nodes") as batch_op:
        batch_op.drop_column("name")
```
"""

from __future__ import annotations

import ast
from typing import Iterable, NamedTuple

from migrations_policy.policy.model import CONTRACT
from migrations_policy.lint.rules.base import Rule


class SyncTriggerOutlivesColumn(Rule):
    __doc__ = __doc__
    code, name, phases = "MP160", "sync-trigger-outlives-column", (CONTRACT,)
    alternative = "op.drop_sync_trigger(...) before dropping either column"


RULE = SyncTriggerOutlivesColumn()


class Finding(NamedTuple):
    path: str
    line: int
    message: str


class _Event(NamedTuple):
    kind: str  # "create", "drop", "drop_column", "rebuild" (columns: ("always",) or ("sqlite",))
    table: str
    columns: tuple[str, ...]
    path: str
    line: int


def _text(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _argument(call: ast.Call, position: int, keyword: str) -> str | None:
    for kw in call.keywords:
        if kw.arg == keyword:
            return _text(kw.value)
    return _text(call.args[position]) if len(call.args) > position else None


def _batch_table(item: ast.withitem) -> tuple[str, str] | None:
    """``with op.batch_alter_table("t") as batch_op`` -> ("batch_op", "t")."""
    call = item.context_expr
    if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) \
            and call.func.attr == "batch_alter_table" and isinstance(item.optional_vars, ast.Name):
        table = _argument(call, 0, "table_name")
        return (item.optional_vars.id, table) if table else None
    return None


#: Batch operations SQLite runs without re-creating the table (alembic's ``recreate="auto"``).
_IN_PLACE = {"add_column", "create_index", "drop_index"}


def _rebuilds(call: ast.Call, name: str, block: ast.With) -> str | None:
    """"always" when the batch block re-creates its table on every dialect, "sqlite" when only on
    SQLite (an operation other than add_column / indexes), None when never."""
    recreate = next((_text(kw.value) for kw in call.keywords if kw.arg == "recreate"), "auto")
    if recreate in ("always", "never"):
        return None if recreate == "never" else "always"
    for node in ast.walk(block):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and isinstance(node.func.value, ast.Name) and node.func.value.id == name \
                and node.func.attr not in _IN_PLACE:
            return "sqlite"
    return None


class _Scanner(ast.NodeVisitor):
    def __init__(self, path: str):
        self.path, self.events, self.batches = path, [], {}

    def visit_With(self, node: ast.With) -> None:
        added = []
        for item in node.items:
            found = _batch_table(item)
            if found:
                added.append(found)
                rebuilds = _rebuilds(item.context_expr, found[0], node)
                if rebuilds:
                    self.events.append(_Event("rebuild", found[1], (rebuilds,), self.path, node.lineno))
        self.batches.update(added)
        self.generic_visit(node)
        for name, _ in added:
            self.batches.pop(name, None)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute):
            owner = func.value.id if isinstance(func.value, ast.Name) else None
            if func.attr in ("create_sync_trigger", "drop_sync_trigger"):
                table, old, new = _argument(node, 0, "table_name"), _argument(node, 1, "old"), \
                    _argument(node, 2, "new")
                if table and old and new:
                    kind = "create" if func.attr == "create_sync_trigger" else "drop"
                    self.events.append(_Event(kind, table, (old, new), self.path, node.lineno))
            elif func.attr == "drop_column" and owner in self.batches:
                column = _argument(node, 0, "column_name")
                if column:
                    self.events.append(_Event("drop_column", self.batches[owner], (column,), self.path, node.lineno))
            elif func.attr == "drop_column":
                table, column = _argument(node, 0, "table_name"), _argument(node, 1, "column_name")
                if table and column:
                    self.events.append(_Event("drop_column", table, (column,), self.path, node.lineno))
        self.generic_visit(node)


def upgrade_events(path: str, source: str) -> list[_Event]:
    """What *source*'s ``upgrade()`` does to sync triggers and their tables, in line order."""
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError:
        return []  # MP000 reports it
    scanner = _Scanner(path)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "upgrade":
            scanner.visit(node)
    return sorted(scanner.events, key=lambda event: event.line)


def findings(scripts: Iterable[tuple[str, str]]) -> list[Finding]:
    """``(path, source)`` of every revision script, in the order they are applied (expand
    before the contract that depends on it): each column dropped under a live sync trigger."""
    live: dict[tuple[str, str, str], _Event] = {}
    found = []
    for path, source in scripts:
        for event in upgrade_events(path, source):
            pair = (event.table, *event.columns)
            if event.kind == "create":
                live[pair] = event
            elif event.kind == "drop":
                live.pop(pair, None)
            elif event.kind == "drop_column":
                column = event.columns[0]
                for (table, old, new), created in live.items():
                    if table == event.table and column in (old, new):
                        found.append(Finding(path, event.line, (
                            f"MP160 drops {table}.{column} while the sync trigger created at "
                            f"{created.path}:{created.line} still uses it: call "
                            f"op.drop_sync_trigger({table!r}, old={old!r}, new={new!r}) first "
                            f"(MariaDB/MySQL: every later write to {table} fails)")))
    return found
