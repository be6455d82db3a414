"""A generated corpus of the model changes teams really make (issue 23), on SQLite, PostgreSQL
and MariaDB: random release-N / N+1 model pairs drawn from the change kinds below (several in one
revision), ``alembic revision --autogenerate``, only the documented hand edits, then the rolling
upgrade with release N writing before expand, after expand, between data-migration runs and just
before contract.

After contract, every value release N last wrote is in release N+1's form and the schema is the
models (``compare_metadata`` empty); or the contract was refused, naming the fail-closed stub or
the data at stake, and release N's last writes are all still there.  Never: a contract applied that
lost what release N wrote, a write of release N failing because of expand, a row deleted by
default.

``MP_AUTOGEN_CORPUS_SEEDS`` raises the number of draws per backend (default 3); each draw prints
its seed, and ``MP_AUTOGEN_CORPUS_SEED`` replays one.
"""

from __future__ import annotations

import os
import random
import re
import runpy

import pytest
import sqlalchemy as sa

from migrations_policy.core.errors import ConfigError

from .conftest import CONVENTION, drawn_seeds, let_data_go

SEEDS = drawn_seeds("MP_AUTOGEN_CORPUS")


class Kind:
    """One change kind: release N's model (v1), release N+1's (v2), what release N writes, and
    what release N+1 must find after contract."""

    name = ""
    v1 = v2 = ""
    #: the model after the documented hand edit (a type change keeps the new column's name)
    v2_edited: str | None = None
    backends = ("sqlite", "postgresql", "mysql")
    #: the split cannot know where the data goes: it writes a FILL_IN stub, the contract is refused
    fails_closed = False
    table = ""
    columns: tuple = ()

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.last: dict[int, tuple] = {}
        self.next_id = 1

    def value(self) -> tuple:
        raise NotImplementedError

    def core(self):
        return sa.table(self.table, sa.column("id", sa.Integer), *[sa.column(c.name, c.type) for c in self.columns])

    def write_n(self, conn, inserts: int = 3) -> None:
        """Release N: insert a few rows and update one, through its own columns only."""
        table = self.core()
        names = [c.name for c in self.columns]
        for _ in range(inserts):
            value = self.value()
            conn.execute(sa.insert(table).values(id=self.next_id, **dict(zip(names, value))))
            self.last[self.next_id] = value
            self.next_id += 1
        if self.last:
            key = self.rng.choice(sorted(self.last))
            value = self.value()
            conn.execute(sa.update(table).where(table.c.id == key).values(**dict(zip(names, value))))
            self.last[key] = value

    def edit(self, files: dict) -> None:
        """The documented hand edits of the generated files (default: none)."""

    def assert_n_data_kept(self, conn) -> None:
        """Refused: release N's columns still hold what it last wrote."""
        table = self.core()
        rows = {r[0]: tuple(r[1:]) for r in conn.execute(sa.select(table.c.id, *[table.c[c.name]
                                                                                  for c in self.columns]))}
        assert rows == {k: self.normal(v) for k, v in self.last.items()}, self.name

    def normal(self, value: tuple) -> tuple:
        return value

    def assert_n1_form(self, conn) -> None:
        raise NotImplementedError


def _word(rng, n=6) -> str:
    return "".join(rng.choice("abcdefghijklmnop") for _ in range(n))


class RenameTable(Kind):
    name, table = "rename_table", "wards"
    fails_closed = True
    at_stake = ("wards",)
    columns = (sa.column("label", sa.String),)
    v1 = 'wards = sa.Table("wards", metadata, sa.Column("id", sa.Integer, primary_key=True), sa.Column("label", sa.String(40)))\n'
    v2 = 'units = sa.Table("units", metadata, sa.Column("id", sa.Integer, primary_key=True), sa.Column("label", sa.String(40)))\n'

    def value(self):
        return (_word(self.rng),)


class BoolToStatus(Kind):
    name, table = "bool_to_status", "beds"
    fails_closed = True
    at_stake = ("beds.active",)
    columns = (sa.column("active", sa.Boolean),)
    v1 = 'beds = sa.Table("beds", metadata, sa.Column("id", sa.Integer, primary_key=True), sa.Column("active", sa.Boolean))\n'
    v2 = 'beds = sa.Table("beds", metadata, sa.Column("id", sa.Integer, primary_key=True), sa.Column("status", sa.String(10)))\n'

    def value(self):
        return (self.rng.choice([True, False]),)


class MoveToChild(Kind):
    name, table = "move_to_child", "patients"
    fails_closed = True
    at_stake = ("patients.phone",)
    columns = (sa.column("phone", sa.String),)
    v1 = 'patients = sa.Table("patients", metadata, sa.Column("id", sa.Integer, primary_key=True), sa.Column("phone", sa.String(20)))\n'
    v2 = ('patients = sa.Table("patients", metadata, sa.Column("id", sa.Integer, primary_key=True))\n'
          'patient_phones = sa.Table("patient_phones", metadata, sa.Column("id", sa.Integer, primary_key=True),\n'
          '    sa.Column("patient_id", sa.Integer, sa.ForeignKey("patients.id")), sa.Column("phone", sa.String(20)))\n')

    def value(self):
        return ("+" + "".join(self.rng.choice("0123456789") for _ in range(8)),)


class SplitColumn(Kind):
    name, table = "split", "people"
    fails_closed = True
    at_stake = ("people.full_name",)
    columns = (sa.column("full_name", sa.String),)
    v1 = 'people = sa.Table("people", metadata, sa.Column("id", sa.Integer, primary_key=True), sa.Column("full_name", sa.String(80)))\n'
    v2 = ('people = sa.Table("people", metadata, sa.Column("id", sa.Integer, primary_key=True),\n'
          '    sa.Column("first_name", sa.String(40)), sa.Column("last_name", sa.String(40)))\n')

    def value(self):
        return (f"{_word(self.rng, 5)} {_word(self.rng, 7)}",)


class MergeColumns(Kind):
    name, table = "merge", "sites"
    fails_closed = True
    at_stake = ("sites.street", "sites.city")
    columns = (sa.column("street", sa.String), sa.column("city", sa.String))
    v1 = ('sites = sa.Table("sites", metadata, sa.Column("id", sa.Integer, primary_key=True),\n'
          '    sa.Column("street", sa.String(40)), sa.Column("city", sa.String(40)))\n')
    v2 = 'sites = sa.Table("sites", metadata, sa.Column("id", sa.Integer, primary_key=True), sa.Column("address", sa.String(80)))\n'

    def value(self):
        return (_word(self.rng), _word(self.rng, 4))


class StringToInteger(Kind):
    """Release N keeps writing values an INTEGER cannot hold: its writes must not fail; the rows
    stay pending (reported), the gate waits; once the operator fixes them, contract runs."""

    name, table = "str_to_int", "rooms"
    columns = (sa.column("code", sa.String),)
    v1 = 'rooms = sa.Table("rooms", metadata, sa.Column("id", sa.Integer, primary_key=True), sa.Column("code", sa.String(10)))\n'
    v2 = 'rooms = sa.Table("rooms", metadata, sa.Column("id", sa.Integer, primary_key=True), sa.Column("code", sa.Integer))\n'
    v2_edited = ('rooms = sa.Table("rooms", metadata, sa.Column("id", sa.Integer, primary_key=True),\n'
                 '    sa.Column("code_new", sa.Integer, key="code"))\n')
    bad = False

    def value(self):
        if self.rng.random() < 0.3:
            return (self.rng.choice(["A1", "x", "12b", "", "1.5", " 7 x"]),)
        return (str(self.rng.randrange(-500, 100000)),)

    def fix(self, conn) -> None:
        """The operator shortens the values the new type cannot hold (a write of release N)."""
        table = self.core()
        for key, (code,) in list(self.last.items()):
            if not re.fullmatch(r"-?[0-9]+", code):
                value = (str(self.rng.randrange(1000)),)
                conn.execute(sa.update(table).where(table.c.id == key).values(code=value[0]))
                self.last[key] = value

    def assert_n1_form(self, conn) -> None:
        rows = dict(conn.execute(sa.text("SELECT id, code_new FROM rooms")).all())
        assert rows == {k: int(v[0]) for k, v in self.last.items()}


class NotNullForeignKey(Kind):
    """An existing column gains a NOT NULL foreign key: orphans are found and counted, never deleted."""

    name, table = "not_null_fk", "orders"
    columns = (sa.column("clinic_id", sa.Integer),)
    v1 = ('clinics = sa.Table("clinics", metadata, sa.Column("id", sa.Integer, primary_key=True))\n'
          'orders = sa.Table("orders", metadata, sa.Column("id", sa.Integer, primary_key=True), sa.Column("clinic_id", sa.Integer))\n')
    v2 = ('clinics = sa.Table("clinics", metadata, sa.Column("id", sa.Integer, primary_key=True))\n'
          'orders = sa.Table("orders", metadata, sa.Column("id", sa.Integer, primary_key=True),\n'
          '    sa.Column("clinic_id", sa.Integer, sa.ForeignKey("clinics.id", name="fk_orders_clinic"), nullable=False))\n')
    expanded = False

    def value(self):
        if not self.expanded and self.rng.random() < 0.4:
            return (self.rng.choice([None, 90 + self.rng.randrange(9)]),)  # NULL or an orphan
        return (self.rng.randrange(1, 4),)

    def seed(self, conn) -> None:
        conn.execute(sa.text("INSERT INTO clinics (id) VALUES (1), (2), (3)"))

    def edit(self, files: dict) -> None:  # the documented edit: the value for NULL rows
        text = files["data"].read_text()
        text = re.sub(r"FILL_IN_ORDERS_CLINIC_ID_NOT_NULL = FILL_IN\([^\n]*\)",
                      "FILL_IN_ORDERS_CLINIC_ID_NOT_NULL = 1", text)
        files["data"].write_text(text)

    def fix(self, conn) -> None:
        table = self.core()
        for key, (clinic,) in list(self.last.items()):
            if clinic is not None and clinic > 3:
                conn.execute(sa.update(table).where(table.c.id == key).values(clinic_id=2))
                self.last[key] = (2,)

    def assert_n1_form(self, conn) -> None:
        rows = dict(conn.execute(sa.text("SELECT id, clinic_id FROM orders")).all())
        backfilled = {k: 1 if v[0] is None else v[0] for k, v in self.last.items()}  # the edited stub's value
        assert rows == backfilled, "no order deleted, every orphan fixed, NULLs backfilled"


class EnumAddValue(Kind):
    """PostgreSQL native ENUM gains a value: release N+1 writes it after expand."""

    name, table = "enum_add", "visits"
    backends = ("postgresql",)
    columns = (sa.column("kind", sa.Enum("walk_in", "booked", "phone", name="visit_kind")),)
    v1 = ('visits = sa.Table("visits", metadata, sa.Column("id", sa.Integer, primary_key=True),\n'
          '    sa.Column("kind", sa.Enum("walk_in", "booked", name="visit_kind")))\n')
    v2 = ('visits = sa.Table("visits", metadata, sa.Column("id", sa.Integer, primary_key=True),\n'
          '    sa.Column("kind", sa.Enum("walk_in", "booked", "phone", name="visit_kind")))\n')

    def value(self):
        return (self.rng.choice(["walk_in", "booked"]),)

    def write_n1(self, conn) -> None:
        conn.execute(sa.text("INSERT INTO visits (id, kind) VALUES (:id, 'phone')"), {"id": self.next_id})
        self.last[self.next_id] = ("phone",)
        self.next_id += 1

    def assert_n1_form(self, conn) -> None:
        rows = {k: (v,) for k, v in conn.execute(sa.text("SELECT id, CAST(kind AS TEXT) FROM visits")).all()}
        assert rows == self.last


class JsonVariant(Kind):
    """A new ``JSON().with_variant(JSONB)`` column: the scripts import what they render."""

    name, table = "json_variant", "notes"
    columns = (sa.column("body", sa.String),)
    v1 = 'notes = sa.Table("notes", metadata, sa.Column("id", sa.Integer, primary_key=True), sa.Column("body", sa.String(40)))\n'
    v2 = ('from sqlalchemy.dialects import postgresql as _pg\n'
          'notes = sa.Table("notes", metadata, sa.Column("id", sa.Integer, primary_key=True), sa.Column("body", sa.String(40)),\n'
          '    sa.Column("meta", sa.JSON().with_variant(_pg.JSONB(), "postgresql")))\n')

    def value(self):
        return (_word(self.rng),)

    def assert_n1_form(self, conn) -> None:
        self.assert_n_data_kept(conn)


class NotNullColumn(Kind):
    """An existing column becomes NOT NULL (with a naming convention: its CHECK is named once)."""

    name, table = "not_null", "charts"
    columns = (sa.column("ref", sa.String),)
    v1 = 'charts = sa.Table("charts", metadata, sa.Column("id", sa.Integer, primary_key=True), sa.Column("ref", sa.String(20)))\n'
    v2 = ('charts = sa.Table("charts", metadata, sa.Column("id", sa.Integer, primary_key=True),\n'
          '    sa.Column("ref", sa.String(20), nullable=False))\n')
    expanded = False

    def value(self):
        return (_word(self.rng),) if self.expanded or self.rng.random() < 0.7 else (None,)

    def edit(self, files: dict) -> None:
        text = files["data"].read_text()
        files["data"].write_text(re.sub(r"(FILL_IN_CHARTS_REF_NOT_NULL) = FILL_IN\([^\n]*\)", r"\1 = 'none'", text))

    def assert_n1_form(self, conn) -> None:
        rows = dict(conn.execute(sa.text("SELECT id, ref FROM charts")).all())
        assert rows == {k: "none" if v[0] is None else v[0] for k, v in self.last.items()}


class MoveBetweenTables(Kind):
    """A column moves from one existing table to another existing table (no new table to hint at it)."""

    name, table = "move_between", "members"
    fails_closed = True
    at_stake = ("members.email",)
    columns = (sa.column("email", sa.String),)
    v1 = ('members = sa.Table("members", metadata, sa.Column("id", sa.Integer, primary_key=True), sa.Column("email", sa.String(60)))\n'
          'member_cards = sa.Table("member_cards", metadata, sa.Column("id", sa.Integer, primary_key=True),\n'
          '    sa.Column("member_id", sa.Integer))\n')
    v2 = ('members = sa.Table("members", metadata, sa.Column("id", sa.Integer, primary_key=True))\n'
          'member_cards = sa.Table("member_cards", metadata, sa.Column("id", sa.Integer, primary_key=True),\n'
          '    sa.Column("member_id", sa.Integer), sa.Column("email", sa.String(60)))\n')

    def value(self):
        return (f"{_word(self.rng)}@{_word(self.rng, 4)}.org",)


class RenameTableAndColumn(Kind):
    """A table is renamed and one of its columns too, in the same release."""

    name, table = "rename_table_and_column", "bays"
    fails_closed = True
    at_stake = ("bays",)
    columns = (sa.column("label", sa.String),)
    v1 = 'bays = sa.Table("bays", metadata, sa.Column("id", sa.Integer, primary_key=True), sa.Column("label", sa.String(40)))\n'
    v2 = 'slots = sa.Table("slots", metadata, sa.Column("id", sa.Integer, primary_key=True), sa.Column("title", sa.String(40)))\n'

    def value(self):
        return (_word(self.rng),)


class NarrowString(Kind):
    """A VARCHAR is narrowed while release N still writes values longer than the new width: none may
    be cut; once the operator shortens them, the contract runs and every value is whole."""

    name, table = "narrow", "tags"
    columns = (sa.column("label", sa.String),)
    v1 = 'tags = sa.Table("tags", metadata, sa.Column("id", sa.Integer, primary_key=True), sa.Column("label", sa.String(60)))\n'
    v2 = 'tags = sa.Table("tags", metadata, sa.Column("id", sa.Integer, primary_key=True), sa.Column("label", sa.String(20)))\n'
    v2_edited = ('tags = sa.Table("tags", metadata, sa.Column("id", sa.Integer, primary_key=True),\n'
                 '    sa.Column("label_new", sa.String(20), key="label"))\n')

    def value(self):
        return (_word(self.rng, self.rng.randint(3, 40)),)

    def fix(self, conn) -> None:
        table = self.core()
        for key, (label,) in list(self.last.items()):
            if len(label) > 20:
                conn.execute(sa.update(table).where(table.c.id == key).values(label=label[:12]))
                self.last[key] = (label[:12],)

    def assert_n1_form(self, conn) -> None:
        rows = {k: (v,) for k, v in conn.execute(sa.text("SELECT id, label_new FROM tags")).all()}
        assert rows == self.last, "a narrowed value was cut or lost"


class NotNullWithDefault(Kind):
    """An existing nullable column becomes NOT NULL with a server default: the default serves new
    rows; the NULLs release N wrote (before and after expand) get the value the developer fills in."""

    name, table = "not_null_default", "gauges"
    columns = (sa.column("unit", sa.String),)
    v1 = 'gauges = sa.Table("gauges", metadata, sa.Column("id", sa.Integer, primary_key=True), sa.Column("unit", sa.String(20)))\n'
    v2 = ('gauges = sa.Table("gauges", metadata, sa.Column("id", sa.Integer, primary_key=True),\n'
          '    sa.Column("unit", sa.String(20), nullable=False, server_default="none"))\n')

    def value(self):
        return (_word(self.rng),) if self.rng.random() < 0.6 else (None,)

    def edit(self, files: dict) -> None:
        text = files["data"].read_text()
        files["data"].write_text(re.sub(r"(FILL_IN_GAUGES_UNIT_NOT_NULL) = FILL_IN\([^\n]*\)", r"\1 = 'kg'", text))

    def assert_n1_form(self, conn) -> None:
        rows = dict(conn.execute(sa.text("SELECT id, unit FROM gauges")).all())
        assert rows == {k: "kg" if v[0] is None else v[0] for k, v in self.last.items()}, "a value lost or cut"


class UniqueAdded(Kind):
    """A column gains a named UNIQUE constraint while release N writes duplicates: the generated
    migration only finds them (never deletes); the contract waits until the operator resolves them."""

    name, table = "unique_add", "badges"
    columns = (sa.column("code", sa.String),)
    v1 = 'badges = sa.Table("badges", metadata, sa.Column("id", sa.Integer, primary_key=True), sa.Column("code", sa.String(20)))\n'
    v2 = ('badges = sa.Table("badges", metadata, sa.Column("id", sa.Integer, primary_key=True), sa.Column("code", sa.String(20)),\n'
          '    sa.UniqueConstraint("code", name="uq_badges_code"))\n')

    def value(self):
        return (self.rng.choice(["red", "blue", "green", None]),)

    def fix(self, conn) -> None:  # the operator renames the duplicates (the CHECK comment's "change")
        seen = set()
        for key in sorted(self.last):
            (code,) = self.last[key]
            if code is not None and code in seen:
                code = f"{code}-{key}"
                conn.execute(sa.text("UPDATE badges SET code = :c WHERE id = :i"), {"c": code, "i": key})
                self.last[key] = (code,)
            seen.add(code)

    def assert_n1_form(self, conn) -> None:
        self.assert_n_data_kept(conn)


class DropReferencedTable(Kind):
    """A table other rows reference is dropped with the referencing column: the data is named in
    fail-closed stubs, never dropped by default."""

    name, table = "drop_referenced", "beds2"
    fails_closed = True
    at_stake = ("wards2", "beds2.ward_id")
    columns = (sa.column("ward_id", sa.Integer),)
    v1 = ('wards2 = sa.Table("wards2", metadata, sa.Column("id", sa.Integer, primary_key=True), sa.Column("label", sa.String(20)))\n'
          'beds2 = sa.Table("beds2", metadata, sa.Column("id", sa.Integer, primary_key=True),\n'
          '    sa.Column("ward_id", sa.Integer, sa.ForeignKey("wards2.id", name="fk_beds2_ward")))\n')
    v2 = 'beds2 = sa.Table("beds2", metadata, sa.Column("id", sa.Integer, primary_key=True))\n'

    def value(self):
        return (self.rng.choice([1, 2, 3, None]),)

    def seed(self, conn) -> None:
        conn.execute(sa.text("INSERT INTO wards2 (id, label) VALUES (1, 'a'), (2, 'b'), (3, 'c')"))


KINDS = [RenameTable, BoolToStatus, MoveToChild, SplitColumn, MergeColumns, StringToInteger, NotNullForeignKey,
         EnumAddValue, JsonVariant, NotNullColumn, MoveBetweenTables, RenameTableAndColumn, NarrowString,
         NotNullWithDefault, UniqueAdded, DropReferencedTable]
ONLY = [k for k in os.environ.get("MP_AUTOGEN_CORPUS_KINDS", "").split(",") if k]  # replay: draw from these only


def _models(kinds, attr: str, convention: bool) -> str:
    body = "".join(getattr(k, attr) if attr != "v2_edited" else (k.v2_edited or k.v2) for k in kinds)
    return (CONVENTION if convention else "") + body


def _compare(workspace, engine) -> list:
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    metadata = runpy.run_path(str(workspace.root / "models.py"))["metadata"]
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_server_default": True}), metadata)
    return [d for d in diff if "alembic_version" not in str(d) and "migrations_policy" not in str(d)]


@pytest.mark.parametrize("seed", SEEDS)
def test_generated_changes_never_lose_what_release_n_wrote(workspace, backend, seed):
    print(f"seed {seed} (MP_AUTOGEN_CORPUS_SEED={seed} replays it)")
    rng = random.Random(seed)
    dialect = backend
    pool = [k for k in KINDS if dialect in k.backends and (not ONLY or k.name in ONLY)]
    chosen = rng.sample(pool, min(len(pool), rng.randint(1, 3)))
    convention = rng.random() < 0.5
    print("kinds:", [k.name for k in chosen], "naming convention:", convention)
    kinds = [k(random.Random(rng.random())) for k in chosen]

    workspace.upgrade()
    workspace.models(_models(chosen, "v1", convention))
    workspace.revision("release n")
    workspace.upgrade()
    engine = sa.create_engine(workspace.url)

    def release_n_writes(inserts=3):
        with engine.begin() as conn:
            for kind in kinds:
                kind.write_n(conn, inserts)

    with engine.begin() as conn:
        for kind in kinds:
            if hasattr(kind, "seed"):
                kind.seed(conn)
    release_n_writes(inserts=rng.randint(3, 12))

    workspace.models(_models(chosen, "v2", convention))
    files = workspace.revision("release n plus 1")
    for kind in kinds:
        kind.edit(files)
    workspace.models(_models(chosen, "v2_edited", convention))
    refused_by = [k for k in kinds if k.fails_closed]
    if refused_by:
        assert "data" in files, "no stub module: the dropped data is not named anywhere"
        data = files["data"].read_text()
        for kind in refused_by:
            assert "FILL_IN" in data and kind.table in data, f"{kind.name}: no fail-closed stub names {kind.table}"

    workspace.upgrade("expand@head")  # release N must go on writing: nothing it writes may fail now
    for kind in kinds:
        kind.expanded = True
    release_n_writes()
    with engine.begin() as conn:
        for kind in kinds:
            if hasattr(kind, "write_n1"):
                kind.write_n1(conn)
    if "data" in files:
        workspace.use_data_migrations(files["data"])
    if refused_by:  # the move stubs fail closed: nothing runs, the contract is refused
        with pytest.raises(ConfigError, match=r"data migration '\w+_moved': the rows of"):
            workspace.run_data_migrations()
        release_n_writes()
        with pytest.raises(Exception, match=r"data migration '\w+_moved': the rows of"):
            workspace.upgrade("heads")
        with engine.connect() as conn:
            for kind in kinds:
                kind.assert_n_data_kept(conn)
        # The author deletes the move stubs without saying anything: the gate still refuses,
        # naming each table or column whose data would go.
        moved = let_data_go(files)
        assert sorted(moved) == sorted(stubs_for(refused_by)), moved
    elif "data" in files:
        workspace.run_data_migrations()
    release_n_writes()
    with engine.begin() as conn:
        for kind in kinds:
            if hasattr(kind, "fix"):
                kind.fix(conn)
    if "data" in files:
        assert workspace.run_data_migrations() == 0, "after the fixes every data migration completes"
    if refused_by:
        with pytest.raises(Exception) as info:
            workspace.upgrade("heads")
        for kind in refused_by:
            for what in kind.at_stake:
                assert f"drops {what}, which holds data" in str(info.value), str(info.value)
        with engine.connect() as conn:
            for kind in refused_by:
                kind.assert_n_data_kept(conn)
        # ... until the decision is recorded in the contract script.
        _record_drops_data(files["contract"], [w for k in refused_by for w in k.at_stake])
    workspace.upgrade("heads")
    with engine.connect() as conn:
        for kind in kinds:
            if not kind.fails_closed:
                kind.assert_n1_form(conn)
    assert _compare(workspace, engine) == []
    engine.dispose()


def stubs_for(kinds) -> list[str]:
    return [what.replace(".", "_") + "_moved" for kind in kinds for what in kind.at_stake]


def _record_drops_data(path, items) -> None:
    text = path.read_text()
    decided = ", ".join(f"{w!r}: 'release N+1 does not need it'" for w in items)
    path.write_text(text.replace("# drops_data = {}", f"drops_data = {{{decided}}}"))
