"""A data migration or prune that names a table of another schema (PostgreSQL) or database (MariaDB)
is refused when its module loads: one line naming it and the table, exit 2, nothing deleted or skipped.

The framework reads tables where the connection's default schema has them: whether a table exists
(``pending.absent``), which foreign keys point at a pruned table (``prune.as_migration``), the mark
triggers of a completion.  A table named with ``schema=`` was read there by its bare name: a prune of
``other.parents`` read the references of ``parents`` in the default schema (none), deleted every
prunable ``other.parents`` row and, ``ON DELETE CASCADE``, the live children referencing them; a data
migration of ``other.items`` was "inapplicable" (its table "does not exist"), so
``online_data_migrations`` skipped it with exit 0 and the global contract rule, which judges only
migrations whose tables exist, let a contract run past its pending rows.

Generated: which object (a prune, a set-based or function-form data migration), where the schema is
named (its own table, a table its condition or a value reads), how (``sa.table(..., schema=)``,
``sa.Table`` of a ``MetaData(schema=)``), whether the default schema holds a table of the same name,
the rows and which are prunable/pending; the command is ``prune`` or ``online_data_migrations``.  Must: exit 2, one ``dbsync: error:`` line naming the object and the
qualified table, no traceback, every row as it was.  Seeded: ``MP_SCHEMA_QUALIFIED_SEED``.
"""

from __future__ import annotations

import os
import random
import subprocess

import pytest
import sqlalchemy as sa

from migrations_policy.data import ledger

from ..data.support import dbsync_argv
from ..helpers import write_data_project

CASES = int(os.environ.get("MP_SCHEMA_QUALIFIED_CASES", "4"))


def _table_expr(name: str, columns: list[str], schema: str, spelling: str) -> str:
    if spelling == "table":
        cols = ", ".join(f'sa.column("{c}", sa.Integer)' for c in columns)
        return f'sa.table("{name}", {cols}, schema={schema!r})'
    cols = ", ".join(f'sa.Column("{c}", sa.Integer{", primary_key=True" if c == "id" else ""})' for c in columns)
    return f'sa.Table("{name}", sa.MetaData(schema={schema!r}), {cols})'


def _module(case: dict, other: str) -> str:
    """The project's data-migration module for *case*."""
    spelling = case["spelling"]
    if case["object"] == "prune":
        parents = _table_expr("parents", ["id", "deleted"], other, spelling)
        return (f"import sqlalchemy as sa\nfrom migrations_policy.data import Prune\n\n"
                f"parents = {parents}\n"
                "prune_parents = Prune('old_parents', table=parents, key='id', where=parents.c.deleted.is_not(None))\n")
    where = case["where"]
    items_schema = other if where == "own" else None
    items = _table_expr("items", ["id", "src", "dst"], items_schema, spelling) if items_schema else \
        'sa.table("items", sa.column("id", sa.Integer), sa.column("src", sa.Integer), sa.column("dst", sa.Integer))'
    lines = ["import sqlalchemy as sa", "from migrations_policy.data import DataMigration", "",
             f"items = {items}"]
    pending = "items.c.dst.is_(None)"
    value = "items.c.src"
    if where in ("condition", "value"):
        lines.append(f"seen = {_table_expr('seen', ['id', 'v'], other, spelling)}")
        if where == "condition":
            pending = "sa.and_(items.c.dst.is_(None), ~sa.exists().where(seen.c.id == items.c.id))"
        else:
            value = "sa.select(seen.c.v).where(seen.c.id == items.c.id).scalar_subquery()"
    if case["object"] == "function":
        lines.append("\ndef _copy(connection, batch):\n"
                     "    return connection.execute(sa.update(items).where(batch.where)"
                     ".values(dst=items.c.src)).rowcount\n")
        lines.append(f"copy_items = DataMigration('copy_items', table=items, key='id', pending={pending}, "
                     "migrate=_copy)")
    else:
        lines.append(f"copy_items = DataMigration('copy_items', table=items, key='id', pending={pending}, "
                     f"values={{'dst': {value}}})")
    return "\n".join(lines) + "\n"


def _draw(rng: random.Random) -> dict:
    obj = rng.choice(["prune", "prune", "values", "function"])
    return {"object": obj, "spelling": rng.choice(["table", "Table"]),
            # the function form's Python reads what it likes: only its table and pending= are declared
            "where": "own" if obj == "prune" else rng.choice(["own", "own", "condition"] + ["value"] * (obj == "values")),
            "twin": rng.random() < 0.5,  # the default schema has a table of the same name
            "command": "prune" if obj == "prune" else "online_data_migrations",
            "rows": rng.randint(5, 40), "seed": rng.randrange(1 << 30)}


def _build(engine: sa.Engine, admin: sa.Engine, case: dict, other: str, default: str | None) -> None:
    """The schema: the tables in *other* (and their twins in the default schema), with rows."""
    rng = random.Random(case["seed"])
    meta = sa.MetaData()
    n = case["rows"]
    with admin.begin() as conn:
        if engine.dialect.name == "postgresql":
            conn.execute(sa.schema.CreateSchema(other))
    if case["object"] == "prune":
        parents = sa.Table("parents", meta, sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
                           sa.Column("deleted", sa.Integer), schema=other)
        children = sa.Table("children", meta, sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
                            sa.Column("parent_id", sa.Integer, sa.ForeignKey(parents.c.id, ondelete="CASCADE")),
                            schema=other)
        tables = [(parents, [{"id": i, "deleted": rng.choice([1, None])} for i in range(1, n + 1)]),
                  (children, [{"id": i, "parent_id": rng.randint(1, n)} for i in range(1, n // 2 + 2)])]
        if case["twin"]:
            twin = sa.Table("parents", meta, sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
                            sa.Column("deleted", sa.Integer), schema=default)
            tables.append((twin, [{"id": i, "deleted": 1} for i in range(1, 4)]))
    else:
        own = other if case["where"] == "own" else default
        items = sa.Table("items", meta, sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
                         sa.Column("src", sa.Integer), sa.Column("dst", sa.Integer), schema=own)
        tables = [(items, [{"id": i, "src": i * 10, "dst": None} for i in range(1, n + 1)])]
        if case["where"] != "own":
            seen = sa.Table("seen", meta, sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
                            sa.Column("v", sa.Integer), schema=other)
            tables.append((seen, [{"id": i, "v": i} for i in range(1, n + 1) if rng.random() < 0.3]))
        elif case["twin"]:
            twin = sa.Table("items", meta, sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
                            sa.Column("src", sa.Integer), sa.Column("dst", sa.Integer), schema=default)
            tables.append((twin, [{"id": 1, "src": 1, "dst": 1}]))
    meta.create_all(engine)
    ledger.metadata.create_all(engine)
    with engine.begin() as conn:
        for table, rows in tables:
            if rows:
                conn.execute(sa.insert(table), rows)


def _everything(engine: sa.Engine, other: str, default: str | None) -> dict:
    """Every row of every table in both schemas."""
    found = {}
    inspector = sa.inspect(engine)
    with engine.connect() as conn:
        for schema in (other, default):
            for name in inspector.get_table_names(schema=schema):
                if name.startswith("migrations_policy_"):
                    continue
                table = sa.Table(name, sa.MetaData(), autoload_with=conn, schema=schema)
                found[(schema, name)] = sorted(tuple(r) for r in conn.execute(sa.select(table)))
    return found


@pytest.mark.parametrize("backend", ["postgresql", "mysql"], indirect=True)
def test_a_table_of_another_schema_is_refused_by_name_and_nothing_is_touched(tmp_path, backend, server_for):
    server = server_for(backend)
    seed = int(os.environ.get("MP_SCHEMA_QUALIFIED_SEED") or random.randrange(1 << 30))
    print(f"MP_SCHEMA_QUALIFIED_SEED={seed}")
    rng = random.Random(seed)
    failures = []
    for number in range(CASES):
        case = _draw(rng)
        url = server.create_database()
        extra = server.create_database() if backend == "mysql" else None
        other = extra.database if extra is not None else f"other_{rng.randrange(10**6)}"
        default = None
        engine, admin = sa.create_engine(url), sa.create_engine(url)
        try:
            _build(engine, admin, case, other, default)
            before = _everything(engine, other, default)
            (tmp_path / f"case{number}").mkdir()
            project = write_data_project(tmp_path / f"case{number}", "schema_app", _module(case, other))
            done = subprocess.run(dbsync_argv(project, url, case["command"]), capture_output=True, text=True,
                                  env={**os.environ, "PYTHONPATH": str(project)}, timeout=300)
            problems = []
            if _everything(engine, other, default) != before:
                problems.append("ROWS CHANGED")
            if done.returncode != 2:
                problems.append(f"exit {done.returncode}")
            if "Traceback" in done.stderr:
                problems.append("traceback")
            errors = [line for line in done.stderr.splitlines() if line.startswith("dbsync: error:")]
            name = "old_parents" if case["object"] == "prune" else "copy_items"
            if len(errors) != 1 or name not in errors[0] or f"{other}." not in errors[0]:
                problems.append(f"not one line naming {name} and {other}.<table>")
            if problems:
                failures.append(f"case {number} {case}: {', '.join(problems)}: "
                                f"{(done.stderr or done.stdout).strip()[-400:]}")
        finally:
            engine.dispose()
            admin.dispose()
            server.drop_database(url)
            if extra is not None:
                server.drop_database(extra)
    assert not failures, f"MP_SCHEMA_QUALIFIED_SEED={seed}:\n" + "\n".join(failures)
