"""The static check: can this release's code run on the schema as it is now?

For every table a release's models map: the table exists, and every mapped
column exists with a compatible type (same family; strings, integers and
decimals no narrower than the code writes) and nullability (a column the code
may leave NULL is not NOT NULL).  Columns the code does not know must not be
NOT NULL without a default, or every INSERT of that code fails.

The rehearsal runs this on the release-N schema first: what is already wrong
there (models and migrations drifted apart) is a note, and only what the
upgrade *changed* is a problem.
"""

from __future__ import annotations

import datetime as dt
import decimal
import uuid

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from migrations_policy.rehearsal.models import Models

_FAMILIES = {str: "string", int: "integer", float: "number", decimal.Decimal: "number", bool: "boolean",
             dt.datetime: "datetime", dt.date: "date", dt.time: "time", dt.timedelta: "interval",
             bytes: "binary", dict: "json", list: "json", uuid.UUID: "uuid"}
# What each backend reflects some types as: (family in the model, family reflected).
_EQUIVALENT = {("boolean", "integer"), ("json", "string"), ("uuid", "string"), ("uuid", "binary"),
               ("datetime", "string"), ("date", "string"), ("time", "string"), ("interval", "datetime")}


def _family(column_type: sa.types.TypeEngine) -> str | None:
    try:
        return _FAMILIES.get(column_type.python_type)
    except (NotImplementedError, AttributeError):
        return None


def _integer_rank(column_type: sa.types.TypeEngine) -> int:
    name = type(column_type).__name__.upper()
    if "TINY" in name:
        return 0
    if isinstance(column_type, sa.SmallInteger) or "SMALL" in name:
        return 1
    if "MEDIUM" in name:
        return 2
    if isinstance(column_type, sa.BigInteger) or "BIG" in name:
        return 4
    return 3


def type_problem(model: sa.types.TypeEngine, database: sa.types.TypeEngine) -> str | None:
    """Why a column of type *database* cannot hold what code mapping it as *model* writes (None: it can)."""
    mine, theirs = _family(model), _family(database)
    if mine is None or theirs is None:
        return None  # a type we cannot judge: say nothing rather than guess
    if mine != theirs and (mine, theirs) not in _EQUIVALENT:
        return f"the database column is {database} ({theirs}), this code maps {model} ({mine})"
    if mine == "string" and theirs == "string":
        limit, wanted = getattr(database, "length", None), getattr(model, "length", None)
        if limit is not None and (wanted is None or wanted > limit):
            return f"the database column holds at most {limit} characters, this code writes up to {wanted or 'any'}"
    if mine == theirs == "integer" and _integer_rank(database) < _integer_rank(model):
        return f"the database column is {database}, narrower than this code's {model}"
    if isinstance(model, sa.Numeric) and isinstance(database, sa.Numeric) and not isinstance(database, sa.Float):
        if (database.scale or 0) < (model.scale or 0):
            return f"the database column is {database}, fewer decimals than this code's {model}"
    if isinstance(model, sa.Enum) and isinstance(database, sa.Enum):
        missing = sorted(set(model.enums) - set(database.enums))
        if missing:
            return f"the database enum lacks {', '.join(missing)}"
    return None


def schema_problems(connection: Connection, models: Models) -> list[str]:
    """What keeps *models*' code from running on *connection*'s schema, one line each."""
    inspector = sa.inspect(connection)
    problems = []
    for table in models.tables:
        where = f"{models.label}: {table.fullname}"
        if not inspector.has_table(table.name, schema=table.schema):
            problems.append(f"{where}: table does not exist")
            continue
        reflected = {c["name"].lower(): c for c in inspector.get_columns(table.name, schema=table.schema)}
        for column in table.columns:
            found = reflected.get(column.name.lower())
            if found is None:
                problems.append(f"{where}.{column.name}: column does not exist")
                continue
            problem = type_problem(column.type, found["type"])
            if problem:
                problems.append(f"{where}.{column.name}: {problem}")
            if column.nullable and not column.primary_key and not found["nullable"]:
                problems.append(f"{where}.{column.name}: NOT NULL in the database, this code may write NULL")
        known = {c.name.lower() for c in table.columns}
        for name, found in reflected.items():
            if name not in known and not found["nullable"] and found.get("default") is None \
                    and not found.get("autoincrement") and not found.get("computed"):
                problems.append(f"{where}.{found['name']}: NOT NULL without a default and unknown to this "
                                "code: its INSERTs fail")
    if connection.in_transaction():
        connection.rollback()
    return problems
