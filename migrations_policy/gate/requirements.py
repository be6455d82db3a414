"""What a revision requires, read before it runs: the data migrations it declares
(``requires_data_migrations = (...)`` and the arguments of every ``op.require_data_migrations(...)``
call, evaluated in its module's namespace), what its ``upgrade()`` names when run offline (for a
stamp), whether the gate judges it at all (``is_gated``), and whether its branch, directory and
content agree (``phase_defect``).  The verdict (``verdict.evaluate``) asks these.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any, Iterable

from alembic.script import Script

from migrations_policy.core.offline_run import first_line
from migrations_policy.core.revisions import CONTRACT, phase_of
from migrations_policy.policy.phases import revision_phase_disagreement


@dataclass(frozen=True)
class Requirements:
    """The data migrations a revision declares, as far as they can be known before it runs."""

    names: tuple[str, ...] = ()
    #: Declarations whose value cannot be known before the revision runs: "path:line: why".
    unresolved: tuple[str, ...] = ()

    @property
    def declared(self) -> bool:
        return bool(self.names or self.unresolved)


_REQUIRE_OP = "require_data_migrations"


def _names_from(value: Any) -> list[str] | None:
    """*value* as data-migration names, or None when it is not a name or a collection of names."""
    if isinstance(value, str):
        return [value] if value else None
    if isinstance(value, (list, tuple, set, frozenset)) and all(isinstance(v, str) and v for v in value):
        return sorted(value) if isinstance(value, (set, frozenset)) else list(value)
    return None


def _is_require_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return (isinstance(func, ast.Attribute) and func.attr == _REQUIRE_OP) or \
        (isinstance(func, ast.Name) and func.id == _REQUIRE_OP)


def _evaluate_argument(node: ast.expr, namespace: dict[str, Any], where: str) -> tuple[list[str], str | None]:
    """The names one argument of ``op.require_data_migrations(...)`` stands for."""
    starred = isinstance(node, ast.Starred)
    expression = node.value if starred else node
    if isinstance(expression, ast.Constant) and not starred:
        names = _names_from(expression.value)
        return (names, None) if names else ([], f"{where}: {ast.unparse(node)} is not a data migration name")
    try:
        value = eval(compile(ast.Expression(expression), where, "eval"), dict(namespace))  # noqa: S307
    except Exception as exc:  # the project's own expression: anything can go wrong
        return [], (f"{where}: op.{_REQUIRE_OP}({ast.unparse(node)}) cannot be evaluated before the revision "
                    f"runs ({type(exc).__name__}: {first_line(exc)}); use literals or a module-level "
                    "constant, or declare requires_data_migrations = (...)")
    if starred:
        iterable = isinstance(value, Iterable) and not isinstance(value, (str, bytes))
        names = _names_from(tuple(value)) if iterable else None
    else:
        names = _names_from(value) if isinstance(value, str) else None
    if names is None:
        return [], f"{where}: op.{_REQUIRE_OP}({ast.unparse(node)}) is {value!r:.60}, not data migration names"
    return names, None


def requirements_of(rev: Script) -> Requirements:
    """Data migrations *rev* declares: its ``requires_data_migrations`` attribute plus the
    arguments of every ``op.require_data_migrations(...)`` call in its source, each
    evaluated in the module's namespace (literals, module constants, imported names and
    expressions over them).  What cannot be evaluated there is *unresolved*, never ignored."""
    names: list[str] = []
    unresolved: list[str] = []
    path = rev.path
    module = rev.module
    if hasattr(module, "requires_data_migrations"):
        declared = module.requires_data_migrations
        if declared is not None and declared != ():
            found = _names_from(declared)
            if found is None:
                unresolved.append(f"{path}: requires_data_migrations = {declared!r:.60} is not a name or a "
                                  "tuple of data migration names")
            else:
                names.extend(found)
    try:
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read(), path)
    except (OSError, SyntaxError, ValueError) as exc:
        # alembic imported the module, so its source should parse: fail closed if it does not.
        return Requirements(tuple(dict.fromkeys(names)),
                            tuple(unresolved) + (f"{path}: source cannot be read to find its requirements "
                                                 f"({first_line(exc)})",))
    namespace = vars(module)
    for node in ast.walk(tree):
        if not _is_require_call(node):
            continue
        where = f"{path}:{node.lineno}"
        if node.keywords:
            unresolved.append(f"{where}: op.{_REQUIRE_OP}() takes data migration names only, not keywords")
        if not node.args:
            unresolved.append(f"{where}: op.{_REQUIRE_OP}() names no data migration")
        for arg in node.args:
            found, problem = _evaluate_argument(arg, namespace, where)
            names.extend(found)
            if problem:
                unresolved.append(problem)
    return Requirements(tuple(dict.fromkeys(names)), tuple(unresolved))


def is_gated(rev: Script, requirements: Requirements | None = None) -> bool:
    """A revision the gate judges: on the contract branch, or declaring required data migrations."""
    requirements = requirements if requirements is not None else requirements_of(rev)
    return phase_of(rev) == CONTRACT or requirements.declared


def requirements_when_run(rev: Script, dialect_name: str) -> tuple[tuple[str, ...], str | None]:
    """Run *rev*'s ``upgrade()`` offline (nothing reaches the database) and return the data
    migrations its ``op.require_data_migrations`` calls named, however they were called, with
    why it could not run to the end (None when it could).

    A stamp records a revision without running it, so the runtime check of the operation
    never happens: this is how a stamp sees calls the source scan cannot (an aliased op)."""
    from migrations_policy.core.offline_run import record_operations
    from migrations_policy.gate.requirement_op import RequireDataMigrationsOp

    operations, problem = record_operations(rev.module.upgrade, dialect_name)
    names = [n for o in operations if isinstance(o, RequireDataMigrationsOp) for n in o.names]
    return tuple(dict.fromkeys(names)), problem


def phase_defect(rev: Script, requirements: Requirements) -> str | None:
    """Why *rev*'s branch, directory and content disagree, as one line naming its file, or None."""
    why = revision_phase_disagreement(phase_of(rev), rev.path, requirements.declared)
    return f"{rev.path}: revision {rev.revision}: {why}" if why else None
