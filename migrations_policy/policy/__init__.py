"""The knowledge base: what each operation does to a live database, per dialect.

Every feature that needs to know whether an operation is safe during a rolling
upgrade asks here: the linter (``migrations_policy.lint``) reports from it, and
the autogenerate split can sort operations into expand / contract with it.

API
---
``Operation`` (``policy.model``)
    One normalized change: ``kind`` (``add_column``, ``drop_column``,
    ``alter_type``, ``create_index``, ``add_fk``, ``update``, ... see the
    ``model`` constants), ``table``, ``column``, ``name`` and flags
    (``nullable``, ``server_default`` / ``default_kind``, ``python_default``,
    ``generated``, ``unique``, ``concurrently``, ``not_valid``, ``using_index``,
    ``fulltext``, ``new_table`` (created in the same script), ``in_batch``,
    ``autocommit``, ``fk_checks_off``).

``from_alembic(op_object) -> list[Operation]`` (``policy.alembic_ops``)
    Normalize an alembic ``MigrateOperation`` (``AddColumnOp``, ``AlterColumnOp``,
    ``ModifyTableOps``, ``ExecuteSQLOp`` ...).  One alembic op may yield several
    operations (``alter_column(type_=..., nullable=False)``, a column with an
    inline ``ForeignKey``).

``from_sql(text) -> list[Operation]`` (``policy.sql``)
    Classify SQL text (several statements allowed) with sqlparse's lexer;
    comments and string literals never match.

``classify(op, dialect, context=Context()) -> Verdict``
    ``Verdict.phase`` is where the operation belongs (``EXPAND``, ``CONTRACT``,
    ``DATA`` = an online data migration, ``ANY``, or ``MULTI_STEP`` = needs
    expand + data migration + contract); ``Verdict.effect`` says what it locks,
    whether it rewrites, scans, fails or leaves rows unvalidated on *dialect*;
    ``Verdict.alternative`` is the safe way to the same end;
    ``Verdict.allowed_in(phase)`` is the one-line answer for the autogenerate split.

``Context(postgresql_version=15)`` carries server facts that change answers
(before PostgreSQL 11 every ``ADD COLUMN ... DEFAULT`` rewrites the table).

This package imports nothing of migrations_policy; SQLAlchemy / alembic /
sqlparse are imported only by the modules that read their objects.
"""

from __future__ import annotations

from migrations_policy.policy import mysql, postgresql, sqlite
from migrations_policy.policy.model import (ANY,
    CONTRACT,
    DATA,
    EXPAND,
    MULTI_STEP,
    Context,
    Effect,
    Operation,
    Verdict)
from migrations_policy.policy.phases import alternative as _generic_alternative
from migrations_policy.policy.phases import phase_of

DIALECTS = {module.DIALECT: module for module in (postgresql, mysql, sqlite)}


def classify(op: Operation, dialect: str, context: Context | None = None) -> Verdict:
    """The verdict for *op* on *dialect* (``postgresql``, ``mysql`` or ``sqlite``)."""
    try:
        module = DIALECTS[dialect]
    except KeyError:
        raise ValueError(f"unknown dialect {dialect!r} (known: {', '.join(DIALECTS)})") from None
    effect, alternative = module.effect(op, context or Context())
    return Verdict(
        operation=op,
        dialect=dialect,
        phase=phase_of(op),
        effect=effect,
        alternative=alternative or _generic_alternative(op),
    )


def from_alembic(op_object) -> list[Operation]:
    """Normalize an alembic op object (imports alembic lazily)."""
    from migrations_policy.policy.alembic_ops import from_alembic as convert

    return convert(op_object)


def from_sql(text: str) -> list[Operation]:
    """Classify SQL text (imports sqlparse lazily)."""
    from migrations_policy.policy.sql import from_sql as convert

    return convert(text)


__all__ = [
    "Operation", "Verdict", "Effect", "Context", "classify", "from_alembic", "from_sql", "phase_of",
    "EXPAND", "CONTRACT", "DATA", "ANY", "MULTI_STEP", "DIALECTS",
]
