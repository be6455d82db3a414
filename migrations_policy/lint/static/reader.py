"""Plain scripts judged from their syntax tree, without importing alembic or SQLAlchemy (issue 28: CI speed).

``analyse(path, phase, options)`` returns the findings of a script whose ``upgrade()`` does nothing but
call alembic's own operations with literal arguments and SQLAlchemy constructors (what autogenerate
writes), or None: then the script is run in the lint worker as before.  The script is not run: its tree
is read into the same ``Operation``s, at the same lines, that running it offline records
(``lint.offline.recorder``), through the same functions (``policy.op_facts``, ``policy.sql.from_sql``,
``lint.offline.recording.Recording``), and judged by the engine's one path after the operations
(``engine.judged``: rules, dialect merging, inline ignores).

It fails closed: every name, argument and value it reads must be in its tables (``lint.static.names``,
checked against the installed alembic and SQLAlchemy by a test); anything else -- another statement, an
unknown type or keyword, a value of another kind, a call that would raise when run -- declines the whole
script (None).  ``tests/lint/test_static_equivalence.py`` compares its findings with running the script.
"""

from __future__ import annotations

import ast
import builtins
import re
from pathlib import Path

from migrations_policy.lint.static import names
from migrations_policy.lint.offline.recording import Recording
from migrations_policy.lint.static.ops import (OPERATIONS, Decline, _check, _Column, _Computed, _Constraint, _Conv,
    _ForeignKey, _Function, _Identity, _is_literal, _Text, _Type)

#: Larger sources are never read here (as ``lint.offline.plain``).
MAX_BYTES = 64_000
_MAX_DEPTH = 40
_BUILTINS = frozenset(dir(builtins))
#: The one name Python's compiler refuses to bind (as a keyword argument, a ``with`` target, ...): the body of
#: ``upgrade()`` is never compiled (``_unread``), so the reader declines it wherever it binds a name.
_UNBINDABLE = "__debug__"
_FK_TARGET = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*){1,2}$")


# -- the module ----------------------------------------------------------------------------------------------------
class _Script:
    def __init__(self) -> None:
        #: local name -> ("op",) / ("module", module) / ("sa", module, name) / ("typing", name) / ("const", value)
        #: / ("def", node) / ("future",)
        self.bound: dict[str, tuple] = {}
        #: The name of the batch block being read (``batch_op``: its ``f()`` is ``op.f()``).
        self.batch_name: str | None = None

    def bind(self, name: str, what: tuple) -> None:
        _check(name not in self.bound and name not in _BUILTINS)  # each name bound once: its value is known
        self.bound[name] = what

    def module(self, tree: ast.Module) -> ast.FunctionDef:
        for node in tree.body:
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                continue
            if isinstance(node, ast.Import):
                for alias in node.names:
                    module = alias.name
                    _check(module in ("sqlalchemy", "typing") or module in names.DIALECT_MODULES and alias.asname)
                    self.bind(alias.asname or module, ("module", module))
            elif isinstance(node, ast.ImportFrom):
                self.import_from(node)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                _check(all(isinstance(t, ast.Name) for t in targets))
                if isinstance(node, ast.AnnAssign):
                    self.annotation(node.annotation)
                    if node.value is None:
                        continue  # an annotation alone binds nothing
                value = _literal(node.value, 0)
                for target in targets:
                    self.bind(target.id, ("const", value))
            elif isinstance(node, ast.FunctionDef):
                _check(not node.decorator_list and not node.args.defaults and not any(node.args.kw_defaults))
                arguments = node.args
                for argument in (arguments.posonlyargs + arguments.args + arguments.kwonlyargs
                                 + [a for a in (arguments.vararg, arguments.kwarg) if a]):
                    if argument.annotation is not None:
                        self.annotation(argument.annotation)
                if node.returns is not None:
                    self.annotation(node.returns)
                self.bind(node.name, ("def", node))
            else:
                raise Decline
        upgrade = self.bound.get("upgrade")
        _check(upgrade is not None and upgrade[0] == "def")
        arguments = upgrade[1].args
        _check(not (arguments.posonlyargs or arguments.args or arguments.kwonlyargs or arguments.vararg
                    or arguments.kwarg))
        return upgrade[1]

    def import_from(self, node: ast.ImportFrom) -> None:
        _check(not node.level and node.module)
        for alias in node.names:
            local, name, module = alias.asname or alias.name, alias.name, node.module
            if module == "alembic" and name == "op":
                self.bind(local, ("op",))
            elif module == "__future__" and name == "annotations":
                self.bind(local, ("future",))
            elif module == "typing" and name in names.TYPING:
                self.bind(local, ("typing", name))
            elif module == "sqlalchemy.dialects" and f"{module}.{name}" in names.DIALECT_MODULES:
                self.bind(local, ("module", f"{module}.{name}"))
            elif (module, name) in names.TYPES or module == names.SA and name in names.SCHEMA:
                self.bind(local, ("sa", module, name))
            else:
                raise Decline

    def annotation(self, node: ast.AST, depth: int = 0, in_subscript: bool = False) -> None:
        """An annotation evaluated at run time must not raise (``Optional[a, b]``, an unbound name)."""
        _check(depth < _MAX_DEPTH)
        if isinstance(node, ast.Constant):
            _check(node.value is None or isinstance(node.value, str))
            return
        _check(self.subscriptable(node) is not None if not isinstance(node, (ast.Subscript, ast.BinOp)) else True)
        if isinstance(node, ast.Subscript):
            arity = self.subscriptable(node.value)
            _check(arity != 0 and arity is not None)
            items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            _check(arity == -1 or len(items) == arity)
            for item in items:
                self.annotation(item, depth + 1, True)
        elif isinstance(node, ast.BinOp):
            _check(isinstance(node.op, ast.BitOr))
            _check(not isinstance(node.left, ast.Constant))  # "str" | None raises
            _check(not (isinstance(node.right, ast.Constant) and node.right.value is not None))
            self.annotation(node.left, depth + 1)
            self.annotation(node.right, depth + 1)

    def subscriptable(self, node: ast.AST) -> int | None:
        """How many parameters the annotation name *node* takes (-1: any; 0: none); None: not a known name."""
        if isinstance(node, ast.Name):
            bound = self.bound.get(node.id)
            if bound is None and node.id in names.BUILTIN_ANNOTATIONS:
                arity = names.BUILTIN_ANNOTATIONS[node.id]
            elif bound is not None and bound[0] == "typing":
                arity = names.TYPING[bound[1]]
            else:
                return None
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and self.bound.get(node.value.id) == ("module", "typing") and node.attr in names.TYPING:
            arity = names.TYPING[node.attr]
        else:
            return None
        return -1 if arity is None else arity

    # -- upgrade() ---------------------------------------------------------------------------------------------
    def upgrade(self, node: ast.FunctionDef, rec: Recording) -> None:
        for statement in node.body:
            if _skipped(statement):
                continue
            if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
                self.operation(statement.value, rec, None)
            elif isinstance(statement, ast.With) and len(statement.items) == 1:
                self.batch(statement, rec)
            else:
                raise Decline

    def batch(self, statement: ast.With, rec: Recording) -> None:
        item = statement.items[0]
        call, target = item.context_expr, item.optional_vars
        _check(isinstance(call, ast.Call) and self.is_op(call.func) and call.func.attr == "batch_alter_table")
        # (``as __debug__`` is the one name the compiler refuses to bind: the body is never compiled, see ``_unread``)
        _check(isinstance(target, ast.Name) and target.id not in self.bound and target.id != _UNBINDABLE)
        line = _line(call)
        _check(statement.lineno == line)
        given = self.bind_arguments(call, names.BATCH_ALTER_TABLE)
        table, recreate = given["table_name"], given.get("recreate", "auto")
        _check(type(table) is str)
        for value in given.values():
            _check(_is_literal(value))
        self.batch_name = target.id
        try:
            with rec.batch(table, recreate, line):
                for inner in statement.body:
                    if _skipped(inner):
                        continue
                    _check(isinstance(inner, ast.Expr) and isinstance(inner.value, ast.Call))
                    self.operation(inner.value, rec, (target.id, table))
        finally:
            self.batch_name = None

    def is_op(self, func: ast.AST) -> bool:
        return (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                and self.bound.get(func.value.id) == ("op",))

    def operation(self, call: ast.Call, rec: Recording, batch: tuple[str, str] | None) -> None:
        func = call.func
        if type(func) is not ast.Attribute or type(func.value) is not ast.Name:
            raise Decline
        if batch is not None and func.value.id == batch[0]:
            signature = names.BATCH_OPERATIONS.get(func.attr)
            table = batch[1]
        else:
            _check(self.bound.get(func.value.id) == ("op",))  # (``is_op``)
            signature = names.OPERATIONS.get(func.attr)
            table = None
        _check(signature is not None)
        given = self.bind_arguments(call, signature)
        if table is not None:
            given["table_name"] = given["source_table"] = table
        rec.add(OPERATIONS[func.attr](given, rec), line=_line(call))

    def bind_arguments(self, call: ast.Call, signature: names.Signature) -> dict:
        """The arguments of *call* by *signature*'s names (``"*"``: the extra positional ones), as Python binds them;
        declined where binding would raise (too many, unknown, repeated or missing arguments)."""
        names_ = signature.positional
        if len(call.args) > len(names_) and not signature.varargs:
            raise Decline
        value = self.value
        positional = [value(a, 1) for a in call.args]  # (``value`` declines ``*args``)
        given = dict(zip(names_, positional))
        given["*"] = positional[len(names_):]
        for keyword in call.keywords:
            name = keyword.arg  # (None: ``**kwargs``)
            if name is None or name in given or name == _UNBINDABLE or not (
                    name in names_ or name in signature.keywords or signature.any_keyword):
                raise Decline
            given[name] = value(keyword.value, 1)
        for name in names_[:signature.required]:
            if name not in given:
                raise Decline
        return given

    def value(self, node: ast.AST, depth: int):
        _check(depth < _MAX_DEPTH)
        kind = type(node)  # (parsed nodes are of the classes themselves: one look-up, most frequent first)
        if kind is ast.Constant:
            value = node.value
            _check(value is not Ellipsis)
            return value
        if kind is ast.Name:
            bound = self.bound.get(node.id)
            if bound is not None and bound[0] == "const":
                return bound[1]
            if bound is not None and bound[0] == "sa":
                return self.reference(bound[1], bound[2], None)
            raise Decline
        if kind is ast.Call:
            return self.call(node, depth)
        if kind is ast.Attribute:
            module = self.module_of(node.value)
            return self.reference(module, node.attr, None)
        if kind is ast.List:
            return [self.value(e, depth + 1) for e in node.elts]
        if kind is ast.Tuple:
            return tuple([self.value(e, depth + 1) for e in node.elts])
        return _literal(node, depth)  # (anything else -- ``*args`` too -- is declined there)

    def module_of(self, node: ast.AST) -> str:
        _check(isinstance(node, ast.Name))
        bound = self.bound.get(node.id)
        _check(bound is not None and bound[0] == "module" and bound[1] != "typing")
        return bound[1]

    def reference(self, module: str, name: str, call: ast.Call | None):
        """``module.name`` (a type class), or its call."""
        spec = names.TYPES.get((module, name))
        if spec is not None:
            _check(call is not None or not spec.required)
            return _Type(spec, None, None) if call is None else self.type_call(spec, call)
        _check(module == names.SA and name in names.SCHEMA and call is not None and name != "func")
        return _SCHEMA[name](self, call)

    def call(self, node: ast.Call, depth: int):
        func = node.func
        if self.is_op(func) or (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                                and func.value.id == self.batch_name):  # op.f(), batch_op.f()
            _check(func.attr == "f" and len(node.args) == 1 and not node.keywords)
            name = self.value(node.args[0], depth + 1)
            _check(type(name) is str)
            return _Conv(name)
        if isinstance(func, ast.Attribute) and self.is_function_namespace(func.value):
            _check(func.attr in names.FUNCTIONS and not node.args and not node.keywords)
            return _Function(func.attr)
        if isinstance(func, ast.Name):
            bound = self.bound.get(func.id)
            _check(bound is not None and bound[0] == "sa")
            return self.reference(bound[1], bound[2], node)
        _check(isinstance(func, ast.Attribute))
        return self.reference(self.module_of(func.value), func.attr, node)

    def is_function_namespace(self, node: ast.AST) -> bool:
        """``sa.func`` or ``func`` (``from sqlalchemy import func``)."""
        if isinstance(node, ast.Name):
            return self.bound.get(node.id) == ("sa", names.SA, "func")
        return (isinstance(node, ast.Attribute) and node.attr == "func" and isinstance(node.value, ast.Name)
                and self.bound.get(node.value.id) == ("module", names.SA))

    def plain_arguments(self, call: ast.Call) -> tuple[list, dict]:
        _check(all(k.arg and k.arg != _UNBINDABLE for k in call.keywords))  # (``value`` declines ``*args``)
        keywords = {}
        for k in call.keywords:
            _check(k.arg not in keywords)
            keywords[k.arg] = self.value(k.value, 1)
        return [self.value(a, 1) for a in call.args], keywords

    def type_call(self, spec: names.TypeSpec, call: ast.Call) -> _Type:
        positional, keywords = self.plain_arguments(call)
        members = None
        if spec.members:
            members, positional = tuple(positional), []
            _check(all(type(v) is str for v in members) and len(set(members)) == len(members))
        _check(len(positional) <= len(spec.positional))
        arguments = dict(zip(spec.positional, positional))
        for name, value in keywords.items():
            _check(name in spec.keywords and name not in arguments)
            arguments[name] = value
        _check(all(name in arguments for name in spec.positional[:spec.required]))
        for name, value in arguments.items():
            kind = spec.keywords[name]
            _check(isinstance(value, _Type) if kind == names.TYPE else names.accepts(kind, value))
        return _Type(spec, arguments, members)

    # -- SQLAlchemy's schema constructors ----------------------------------------------------------------------
    def column(self, call: ast.Call) -> _Column:
        positional, keywords = self.plain_arguments(call)
        _check(len(positional) >= 2 and type(positional[0]) is str and isinstance(positional[1], _Type))
        items = positional[2:]
        _check(all(isinstance(item, (_ForeignKey, _Computed, _Identity)) for item in items))
        for name, value in keywords.items():
            _check(name in names.COLUMN_KEYWORDS)
            kind = names.COLUMN_KEYWORDS[name]
            if kind == "bool_or_none":
                _check(value is None or type(value) is bool)
            elif kind == "default":
                _check(value is None or type(value) is str or isinstance(value, (_Text, _Function)))
            elif kind == "autoincrement":
                _check(value in ("auto", "ignore_fk") or type(value) is bool)
            elif kind is None:
                _check(_is_literal(value))
            else:
                _check(names.accepts(kind, value))
        return _Column(positional[0], positional[1], items, keywords)

    def foreign_key(self, call: ast.Call) -> _ForeignKey:
        positional, keywords = self.plain_arguments(call)
        _check(len(positional) == 1 and type(positional[0]) is str and _FK_TARGET.match(positional[0]))
        for name, value in keywords.items():
            _check(name in names.FOREIGN_KEY_KEYWORDS and (value is None or type(value) is str)
                   or name in ("deferrable", "use_alter") and (value is None or type(value) is bool))
        return _ForeignKey(positional[0])

    def computed(self, call: ast.Call) -> _Computed:
        positional, keywords = self.plain_arguments(call)
        _check(len(positional) == 1 and (type(positional[0]) is str or isinstance(positional[0], _Text)))
        _check(set(keywords) <= {"persisted"} and keywords.get("persisted") in (None, True, False))
        return _Computed(keywords.get("persisted"))

    def identity(self, call: ast.Call) -> _Identity:
        positional, keywords = self.plain_arguments(call)
        _check(not positional)
        for name, value in keywords.items():
            kind = names.IDENTITY_KEYWORDS.get(name)
            _check(kind is not None and (value is None or type(value) is bool if kind == "bool_or_none"
                                         else names.accepts(kind, value)))
        return _Identity()

    def text(self, call: ast.Call) -> _Text:
        positional, keywords = self.plain_arguments(call)
        _check(len(positional) == 1 and not keywords and type(positional[0]) is str)
        return _Text(positional[0])


def _constraint_of(kind: str):
    """``sa.PrimaryKeyConstraint(*names)`` (``pk``), ``UniqueConstraint``, ``ForeignKeyConstraint(local, remote)``
    (``fk``), ``CheckConstraint(sql)``: the local columns it names (``create_table`` checks they exist)."""
    def build(script: _Script, call: ast.Call) -> _Constraint:
        positional, keywords = script.plain_arguments(call)
        for name, value in keywords.items():  # (a foreign key's options too: ondelete, onupdate, ...)
            _check(name == "name" or kind == "fk" and name in names.FOREIGN_KEY_KEYWORDS)
            _check(value is None or type(value) is str or name == "name" and isinstance(value, _Conv))
        if kind == "check":
            _check(len(positional) == 1 and (type(positional[0]) is str or isinstance(positional[0], _Text)))
            return _Constraint(kind, [])
        if kind == "fk":
            _check(len(positional) == 2 and all(isinstance(p, list) for p in positional))
            local, remote = positional
            _check(local and len(local) == len(remote) and all(type(c) is str for c in local)
                   and all(type(c) is str and _FK_TARGET.match(c) for c in remote))
            return _Constraint(kind, local)
        _check(positional and all(type(c) is str for c in positional))
        return _Constraint(kind, positional)

    return build


_SCHEMA = {
    "Column": _Script.column, "ForeignKey": _Script.foreign_key, "Computed": _Script.computed,
    "Identity": _Script.identity, "text": _Script.text,
    "PrimaryKeyConstraint": _constraint_of("pk"), "UniqueConstraint": _constraint_of("unique"),
    "ForeignKeyConstraint": _constraint_of("fk"), "CheckConstraint": _constraint_of("check"),
}


def _skipped(statement: ast.stmt) -> bool:
    return isinstance(statement, ast.Pass) or (isinstance(statement, ast.Expr)
                                               and isinstance(statement.value, ast.Constant))


def _line(call: ast.Call) -> int:
    """The line running the call records (the frame's line: where the called attribute is)."""
    func = call.func
    _check(func.lineno == func.end_lineno)
    return func.lineno


def _literal(node: ast.AST, depth: int):
    _check(depth < _MAX_DEPTH)
    kind = type(node)
    if kind is ast.Constant:
        _check(node.value is not Ellipsis)
        return node.value
    if kind is ast.UnaryOp and type(node.op) is ast.USub and type(node.operand) is ast.Constant:
        _check(type(node.operand.value) in (int, float))
        return -node.operand.value
    if kind is ast.List or kind is ast.Tuple:
        values = [_literal(e, depth + 1) for e in node.elts]
        return values if kind is ast.List else tuple(values)
    if kind is ast.Dict:
        _check(all(k is not None for k in node.keys))
        keys = [_literal(k, depth + 1) for k in node.keys]
        _check(all(type(k) in (str, int, bool, type(None)) for k in keys))
        return dict(zip(keys, (_literal(v, depth + 1) for v in node.values)))
    raise Decline


# -- the whole script ------------------------------------------------------------------------------------------------
def recordings(tree: ast.Module, source: str, filename: str, dialects: tuple[str, ...]) -> dict[str, list] | None:
    """``{dialect: [(operation, line)]}`` as ``engine`` records them (one list shared by every dialect when the
    source never mentions the dialect and its SQL reads alike for each), or None: the script is outside what this module reads."""
    from migrations_policy.lint.engine import DIALECT_DEPENDENT
    from migrations_policy.policy.sql import noting_divergence, reading_for

    try:
        script = _Script()
        upgrade = script.module(tree)
        results: dict[str, list] = {}
        dependent = len(dialects) > 1 and DIALECT_DEPENDENT.search(source) is not None
        with noting_divergence(*dialects) as diverged:
            for dialect in dialects:
                if results and not (dependent or diverged()):
                    results[dialect] = next(iter(results.values()))
                    continue
                rec = Recording(filename)
                with reading_for(dialect):
                    script.upgrade(upgrade, rec)
                results[dialect] = rec.ops
        return results
    except (Decline, RecursionError):
        return None


def _unread(tree: ast.Module) -> ast.Module:
    """*tree* without the body of ``upgrade()``: what the compiler must still see once ``recordings`` accepted it.

    Running a script compiles it whole, so what only the compiler refuses (``break`` outside a loop in
    ``downgrade()``, a misplaced ``from __future__`` import, ``__debug__ = 1``) makes it MP000.  The statements
    of ``upgrade()`` are read here and only in the forms ``_Script`` accepts -- calls of bound names with
    literal, keyword (never repeated, never ``__debug__``) and constructor arguments, one ``with`` whose target
    is never ``__debug__`` -- none of which the compiler refuses; the rest of the module (imports,
    assignments, every other function whole) is compiled as it is.  Compiling the tree from Python objects costs
    about what parsing does, nearly all of it in ``upgrade()``'s calls (issue 28: cold speed)."""
    body = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "upgrade":
            stub = ast.copy_location(ast.Pass(), node.body[0])
            node = ast.copy_location(ast.FunctionDef(node.name, node.args, [stub], node.decorator_list, node.returns,
                                                     node.type_comment), node)
        body.append(node)
    return ast.Module(body, tree.type_ignores)


def analyse(path: Path, phase: str, options) -> list | None:
    """The findings (``engine.Hit``s) of the script at *path*, as ``engine.analyse`` gives them, when it is plain
    enough to be read here; None otherwise (then it is run).  Never with a plugin (a custom operation runs the
    project's code) nor a scratch database (``--url``)."""
    if options.plugins.configured or options.plugins.found or options.url:
        return None
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_BYTES + 1)
        if len(data) > MAX_BYTES or b"\0" in data:
            return None
        source = data.decode("utf-8-sig")
        filename = str(path)
        tree = ast.parse(source, filename)
        results = recordings(tree, source, filename, options.dialects)
        if results is None:
            return None
        compile(_unread(tree), filename, "exec", dont_inherit=True)  # what only the compiler refuses (``break``)
        from migrations_policy.lint.engine import judged

        return judged(source, [], results, phase, options)
    except Exception:  # noqa: BLE001 - anything unexpected: the script is run instead, as before
        return None
