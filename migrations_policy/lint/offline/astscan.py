"""Lint ``upgrade()`` from its source when it cannot run offline.

``scan(module, tree, dialect, filename)`` walks the body of ``upgrade()`` statement by
statement inside an offline recording (``recorder.recording``) and evaluates what it
can in the module's namespace: ``op.*`` calls record exactly as they would when run;
assignments bind names when their value can be computed; ``with`` blocks are entered
(``batch_alter_table``, ``autocommit_block``); ``if`` tests are evaluated when possible
(``op.get_context().dialect.name == "postgresql"``), otherwise both branches are
scanned; ``for`` loops over computable sequences bind each item, otherwise the body is
scanned once; calls to functions defined in the script, or in the project's own modules
it imports (not installed packages), are followed (a helper module's ops are reported at
the line of the script that calls it).  An ``op.*``
call whose arguments cannot be computed is recorded from its literal arguments (its
kind, table and column), and SQL built with f-strings is classified with placeholders.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

from migrations_policy.policy import model as m
from migrations_policy.policy.sql import from_sql
from migrations_policy.lint.offline.loader import is_local_file
from migrations_policy.lint.offline.missing import is_missing
from migrations_policy.lint.offline.recorder import Recording, recording
from migrations_policy.lint.offline.unimported import ClassRef, module_aliases, unimported_helper, unimported_method

MAX_DEPTH = 8
MAX_LOOP = 1000
_UNKNOWN = object()
#: id(expression node) -> (the node, the names it reads, its code or None): ``_Scanner.eval``'s memo (the node is
#: kept, so its id is not reused while the entry lives).
_COMPILED: dict[int, tuple] = {}
_COMPILED_LIMIT = 20000

#: op method -> (kind, index of the table argument).
_METHODS = {
    "add_column": (m.ADD_COLUMN, 0), "drop_column": (m.DROP_COLUMN, 0), "alter_column": (m.ALTER_TYPE, 0),
    "create_table": (m.CREATE_TABLE, 0), "drop_table": (m.DROP_TABLE, 0), "rename_table": (m.RENAME_TABLE, 0),
    "create_index": (m.CREATE_INDEX, 1), "drop_index": (m.DROP_INDEX, 1),
    "create_foreign_key": (m.ADD_FK, 1), "create_unique_constraint": (m.ADD_UNIQUE, 1),
    "create_check_constraint": (m.ADD_CHECK, 1), "create_primary_key": (m.ADD_PK, 1),
    "drop_constraint": (m.DROP_CONSTRAINT, 1), "bulk_insert": (m.INSERT, 0),
}


#: Keyword arguments that name the table / the column of an op call.
_TABLE_KEYWORDS = ("table_name", "source_table", "source", "table")
_COLUMN_KEYWORDS = ("column_name", "column")
#: Calls that change rows: ``session.query(X).update(...)``, ``table.delete()``, ``session.add(obj)``...
_DML_METHODS = {"update": m.UPDATE, "delete": m.DELETE, "insert": m.INSERT, "add": m.INSERT, "add_all": m.INSERT,
                "merge": m.UPDATE, "bulk_insert_mappings": m.INSERT, "bulk_save_objects": m.INSERT,
                "bulk_update_mappings": m.UPDATE}
_ORM_RECEIVERS = ("session", "query")


def _keyword(kws: dict[str, ast.AST], names: tuple[str, ...]) -> ast.AST | None:
    return next((kws[name] for name in names if name in kws), None)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _mentions_orm(node: ast.AST) -> bool:
    """Whether the receiver chain of a call goes through a session or ``.query(...)``."""
    for sub in ast.walk(node):
        name = sub.attr if isinstance(sub, ast.Attribute) else sub.id if isinstance(sub, ast.Name) else ""
        if any(word in name.lower() for word in _ORM_RECEIVERS):
            return True
    return False


def _dml_kind(call: ast.Call) -> str | None:
    """The DML kind of ``X.update()`` / ``sa.delete(t)`` / ``session.add(o)`` / ``session.query(M).delete()``."""
    func = call.func
    if isinstance(func, ast.Attribute):
        kind = _DML_METHODS.get(func.attr)
        if kind is None:
            return None
        if func.attr in ("update", "delete", "insert"):
            # table.update() / sa.update(t) / query.update({...}); not some_dict.update(other)
            sqlalchemy = isinstance(func.value, ast.Name) and func.value.id in ("sa", "sqlalchemy")
            if not call.args or sqlalchemy:
                return kind
        return kind if _mentions_orm(func.value) else None
    if isinstance(func, ast.Name) and func.id in ("update", "delete", "insert") and call.args:
        return _DML_METHODS[func.id]
    return None


def _chain_dml(node: ast.AST) -> str | None:
    """``_dml_kind`` of the first DML call down a chain (``t.update().where(...).values(...)``)."""
    while isinstance(node, ast.Call):
        kind = _dml_kind(node)
        if kind is not None:
            return kind
        node = node.func.value if isinstance(node.func, ast.Attribute) else None
    return None


@dataclass
class ScanResult:
    recording: Recording
    unevaluated: list[int] = field(default_factory=list)  # lines of op calls recorded from literals only


def _const(node: ast.AST | None) -> Any:
    return node.value if isinstance(node, ast.Constant) else None


def _name_of(node: ast.AST | None, env: dict[str, Any] | None) -> Any:
    """A table name read from *node*: its literal; else, for an attribute of a module-level name that could not
    be computed (``Model.__tablename__``, ``Model`` not importable), a stand-in named by that expression
    (``<Model.__tablename__>``): one module-level expression names one table throughout the script, so an index
    on the table the script creates is on a new table.  A local name (a loop may rebind it) stays unknown."""
    if isinstance(node, ast.Constant):
        return node.value
    root = node
    while isinstance(root, ast.Attribute):
        root = root.value
    if isinstance(node, ast.Attribute) and isinstance(root, ast.Name) and root.id not in (env or {}):
        return f"<{ast.unparse(node)}>"
    return None


def _static_sql(node: ast.AST) -> str | None:
    """SQL text of a literal, an f-string (placeholders for the holes) or ``text("...")``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "_x_" for v in node.values)
    if isinstance(node, ast.Call) and node.args and getattr(node.func, "attr", getattr(node.func, "id", "")) == "text":
        return _static_sql(node.args[0])
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
        left = _static_sql(node.left)
        return None if left is None else left + " _x_"
    return None


#: What the first parameter of a staticmethod or a plain function receives: nothing (``_Scanner.helper``).
_UNBOUND = object()


class _Returned(Exception):
    """A ``return`` reached on a path that certainly runs: the rest of the function does not."""


class _Scanner:
    def __init__(self, module, tree: ast.Module, filename: str, rec: Recording):
        #: > 0 while scanning code that may not run (a branch of an unknown test, an unknown loop's body):
        #: a ``return`` there does not end the scan.
        self.uncertain = 0
        self.globals = vars(module)
        self.filename = filename
        self.rec = rec
        self.functions = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        self.unevaluated: list[int] = []
        self.batch_tables: dict[str, str] = {}
        #: Local names bound to what an ORM query gave (``rows = session.query(M).all()``) and loop variables over
        #: such rows: assigning one of their attributes is an UPDATE when the session flushes.
        self.orm_rows: set[str] = set()
        #: name -> (module, attribute) of the script's top-level ``from MODULE import NAME`` (level 0).
        self.imported = {alias.asname or alias.name: (node.module, alias.name) for node in tree.body
                         if isinstance(node, ast.ImportFrom) and node.module and not node.level
                         for alias in node.names}
        #: name -> module of the script's top-level ``import a.b as name`` / ``name = import_module("a.b")``.
        self.modules = module_aliases(tree)

    def eval(self, node: ast.AST, env: dict[str, Any]) -> Any:
        compiled = _COMPILED.get(id(node))
        if compiled is None or compiled[0] is not node:
            # each expression's names and code once per tree: a scan evaluates the same expressions for every
            # dialect and on every pass of a loop (issue 28: the with-deps speed)
            names = tuple(dict.fromkeys(n.id for n in ast.walk(node) if isinstance(n, ast.Name)))
            try:
                code = compile(ast.fix_missing_locations(ast.Expression(body=node)), self.filename, "eval")
            except Exception:  # noqa: BLE001 - not computable: unknown (below)
                code = None
            if len(_COMPILED) >= _COMPILED_LIMIT:
                _COMPILED.clear()
            compiled = _COMPILED[id(node)] = (node, names, code)
        _, names, code = compiled
        if any(env.get(name) is _UNKNOWN or name not in env and is_missing(self.globals.get(name))
               for name in names):
            # never computed with a placeholder: it would reach op calls and messages, and a placeholder's truth
            # value (``not has_table("t")``, has_table not importable) would decide a guard it cannot decide
            return _UNKNOWN
        if code is None:
            return _UNKNOWN
        try:
            value = eval(code, {**self.globals, **env})  # noqa: S307 - the script's own expressions
        except Exception:  # noqa: BLE001 - anything not computable offline is unknown
            return _UNKNOWN
        return _UNKNOWN if is_missing(value) else value  # what could not be imported is unknown

    def run(self, fn: ast.FunctionDef, env: dict[str, Any], depth: int) -> None:
        if depth <= MAX_DEPTH:
            try:
                self.block(fn.body, env, depth)
            except _Returned:
                pass

    def maybe(self, body: list[ast.stmt], env: dict[str, Any], depth: int) -> None:
        """Scan *body*, which may or may not run."""
        self.uncertain += 1
        try:
            self.block(body, env, depth)
        finally:
            self.uncertain -= 1

    def block(self, body: list[ast.stmt], env: dict[str, Any], depth: int) -> None:
        for node in body:
            self.stmt(node, env, depth)

    def bind(self, target: ast.AST, value: Any, env: dict[str, Any]) -> None:
        if isinstance(target, ast.Name):
            if value is _UNKNOWN:
                env.pop(target.id, None)
                env[target.id] = _UNKNOWN
            else:
                env[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            try:
                values = list(value) if value is not _UNKNOWN else []
            except Exception:  # noqa: BLE001
                values = []
            if len(values) != len(target.elts):
                values = [_UNKNOWN] * len(target.elts)
            for elt, item in zip(target.elts, values):
                self.bind(elt, item, env)

    def stmt(self, node: ast.stmt, env: dict[str, Any], depth: int) -> None:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            self.call(node.value, env, depth)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and node.value is not None:
            value = self.call(node.value, env, depth) if isinstance(node.value, ast.Call) else self.eval(node.value, env)
            if isinstance(node, ast.AugAssign):
                value = _UNKNOWN
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                self.bind(target, value, env)
            self.orm_assignment(node, targets, value)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            self.with_(node, env, depth)
        elif isinstance(node, ast.If):
            test = self.eval(node.test, env)
            try:
                known = None if test is _UNKNOWN else bool(test)
            except Exception:  # noqa: BLE001 - a value whose truth cannot be told
                known = None
            if known is None:
                self.maybe(node.body, env, depth)
                self.maybe(node.orelse, env, depth)
            else:  # a dialect guard (``if op.get_context().dialect.name != "sqlite": return``) is honoured
                self.block(node.body if known else node.orelse, env, depth)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            self.for_(node, env, depth)
        elif isinstance(node, ast.While):
            self.maybe(node.body, env, depth)
        elif isinstance(node, ast.Return):
            if node.value is not None and isinstance(node.value, ast.Call):
                self.call(node.value, env, depth)  # return op.drop_column(...)
            if not self.uncertain:
                raise _Returned
        elif isinstance(node, ast.Try):
            self.block(node.body + node.orelse + node.finalbody, env, depth)
        elif isinstance(node, ast.FunctionDef):
            self.functions[node.name] = node

    def for_(self, node: ast.For, env: dict[str, Any], depth: int) -> None:
        items = self.eval(node.iter, env)
        try:
            items = list(items)[:MAX_LOOP] if items is not _UNKNOWN else _UNKNOWN
        except Exception:  # noqa: BLE001
            items = _UNKNOWN
        if items is _UNKNOWN or not items:
            self.bind(node.target, _UNKNOWN, env)
            rows = items is _UNKNOWN and isinstance(node.target, ast.Name) and self.from_orm(node.iter)
            if rows:
                self.orm_rows.add(node.target.id)
            try:
                self.maybe(node.body, env, depth)
            finally:
                if rows:
                    self.orm_rows.discard(node.target.id)
            return
        for item in items:
            self.bind(node.target, item, env)
            self.block(node.body, env, depth)

    def with_(self, node: ast.With, env: dict[str, Any], depth: int) -> None:
        entered = []
        for item in node.items:
            manager = self.eval(item.context_expr, env)
            value = _UNKNOWN
            if manager is not _UNKNOWN and hasattr(manager, "__enter__"):
                try:
                    with self.at(node):
                        value = manager.__enter__()
                    entered.append(manager)
                except Exception:  # noqa: BLE001
                    value = _UNKNOWN
            if item.optional_vars is not None:
                self.bind(item.optional_vars, value, env)
                call = item.context_expr
                if value is _UNKNOWN and isinstance(call, ast.Call) and getattr(call.func, "attr", "") == "batch_alter_table":
                    if isinstance(item.optional_vars, ast.Name):
                        self.batch_tables[item.optional_vars.id] = _name_of(call.args[0], env) if call.args else None
        try:
            self.block(node.body, env, depth)
        finally:
            for manager in reversed(entered):
                try:
                    with self.at(node):  # (a batch block records its table's recreation as it exits)
                        manager.__exit__(None, None, None)
                except Exception:  # noqa: BLE001
                    pass

    @contextmanager
    def at(self, node: ast.stmt) -> Iterator[None]:
        """What this reader calls itself (no frame of the script) is at *node*'s line."""
        previous, self.rec.at = self.rec.at, node.lineno
        try:
            yield
        finally:
            self.rec.at = previous

    def call(self, node: ast.Call, env: dict[str, Any], depth: int) -> Any:
        func = node.func
        if isinstance(func, ast.Name) and func.id in self.functions and func.id not in env:
            self.helper(self.functions[func.id], node, env, depth)
            return _UNKNOWN
        imported = self.imported_helper(func, env, node.lineno) if depth < MAX_DEPTH else None
        if imported is None and depth < MAX_DEPTH and isinstance(func, ast.Name) and func.id in self.imported:
            imported = unimported_helper(*self.imported[func.id], node.lineno)
        if imported is None and depth < MAX_DEPTH and isinstance(func, ast.Attribute) \
                and isinstance(func.value, ast.Name) and func.value.id in self.modules and func.value.id not in env:
            imported = unimported_helper(self.modules[func.value.id], func.attr, node.lineno)  # module.downgrade()
        if imported is None and depth < MAX_DEPTH and isinstance(func, ast.Attribute):
            imported = self.unimported_method(func, env, node.lineno)  # Helper.upgrade(session), cls.step(row)
        if imported is not None:  # a helper of the project's own modules: followed like the script's own
            self.helper(imported[0], node, env, depth, namespace=imported[1],
                        bound=imported[2] if len(imported) > 2 else _UNBOUND)
            return _UNKNOWN
        value = self.eval(node, env)
        if value is _UNKNOWN and isinstance(func, ast.Attribute):
            if not self.from_literals(node, func, env):
                self.dml(node, func)
        return value

    def unimported_method(self, func: ast.Attribute, env: dict[str, Any], line: int):
        """``(FunctionDef, namespace, bound)`` of ``C.m`` / ``C().m`` / ``cls.m`` / ``self.m`` when ``C`` is a class
        of the project's modules that could not be imported (``unimported.unimported_method``); *bound* is what
        its first parameter receives (``_UNBOUND``: a staticmethod); None otherwise."""
        receiver = func.value
        if isinstance(receiver, ast.Call) and not receiver.args and not receiver.keywords:
            receiver = receiver.func  # C().m(): an instance (its __init__ not followed)
        if not isinstance(receiver, ast.Name):
            return None
        ref = env.get(receiver.id)
        if isinstance(ref, ClassRef):
            where = (ref.module, ref.name)
        elif receiver.id not in env and receiver.id in self.imported and is_missing(self.globals.get(receiver.id)):
            where = self.imported[receiver.id]
        else:
            return None
        found = unimported_method(*where, func.attr, line)
        if found is None:
            return None
        fn, namespace, kind = found
        return fn, namespace, _UNBOUND if kind == "static" else ClassRef(*where)

    def from_orm(self, node: ast.AST) -> bool:
        """Whether *node* (not computable) gives what an ORM query loads: it goes through a session or
        ``.query(...)``, or names what such an expression gave."""
        return _mentions_orm(node) or any(isinstance(sub, ast.Name) and sub.id in self.orm_rows
                                          for sub in ast.walk(node))

    def orm_assignment(self, node: ast.stmt, targets: list[ast.AST], value: Any) -> None:
        """``rows = session.query(M).all()`` notes *rows*; ``row.attr = ...`` of such a row is an UPDATE (the
        session writes it at flush), recorded at that line."""
        for target in targets:
            if isinstance(target, ast.Name):
                if value is _UNKNOWN and node.value is not None and self.from_orm(node.value):
                    self.orm_rows.add(target.id)
                else:
                    self.orm_rows.discard(target.id)
                continue
            root = target
            while isinstance(root, (ast.Attribute, ast.Subscript)):
                root = root.value
            if isinstance(target, ast.Attribute) and isinstance(root, ast.Name) and root.id in self.orm_rows:
                self.rec.add([m.Operation(kind=m.UPDATE, source="source")], line=node.lineno)
                self.unevaluated.append(node.lineno)
                return

    def dml(self, node: ast.Call, func: ast.Attribute) -> None:
        """DML that could not be computed: ORM sessions, ``table.update()`` / ``.delete()`` / ``.insert()``."""
        kind = _chain_dml(node)
        if kind is None and func.attr == "execute" and node.args:
            kind = _chain_dml(node.args[0])
        if kind is not None:
            self.rec.add([m.Operation(kind=kind, source="source")], line=node.lineno)
            self.unevaluated.append(node.lineno)

    def helper(self, fn: ast.FunctionDef, node: ast.Call, env: dict[str, Any], depth: int,
               namespace: dict[str, Any] | None = None, bound: Any = None) -> None:
        """Scan *fn* called by *node*; *namespace*: the globals of a helper module's function; *bound*: what a
        method's first parameter receives (``cls``, ``self``; ``_UNBOUND``: nothing).  A parameter given a row an
        ORM query loaded is such a row in *fn* (assigning its attributes is an UPDATE)."""
        local: dict[str, Any] = {}
        params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
        defaults = fn.args.defaults
        defaulted = params[len(params) - len(defaults):]
        if bound is not _UNBOUND and bound is not None and params:
            local[params[0]] = bound
            params = params[1:]
        rows = set()
        for name, arg in zip(params, node.args):
            local[name] = self.eval(arg, env)
            if isinstance(arg, ast.Name) and arg.id in self.orm_rows and name not in self.orm_rows:
                rows.add(name)
        for kw in node.keywords:
            if kw.arg:
                local[kw.arg] = self.eval(kw.value, env)
                if isinstance(kw.value, ast.Name) and kw.value.id in self.orm_rows and kw.arg not in self.orm_rows:
                    rows.add(kw.arg)
        saved, self.globals = self.globals, self.globals if namespace is None else namespace
        self.orm_rows |= rows
        try:
            for name, default in zip(defaulted, defaults):
                local.setdefault(name, self.eval(default, {}))
            self.run(fn, local, depth + 1)
        finally:
            self.globals = saved
            self.orm_rows -= rows

    def imported_helper(self, func: ast.AST, env: dict[str, Any], line: int):
        """``(FunctionDef, globals)`` of a function of the project's own modules that *func* names, every line
        of it set to *line* (its ops are reported where the script calls it); None otherwise."""
        if not isinstance(func, (ast.Name, ast.Attribute)):
            return None
        target = self.eval(func, env)
        bound = _UNBOUND
        if inspect.ismethod(target):  # a class's classmethod or an instance's method: its first parameter bound
            target, bound = target.__func__, target.__self__
        code = getattr(target, "__code__", None)
        if not (inspect.isfunction(target) and is_local_file(code.co_filename)) or code.co_filename == self.filename:
            return None
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(target)))
        except (OSError, TypeError, SyntaxError, ValueError):
            return None
        fn = tree.body[0] if tree.body and isinstance(tree.body[0], ast.FunctionDef) else None
        if fn is None:
            return None
        for sub in ast.walk(fn):
            if hasattr(sub, "lineno"):
                sub.lineno = sub.end_lineno = line
                sub.col_offset = sub.end_col_offset = 0  # one position: a valid range for compile()
        return fn, target.__globals__, bound

    def from_literals(self, node: ast.Call, func: ast.Attribute, env: dict[str, Any] | None = None) -> bool:
        """Record an op call whose arguments cannot be computed, from its literal arguments (positional or
        keyword); whether it was one."""
        base = func.value.id if isinstance(func.value, ast.Name) else None
        name = func.attr
        line = node.lineno
        if name == "execute":
            text = _static_sql(node.args[0]) if node.args else None
            if text is not None:
                self.rec.add([op.with_(source="source") for op in from_sql(text)], line=line)
                self.unevaluated.append(line)
            return text is not None
        if name not in _METHODS or base is None:
            return False
        kind, index = _METHODS[name]
        in_batch = base in self.batch_tables
        args = list(node.args)
        kws = {kw.arg: kw.value for kw in node.keywords if kw.arg}
        if in_batch:
            table = self.batch_tables[base]
            index = -1
        else:
            table_arg = args[index] if len(args) > index else _keyword(kws, _TABLE_KEYWORDS)
            table = _name_of(table_arg, env) if not isinstance(table_arg, ast.Name) else (env or {}).get(table_arg.id)
        column = None
        if kind in (m.ADD_COLUMN, m.DROP_COLUMN, m.ALTER_TYPE):
            column_arg = args[index + 1] if len(args) > index + 1 else _keyword(kws, _COLUMN_KEYWORDS)
            column = _const(column_arg) if not isinstance(column_arg, ast.Call) else _const(column_arg.args[0] if column_arg.args else None)
        ops = [m.Operation(kind=kind, table=_text(table), column=_text(column), source="source", in_batch=in_batch,
                           concurrently=bool(_const(kws.get("postgresql_concurrently"))),
                           not_valid=bool(_const(kws.get("postgresql_not_valid"))))]
        if kind == m.ALTER_TYPE:
            ops = self._alter_column_kinds(ops[0], kws)
        self.rec.add(ops, line=line)
        self.unevaluated.append(line)
        return True

    @staticmethod
    def _alter_column_kinds(op: m.Operation, kws: dict[str, ast.AST]) -> list[m.Operation]:
        kinds = []
        if "new_column_name" in kws:
            kinds.append(m.RENAME_COLUMN)
        if "type_" in kws:
            kinds.append(m.ALTER_TYPE)
        if "nullable" in kws and not (isinstance(kws["nullable"], ast.Constant) and "existing_nullable" in kws
                                      and _const(kws["existing_nullable"]) is _const(kws["nullable"])):
            kinds.append(m.SET_NOT_NULL if _const(kws["nullable"]) is False else m.DROP_NOT_NULL)
        return [op.with_(kind=k) for k in kinds] or [op.with_(kind=m.OTHER)]


def _parameters(fn: ast.FunctionDef) -> dict[str, Any]:
    """What a framework passes to ``upgrade(op, tables, ...)`` (``fakes.argument``), by parameter name."""
    from alembic import op

    from migrations_policy.lint.offline.fakes import argument

    names = [a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs]
    return {name: argument(name, op) for name in names}


def scan(module, tree: ast.Module, dialect: str, filename: str, ini: str = "") -> ScanResult:
    """Record ``upgrade()`` of *module* from its source (see the module docstring)."""
    with recording(dialect, filename, strict=True, ini=ini) as rec:
        scanner = _Scanner(module, tree, filename, rec)
        upgrade = scanner.functions.get("upgrade")
        if upgrade is not None:
            scanner.run(upgrade, _parameters(upgrade), 0)
    return ScanResult(recording=rec, unevaluated=scanner.unevaluated)
