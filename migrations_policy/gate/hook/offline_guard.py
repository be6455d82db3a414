"""Offline (``--sql``) SQL that checks the contract gate for itself when it is run.

``alembic upgrade --sql`` cannot see the database, so the gate cannot judge the
run.  Instead of trusting whoever applies the SQL, it starts with one statement per
required data migration that fails when the migration still has a pending row
(or is not declared at all), before any of the revision's DDL:

* PostgreSQL: a ``DO`` block that raises an exception naming the migration;
* MySQL / MariaDB: a scalar subquery that returns two rows only when a pending row
  exists (error 1242, "Subquery returns more than 1 row"; the comment above it says why);
* SQLite: ``abs()`` of the smallest integer only when a pending row exists ("integer
  overflow"; likewise explained by the comment above it).

The probe is the migration's own pending predicate compiled by SQLAlchemy for the
target dialect, with values rendered as literals; the surrounding statement is a
fixed template.  Other dialects get the comments only.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

MARKER = "-- migrations_policy gate:"
_PG_TAG = "$migrations_policy_gate$"


def _literal(dialect: Any, value: str) -> str:
    return str(sa.literal(value, sa.String()).compile(dialect=dialect, compile_kwargs={"literal_binds": True}))


def _compiled(dialect: Any, statement: Any) -> str:
    return str(statement.compile(dialect=dialect, compile_kwargs={"literal_binds": True}))


def guard_statement(dialect: Any, migration: Any, message: str) -> str | None:
    """One statement that fails, when run on *dialect*, iff *migration* has a pending row
    (always, when *migration* is None: not declared).  None for a dialect we cannot guard."""
    if migration is None:
        exists = sa.literal(True)
    else:
        exists = sa.exists(sa.select(sa.literal(1)).select_from(migration.table).where(migration.pending))
    name = dialect.name
    if name == "postgresql":
        condition = _compiled(dialect, exists)
        body = (f"BEGIN IF {condition} THEN RAISE EXCEPTION USING MESSAGE = {_literal(dialect, message)}; END IF; END")
        if _PG_TAG in body:
            return None
        return f"DO {_PG_TAG} {body} {_PG_TAG};"
    if name == "mysql":
        two_rows = sa.union_all(sa.select(sa.literal(message)), sa.select(sa.literal(message))).scalar_subquery()
        return _compiled(dialect, sa.select(two_rows.label("migrations_policy_gate")).where(exists)) + ";"
    if name == "sqlite":
        overflow = sa.func.abs(sa.literal_column("-9223372036854775807") - 1)
        return _compiled(dialect, sa.select(overflow.label("migrations_policy_gate")).where(exists)) + ";"
    return None


def guard_lines(dialect: Any, required: dict[str, list[str]], registry: Any) -> list[str]:
    """Comment + statement per required migration, for the top of the offline SQL."""
    lines = [f"{MARKER} apply this SQL so that it stops at the first error (psql -v ON_ERROR_STOP=1; the "
             "mysql client stops by default; sqlite3 -bail): the statements below fail while the data migrations "
             "a contract revision needs are incomplete"]
    for name, revisions in required.items():
        migration = registry[name] if name in registry else None
        state = "is not declared" if migration is None else "still has rows to migrate"
        message = (f"migrations_policy: contract refused: data migration {name} (required by "
                   f"{', '.join(revisions)}) {state}; run dbsync online_data_migrations until it exits 0")
        statement = guard_statement(dialect, migration, message)
        if statement is None:
            lines.append(f"-- migrations_policy: revision(s) {', '.join(revisions)} require data migration "
                         f"{name} to be complete. NOT CHECKED: no guard statement for this dialect.")
            continue
        lines.append(f"{MARKER} the next statement fails if data migration {name} (required by "
                     f"{', '.join(revisions)}) {state}")
        lines.append(statement)
    return lines
