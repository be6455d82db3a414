"""Plain scripts: those whose running can do nothing but call alembic operations with literal arguments.

``is_plain(source)`` reads a script's syntax tree and answers True only when everything
its module and its ``upgrade()`` run is one of:

* imports of alembic, SQLAlchemy (and its dialects), ``typing`` and ``__future__``;
* module-level assignments of literals (``revision = "abc"``, ``branch_labels = None``),
  with simple annotations;
* function definitions without decorators nor computed defaults (their bodies do not run,
  except ``upgrade()``'s);
* in ``upgrade()``: ``op.NAME(...)`` for an operation of alembic itself, and
  ``with op.batch_alter_table(...) as batch_op:`` blocks of ``batch_op.NAME(...)``,
  whose arguments are literals, names of the module's literals, and calls of SQLAlchemy's
  schema and type constructors (``sa.Column``, ``sa.String(50)``, ``sa.text("...")``,
  ``postgresql.JSONB``, ``sa.func.now()``) or ``op.f(...)``.

Such a script cannot loop, read a file, change the interpreter's state or end the process:
the worker analyses it itself, without forking a child for it (``lint.sandbox.worker``), and its
verdict is the one a child would send (the same ``engine.analyse``).  Anything else -- and
any surprise while analysing it -- goes to a forked child as before.
"""

from __future__ import annotations

import ast

#: Larger sources are never plain: their SQL alone could take the lexer long.
MAX_BYTES = 64_000
_MAX_DEPTH = 40
_MODULES = ("alembic", "sqlalchemy", "typing", "__future__")
#: alembic's own operations (``Operations``), and the batch ones.
OPERATIONS = frozenset({
    "add_column", "alter_column", "bulk_insert", "create_check_constraint", "create_exclude_constraint",
    "create_foreign_key", "create_index", "create_primary_key", "create_table", "create_table_comment",
    "create_unique_constraint", "drop_column", "drop_constraint", "drop_index", "drop_table",
    "drop_table_comment", "execute", "rename_table", "f", "inline_literal",
})
#: SQLAlchemy functions (not classes) a plain argument may call.
_FUNCTIONS = frozenset({"text", "literal_column", "column", "table", "literal", "null", "true", "false", "and_",
                        "or_", "not_", "cast", "desc", "asc", "type_coerce"})


def _allowed_module(name: str | None) -> bool:
    return bool(name) and name.split(".")[0] in _MODULES



def _elements(node: ast.AST, depth: int, each) -> bool | None:
    """A tuple, list, set or dict (no ``**`` entry) whose every element *each* accepts, or a negated
    constant (``-1``, ``not 0``); None: *node* is none of these."""
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return all(each(e, depth + 1) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is not None and each(k, depth + 1) for k in node.keys) and all(
            each(v, depth + 1) for v in node.values)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.Not)):
        return isinstance(node.operand, ast.Constant)
    return None

class _Check:
    def __init__(self) -> None:
        self.modules: dict[str, str] = {}  # local name -> module path (``sa`` -> ``sqlalchemy``)
        self.constants: set[str] = set()
        self.op_names: set[str] = set()

    # -- module level ----------------------------------------------------------------------------------------
    def module(self, tree: ast.Module) -> bool:
        upgrade = None
        for node in tree.body:
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                continue
            if isinstance(node, ast.Import):
                if not all(_allowed_module(alias.name) for alias in node.names):
                    return False
                for alias in node.names:
                    self.modules[alias.asname or alias.name.split(".")[0]] = (
                        alias.name if alias.asname else alias.name.split(".")[0])
            elif isinstance(node, ast.ImportFrom):
                if node.level or not _allowed_module(node.module) or any(a.name == "*" for a in node.names):
                    return False
                for alias in node.names:
                    local = alias.asname or alias.name
                    if node.module == "alembic" and alias.name == "op":
                        self.op_names.add(local)
                    else:
                        self.modules[local] = f"{node.module}.{alias.name}"
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if not all(isinstance(t, ast.Name) for t in targets):
                    return False
                if isinstance(node, ast.AnnAssign) and not self.annotation(node.annotation):
                    return False
                if node.value is not None and not self.literal(node.value, 0):
                    return False
                self.constants.update(t.id for t in targets)
            elif isinstance(node, ast.FunctionDef):
                if node.decorator_list or not self.signature(node.args, node.returns):
                    return False
                if node.name == "upgrade":
                    upgrade = node
                self.constants.discard(node.name)
            else:
                return False
        for name in list(self.modules) + list(self.op_names):
            self.constants.discard(name)
        return upgrade is not None and not upgrade.args.args and self.body(upgrade.body)

    def signature(self, args: ast.arguments, returns) -> bool:
        if args.defaults or args.kw_defaults and any(d is not None for d in args.kw_defaults):
            if not all(d is None or isinstance(d, ast.Constant) for d in args.defaults + args.kw_defaults):
                return False
        every = args.posonlyargs + args.args + args.kwonlyargs + [a for a in (args.vararg, args.kwarg) if a]
        return all(a.annotation is None or self.annotation(a.annotation) for a in every) and (
            returns is None or self.annotation(returns))

    def annotation(self, node: ast.AST, depth: int = 0) -> bool:
        if depth > _MAX_DEPTH:
            return False
        if isinstance(node, (ast.Constant, ast.Name)):
            return True
        if isinstance(node, ast.Attribute):
            return self.annotation(node.value, depth + 1)
        if isinstance(node, ast.Subscript):
            return self.annotation(node.value, depth + 1) and self.annotation(node.slice, depth + 1)
        if isinstance(node, ast.Tuple):
            return all(self.annotation(e, depth + 1) for e in node.elts)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return self.annotation(node.left, depth + 1) and self.annotation(node.right, depth + 1)
        return False

    def literal(self, node: ast.AST, depth: int) -> bool:
        if depth > _MAX_DEPTH:
            return False
        if isinstance(node, ast.Constant):
            return True
        if isinstance(node, ast.Name):
            return node.id in ("None", "True", "False")
        return bool(_elements(node, depth, self.literal))

    # -- upgrade() --------------------------------------------------------------------------------------------
    def body(self, body: list[ast.stmt], batch: str | None = None) -> bool:
        for node in body:
            if isinstance(node, ast.Pass) or (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
                continue
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
                if not self.operation(node.value, batch):
                    return False
            elif isinstance(node, ast.With) and batch is None and len(node.items) == 1:
                item = node.items[0]
                call = item.context_expr
                if not (isinstance(call, ast.Call) and self.is_op(call.func, "batch_alter_table")
                        and self.arguments(call) and isinstance(item.optional_vars, ast.Name)):
                    return False
                name = item.optional_vars.id
                if name in self.modules or name in self.op_names or name in self.constants:
                    return False
                self.op_names.add(name)  # batch_op.f("ix_...") as an argument
                try:
                    if not self.body(node.body, name):
                        return False
                finally:
                    self.op_names.discard(name)
            else:
                return False
        return True

    def is_op(self, func: ast.AST, name: str | None = None) -> bool:
        return (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                and func.value.id in self.op_names and (func.attr == name if name else func.attr in OPERATIONS))

    def operation(self, call: ast.Call, batch: str | None) -> bool:
        func = call.func
        if batch is not None and isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
                and func.value.id == batch:
            return func.attr in OPERATIONS and self.arguments(call)
        return self.is_op(func) and self.arguments(call)

    def arguments(self, call: ast.Call, depth: int = 0) -> bool:
        return all(not isinstance(a, ast.Starred) and self.value(a, depth + 1) for a in call.args) and all(
            k.arg is not None and self.value(k.value, depth + 1) for k in call.keywords)

    def value(self, node: ast.AST, depth: int) -> bool:
        if depth > _MAX_DEPTH:
            return False
        if isinstance(node, ast.Constant):
            return True
        if isinstance(node, ast.Name):
            return node.id in ("None", "True", "False") or node.id in self.constants or self.sqlalchemy(node)
        elements = _elements(node, depth, self.value)
        if elements is not None:
            return elements
        if isinstance(node, ast.Attribute):
            return self.sqlalchemy(node)
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) \
                    and node.func.value.id in self.op_names:
                return node.func.attr in ("f", "inline_literal") and self.arguments(node, depth)
            return self.sqlalchemy(node.func, call=True) and self.arguments(node, depth)
        return False

    def sqlalchemy(self, node: ast.AST, call: bool = False) -> bool:
        """Whether *node* names a SQLAlchemy type, schema item or clause constructor (resolved for real)."""
        path = []
        while isinstance(node, ast.Attribute):
            path.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or node.id not in self.modules:
            return False
        base = self.modules[node.id]
        if not base.startswith("sqlalchemy"):
            return False
        path.reverse()
        if base.endswith(".func"):  # from sqlalchemy import func; func.now()
            return call and len(path) == 1 and not path[0].startswith("_")
        if path and path[0] == "func":  # sa.func.now(), sa.func.coalesce(...): a SQL function, nothing runs
            return call and len(path) == 2 and not path[1].startswith("_")
        return _resolves(base, tuple(path), call)


#: (base, path, call) -> answer of ``_resolves``: the same names recur in every script (``sa.Column``,
#: ``sa.String``) and each answer depends on the installed SQLAlchemy alone.
_RESOLVED: dict[tuple[str, tuple[str, ...], bool], bool] = {}


def _resolves(base: str, path: tuple[str, ...], call: bool) -> bool:
    key = (base, path, call)
    answer = _RESOLVED.get(key)
    if answer is None:
        answer = _RESOLVED[key] = _resolve(base, path, call)
    return answer


def _resolve(base: str, path: tuple[str, ...], call: bool) -> bool:
    import importlib

    from sqlalchemy.schema import SchemaItem
    from sqlalchemy.sql.elements import ClauseElement
    from sqlalchemy.types import TypeEngine

    module_name, _, attribute = base.partition(".") if base.count(".") == 0 else base.rpartition(".")
    try:
        target = importlib.import_module(base) if base.split(".")[0] == "sqlalchemy" and _is_module(base) else None
        if target is None:
            target = getattr(importlib.import_module(module_name), attribute)
        for name in path:
            if name.startswith("_"):
                return False
            target = getattr(target, name)
    except (ImportError, AttributeError, ValueError):
        return False
    if isinstance(target, type):
        return issubclass(target, (TypeEngine, SchemaItem, ClauseElement))
    if callable(target):
        return getattr(target, "__name__", "") in _FUNCTIONS and str(getattr(target, "__module__", "")).startswith(
            "sqlalchemy")
    return not call and isinstance(target, (TypeEngine, ClauseElement))


def _is_module(name: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError, AttributeError):
        return False


def is_plain(source: str, tree: ast.Module | None = None) -> bool:
    """Whether the script of *source* is plain (see the module docstring)."""
    return plain_tree(source, tree) is not None


def plain_tree(source: str, tree: ast.Module | None = None, filename: str = "<unknown>") -> ast.Module | None:
    """The syntax tree of *source* when the script is plain, else None (parsed once: the engine compiles it)."""
    if len(source) > MAX_BYTES:
        return None
    try:
        tree = tree or ast.parse(source, filename)
        return tree if _Check().module(tree) else None
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
