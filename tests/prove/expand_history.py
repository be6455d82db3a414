"""Seeded random histories of expand revisions, for the kill tests of upgrade and rollback.

A history is a chain of expand revisions after release 1 (``tests/gate/expand_project.py``:
``books``, ``loans`` and the extra tables ``t1``..``t3``), each of a few operations of the
kinds the knowledge base puts in expand on that dialect (``policy/phases.py``): add a
nullable column or one with a constant server default, create an index (PostgreSQL:
concurrently, in an autocommit block), create a table (with a foreign key to ``books``),
widen a varchar, a sync trigger next to a new column, and on PostgreSQL a NOT VALID
foreign key or CHECK.  Every revision has the ``downgrade()`` that undoes it, newest
operation first.

Each SQL statement a revision's ``upgrade()`` / ``downgrade()`` runs is paired with the schema
object it creates or removes (``None`` when the statement changes nothing that can be seen,
such as MariaDB's ``DROP TRIGGER IF EXISTS`` before a sync trigger is created), so a test can
say from the catalog alone which statements of an interrupted revision are applied.
"""

from __future__ import annotations

import random
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import sqlalchemy as sa

from migrations_policy.core.framework_tables import is_framework_table
from migrations_policy.data.remaining.completion import MARK_FUNCTION, TRIGGER_PREFIX
from migrations_policy.window.sync_triggers import sync_trigger_name

BASE_TABLES = ("t1", "t2", "t3")
#: Columns of release 1 an index may cover (and the app writes).
BASE_COLUMNS = {"books": ["title"], "loans": ["book_id", "who"], **{t: ["v"] for t in BASE_TABLES}}
WHO_LENGTH = 40  # loans.who at release 1

REVISION = '''
from alembic import op
import sqlalchemy as sa

import migrations_policy.sync_triggers  # noqa: F401 - registers op.create_sync_trigger

revision = "{revision}"
down_revision = "{down_revision}"
branch_labels = None
depends_on = None


def upgrade():
{upgrade}


def downgrade():
{downgrade}
'''


@dataclass
class Operation:
    """One ``op`` call of an upgrade() and its inverse, with the objects their statements touch."""

    upgrade: str
    downgrade: str
    #: Per SQL statement of upgrade(): the object it creates (None: nothing visible).
    created: list[tuple | None]
    #: Per SQL statement of downgrade(): the object it removes.
    removed: list[tuple | None]


@dataclass
class Revision:
    revision: str
    down_revision: str
    operations: list[Operation] = field(default_factory=list)

    def source(self) -> str:
        def body(lines: list[str]) -> str:
            return textwrap.indent("\n".join(lines) or "pass", "    ")

        return REVISION.format(revision=self.revision, down_revision=self.down_revision,
                               upgrade=body([o.upgrade for o in self.operations]),
                               downgrade=body([o.downgrade for o in reversed(self.operations)]))

    def statements(self, direction: int) -> list[tuple | None]:
        """The object of each SQL statement, in the order upgrade() (1) or downgrade() (-1) runs them."""
        if direction > 0:
            return [obj for o in self.operations for obj in o.created]
        return [obj for o in reversed(self.operations) for obj in o.removed]

    def objects(self) -> list[tuple]:
        return [obj for o in self.operations for obj in o.created if obj is not None]


def _autocommit(line: str) -> str:
    return "with op.get_context().autocommit_block():\n    " + line


class _Generator:
    def __init__(self, rng: random.Random, dialect: str):
        self.rng, self.dialect, self.n = rng, dialect, 0
        self.columns = {t: list(c) for t, c in BASE_COLUMNS.items()}
        self.who_length = WHO_LENGTH

    def name(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def add_column(self) -> Operation:
        table, column = self.rng.choice(sorted(self.columns)), self.name("c")
        if self.rng.random() < 0.5:
            spec = f'sa.Column("{column}", sa.Integer)'
        else:
            spec = f'sa.Column("{column}", sa.Integer, nullable=False, server_default="7")'
        self.columns[table].append(column)
        return Operation(f'op.add_column("{table}", {spec})', f'op.drop_column("{table}", "{column}")',
                         [("column", table, column)], [("column", table, column)])

    def create_index(self) -> Operation:
        table = self.rng.choice(sorted(self.columns))
        column, index = self.rng.choice(self.columns[table]), self.name("ix_")
        create = f'op.create_index("{index}", "{table}", ["{column}"])'
        drop = f'op.drop_index("{index}", table_name="{table}")'
        if self.dialect == "postgresql":
            create = _autocommit(create[:-1] + ", postgresql_concurrently=True)")
            drop = _autocommit(drop[:-1] + ", postgresql_concurrently=True)")
        return Operation(create, drop, [("index", table, index)], [("index", table, index)])

    def create_table(self) -> Operation:
        table = self.name("n")
        create = (f'op.create_table("{table}", sa.Column("id", sa.Integer, primary_key=True), '
                  f'sa.Column("book_id", sa.Integer, sa.ForeignKey("books.id")), sa.Column("w", sa.String(30)))')
        return Operation(create, f'op.drop_table("{table}")', [("table", table)], [("table", table)])

    def widen(self) -> Operation | None:
        if self.dialect == "sqlite":  # SQLite has no ALTER COLUMN (and no varchar length to widen)
            return None
        old, new = self.who_length, self.who_length + self.rng.randint(1, 20)
        self.who_length = new

        def alter(to: int, existing: int) -> str:
            return (f'op.alter_column("loans", "who", type_=sa.String({to}), existing_type=sa.String({existing}), '
                    'existing_nullable=True)')

        return Operation(alter(new, old), alter(old, new), [("length", "loans", "who", new)],
                         [("length", "loans", "who", new)])

    def sync_trigger(self) -> list[Operation]:
        column = self.name("s")
        add = Operation(f'op.add_column("books", sa.Column("{column}", sa.String(80)))',
                        f'op.drop_column("books", "{column}")',
                        [("column", "books", column)], [("column", "books", column)])
        base = sync_trigger_name("books", "title", column)
        if self.dialect == "postgresql":
            created = [("function", base), ("trigger", base)]
            removed = [("trigger", base), ("function", base)]
        elif self.dialect == "sqlite":
            created = removed = [("trigger", base + s) for s in ("_ai_up", "_ai_down", "_au_up", "_au_down")]
        else:  # each CREATE TRIGGER is preceded by a DROP TRIGGER IF EXISTS
            created = [None, ("trigger", base + "_bi"), None, ("trigger", base + "_bu")]
            removed = [("trigger", base + "_bi"), ("trigger", base + "_bu")]
        self.columns["books"].append(column)
        trigger = Operation(f'op.create_sync_trigger("books", old="title", new="{column}")',
                            f'op.drop_sync_trigger("books", old="title", new="{column}")', created, removed)
        return [add, trigger]

    def not_valid_constraint(self) -> Operation | None:
        if self.dialect != "postgresql":  # MariaDB and SQLite check existing rows while they lock
            return None
        name = self.name("nv_")
        if self.rng.random() < 0.5:
            create = (f'op.create_foreign_key("{name}", "loans", "books", ["book_id"], ["id"], '
                      'postgresql_not_valid=True)')
            drop = f'op.drop_constraint("{name}", "loans", type_="foreignkey")'
            table = "loans"
        else:
            table = self.rng.choice(BASE_TABLES)
            create = f'op.create_check_constraint("{name}", "{table}", "v > -1000000", postgresql_not_valid=True)'
            drop = f'op.drop_constraint("{name}", "{table}", type_="check")'
        return Operation(create, drop, [("constraint", table, name)], [("constraint", table, name)])

    def operations(self) -> list[Operation]:
        kind = self.rng.choice(["add_column", "add_column", "create_index", "create_index", "create_table",
                                "widen", "sync_trigger", "not_valid_constraint"])
        made = getattr(self, kind)()
        if made is None:
            return self.operations()
        return made if isinstance(made, list) else [made]


def generate(rng: random.Random, dialect: str, count: int, first: str = "r2_expand",
             after: str = "r1_release1") -> list[Revision]:
    """*count* revisions chained after *after*; the first is named *first* (ExpandProject's r2)."""
    gen = _Generator(rng, dialect)
    revisions, down = [], after
    for i in range(count):
        rev, size = Revision(first if i == 0 else f"g{i + 2}", down), rng.randint(2, 4)
        while len(rev.operations) < size:
            rev.operations.extend(gen.operations())
        revisions.append(rev)
        down = rev.revision
    return revisions


CONTRACT = '''
from alembic import op

import migrations_policy.sync_triggers  # noqa: F401 - registers op.drop_sync_trigger

revision = "c_release2"
down_revision = "contract_root"
branch_labels = None
depends_on = "{head}"


def upgrade():
{upgrade}


def downgrade():
{downgrade}
'''


def contract_source(revisions: list[Revision]) -> str:
    """The release's contract: it removes the sync triggers the expand revisions installed."""
    pairs = [o.upgrade.split("(", 1)[1] for r in revisions for o in r.operations
             if o.upgrade.startswith("op.create_sync_trigger(")]
    return CONTRACT.format(head=revisions[-1].revision,
                           upgrade=textwrap.indent("\n".join(f"op.drop_sync_trigger({p}" for p in pairs) or "pass",
                                                   "    "),
                           downgrade=textwrap.indent("\n".join(f"op.create_sync_trigger({p}" for p in pairs)
                                                     or "pass", "    "))


def write(versions: Path, revisions: list[Revision]) -> None:
    """Each revision as a file in *versions*/expand, and the contract in *versions*/contract."""
    (versions / "contract" / "0001_c_release2.py").write_text(contract_source(revisions))
    versions = versions / "expand"
    for n, rev in enumerate(revisions, start=2):
        path = versions / f"{n:04d}_{rev.revision}.py"
        if n == 2:
            path = versions / "0002_r2.py"
        path.write_text(rev.source())
    for cached in versions.glob("__pycache__/*"):
        cached.unlink()


# -- the catalog -----------------------------------------------------------------------------
def _triggers(conn: sa.Connection) -> set[str]:
    dialect = conn.dialect.name
    if dialect == "postgresql":
        query = "SELECT tgname FROM pg_trigger WHERE NOT tgisinternal"
    elif dialect == "sqlite":
        query = "SELECT name FROM sqlite_master WHERE type = 'trigger'"
    else:
        query = "SELECT trigger_name FROM information_schema.triggers WHERE trigger_schema = DATABASE()"
    # the framework's completion marks (data/remaining/completion.py), like its tables, are not the project's
    return {r[0] for r in conn.execute(sa.text(query)) if not r[0].startswith(TRIGGER_PREFIX)}


def _functions(conn: sa.Connection) -> set[str]:
    if conn.dialect.name != "postgresql":
        return set()
    return {r[0] for r in conn.execute(sa.text(
        "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
        "WHERE n.nspname = current_schema()")) if r[0] != MARK_FUNCTION}


def _invalid_indexes(conn: sa.Connection) -> set[str]:
    if conn.dialect.name != "postgresql":
        return set()
    return {r[0] for r in conn.execute(sa.text(
        "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE NOT i.indisvalid"))}


def schema(engine: sa.Engine) -> dict:
    """The project's schema as the catalog has it: tables, columns (type, nullability, default),
    indexes (and PostgreSQL's INVALID ones), foreign keys, unique and check constraints, triggers,
    and PostgreSQL functions.  Framework tables and alembic's version table are left out."""
    with engine.connect() as conn:
        inspector = sa.inspect(conn)
        tables = {}
        for table in sorted(inspector.get_table_names()):
            if is_framework_table(table) or table == "alembic_version":
                continue
            tables[table] = {
                "columns": [(c["name"], str(c["type"]), c["nullable"], str(c.get("default")))
                            for c in inspector.get_columns(table)],
                "indexes": sorted((i["name"], tuple(i["column_names"]), bool(i["unique"]))
                                  for i in inspector.get_indexes(table)),
                "foreign_keys": sorted((fk["name"] or "", tuple(fk["constrained_columns"]), fk["referred_table"],
                                        tuple(fk["referred_columns"])) for fk in inspector.get_foreign_keys(table)),
                "unique": sorted((u["name"] or "", tuple(u["column_names"]))
                                 for u in inspector.get_unique_constraints(table)),
                "checks": sorted((c["name"] or "", c["sqltext"]) for c in inspector.get_check_constraints(table)),
            }
        return {"tables": tables, "triggers": sorted(_triggers(conn)), "functions": sorted(_functions(conn)),
                "invalid_indexes": sorted(_invalid_indexes(conn))}


def present(snapshot: dict, obj: tuple) -> bool:
    """Whether *obj* (an entry of ``Operation.created``) is in *snapshot*."""
    kind, *rest = obj
    tables = snapshot["tables"]
    if kind == "table":
        return rest[0] in tables
    if kind == "column":
        return rest[0] in tables and rest[1] in [c[0] for c in tables[rest[0]]["columns"]]
    if kind == "index":  # an INVALID one (a concurrent build or drop that stopped) counts as absent
        return rest[0] in tables and rest[1] in [i[0] for i in tables[rest[0]]["indexes"]] \
            and rest[1] not in snapshot["invalid_indexes"]
    if kind == "constraint":
        entry = tables.get(rest[0], {})
        return rest[1] in [c[0] for c in entry.get("foreign_keys", []) + entry.get("checks", [])]
    if kind == "length":  # widened to at least this length
        (column,) = [c for c in tables[rest[0]]["columns"] if c[0] == rest[1]]
        return int(re.search(r"\((\d+)\)", column[1]).group(1)) >= rest[2]
    if kind == "trigger":
        return rest[0] in snapshot["triggers"]
    if kind == "function":
        return rest[0] in snapshot["functions"]
    raise AssertionError(obj)


def tables_of(obj: tuple | None) -> set[str]:
    """The tables a statement on *obj* locks (a trigger, or MariaDB's DROP TRIGGER IF EXISTS: books)."""
    if obj is None or obj[0] in ("trigger", "function"):
        return {"books"}
    if obj[0] == "constraint":
        return {obj[1], "books"}
    return {obj[1]}
