"""Common model changes the split used to get wrong, on SQLite, PostgreSQL and MariaDB, in the
Column and the Mapped style: each is either written right (lint clean on every dialect, both
releases can insert during the rollout, the schema ends as the models say) or refused in one
clear line before anything is written."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import sqlalchemy as sa
from alembic.util import CommandError

from .conftest import let_data_go
from .test_split import lint

COLUMN_V1 = '''
pagers = sa.Table("pagers", metadata, sa.Column("id", sa.Integer, primary_key=True),
                  sa.Column("name", sa.String(20)), sa.Column("pager", sa.String(20), nullable=False),
                  sa.Column("size", sa.Integer, nullable=False))
'''
MAPPED_V1 = '''
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

class Base(DeclarativeBase):
    metadata = metadata

class Pager(Base):
    __tablename__ = "pagers"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str | None] = mapped_column(sa.String(20))
    pager: Mapped[str] = mapped_column(sa.String(20))
    size: Mapped[int] = mapped_column()
'''
STYLES = {"column": COLUMN_V1, "mapped": MAPPED_V1}


def _without(text: str, column: str) -> str:
    return "\n".join(line for line in text.splitlines() if f'"{column}"' not in line
                     and not line.strip().startswith(f"{column}:"))


def _with_name(v1: str, style: str, arguments: str) -> str:
    """*v1* with the ``name`` column's type arguments (``sa.String(20)``) replaced, in either style."""
    if style == "column":
        return v1.replace('sa.Column("name", sa.String(20))', f'sa.Column("name", {arguments})')
    return v1.replace("name: Mapped[str | None] = mapped_column(sa.String(20))",
                      f"name: Mapped[str | None] = mapped_column({arguments})")


def _start(workspace, style: str) -> str:
    workspace.upgrade()
    workspace.models(STYLES[style])
    workspace.revision("initial")
    workspace.upgrade()
    with sa.create_engine(workspace.url).begin() as conn:
        conn.execute(sa.text("INSERT INTO pagers (id, name, pager, size) VALUES (1, 'a', 'p', 3)"))
    return STYLES[style]


@pytest.mark.parametrize("style", sorted(STYLES))
def test_dropping_a_not_null_column_relaxes_it_in_expand(workspace, backend, style):
    v1 = _start(workspace, style)
    if style == "column":
        v2 = v1.replace(', sa.Column("pager", sa.String(20), nullable=False)', "")
    else:
        v2 = _without(v1, "pager")
    workspace.models(v2)
    files = workspace.revision("drop pager")
    assert set(files) == {"expand", "contract", "data"}  # data: the fail-closed move stub of pagers.pager
    let_data_go(files, {"pagers.pager": "release N+1 no longer needs it"})
    for path, phase in ((files["expand"], "expand"), (files["contract"], "contract")):
        assert lint(path, phase) == [], path.name
    workspace.upgrade("expand@head")
    engine = sa.create_engine(workspace.url)
    with engine.begin() as conn:  # release N+1 does not write pager; release N still does
        conn.execute(sa.text("INSERT INTO pagers (id, name, size) VALUES (2, 'n+1', 1)"))
        conn.execute(sa.text("INSERT INTO pagers (id, name, pager, size) VALUES (3, 'n', 'p3', 1)"))
    workspace.upgrade("heads")
    _assert_schema_is_the_models(workspace, engine)


@pytest.mark.parametrize("style", sorted(STYLES))
def test_primary_key_type_change_is_refused_in_one_line(workspace, backend, style):
    v1 = _start(workspace, style)
    if style == "column":
        v2 = v1.replace('sa.Column("id", sa.Integer, primary_key=True)', 'sa.Column("id", sa.BigInteger, '
                                                                         'primary_key=True)')
    else:
        v2 = v1.replace("id: Mapped[int] = mapped_column(primary_key=True)",
                        "id: Mapped[int] = mapped_column(sa.BigInteger, primary_key=True)")
    workspace.models(v2)
    before = workspace.files()
    with pytest.raises(CommandError, match=r"pagers\.id is in the primary key: .*by hand") as info:
        workspace.revision("bigint id")
    assert info.value.args[0].count("\n") == 1  # the headline and one refusal line
    assert workspace.files() == before, "nothing written"


def test_unnamed_constraint_on_an_existing_table_is_refused(workspace, backend):
    v1 = _start(workspace, "column")
    workspace.models(v1.replace('sa.Column("size", sa.Integer, nullable=False))',
                                'sa.Column("size", sa.Integer, nullable=False), sa.UniqueConstraint("name"))'))
    before = workspace.files()
    with pytest.raises(CommandError, match="pagers: the new unique constraint has no name"):
        workspace.revision("unique name")
    assert workspace.files() == before


def _assert_schema_is_the_models(workspace, engine) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext
    import runpy

    metadata = runpy.run_path(str(workspace.root / "models.py"))["metadata"]
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_server_default": True}), metadata)
    assert [d for d in diff if "alembic_version" not in str(d) and "migrations_policy" not in str(d)] == []


@pytest.mark.parametrize("style", sorted(STYLES))
def test_server_default_changes_are_compared_and_placed_in_expand(workspace, backend, style):
    v1 = _start(workspace, style)
    v2 = _with_name(v1, style, 'sa.String(20), server_default="anon"')
    workspace.models(v2)
    files = workspace.revision("name default")
    assert set(files) == {"expand"}, "a default is for the release that omits the column: expand"
    assert "server_default='anon'" in files["expand"].read_text()
    assert lint(files["expand"], "expand") == []
    workspace.upgrade("heads")
    engine = sa.create_engine(workspace.url)
    with engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO pagers (id, pager, size) VALUES (2, 'p', 1)"))
        assert conn.execute(sa.text("SELECT name FROM pagers WHERE id = 2")).scalar() == "anon"
    _assert_schema_is_the_models(workspace, engine)


def test_printed_stub_module_is_importable_without_a_data_migrations_setting(sqlite_workspace):
    workspace = sqlite_workspace
    text = workspace.ini.read_text()
    workspace.ini.write_text(text.replace("data_migrations = dm", "# data_migrations ="))
    _start(workspace, "column")
    workspace.models(COLUMN_V1.replace('sa.Column("name", sa.String(20))', 'sa.Column("name", sa.Text)'))
    done = workspace.alembic_cli("revision", "--autogenerate", "-m", "name to text")  # what a user sees
    printed = done.stdout + done.stderr
    match = re.search(r"and add (\S+) to the data_migrations setting", printed)
    assert match, printed
    module = match.group(1)
    assert module.startswith("migrations.data_migrations.")
    code = f"import sys; sys.path.insert(0, {str(workspace.root)!r}); import {module} as m; print(m.__name__)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
    assert done.returncode == 0 and done.stdout.strip() == module, done.stderr


def test_check_constraints_are_named_as_not_compared(sqlite_workspace):
    workspace = sqlite_workspace
    _start(workspace, "column")
    workspace.models(COLUMN_V1.replace('sa.Column("size", sa.Integer, nullable=False))',
                                       'sa.Column("size", sa.Integer, nullable=False), '
                                       'sa.CheckConstraint("size > 0", name="ck_size"), sa.Column("note", sa.Text))'))
    done = workspace.alembic_cli("revision", "--autogenerate", "-m", "check")
    assert done.returncode == 0, done.stderr
    assert "CHECK constraints are NOT compared by autogenerate: pagers.ck_size;" in done.stdout


@pytest.mark.parametrize("style", sorted(STYLES))
def test_narrowing_is_flagged_and_over_long_values_are_stuck_not_lost(workspace, backend, style):
    v1 = _start(workspace, style)  # row 1: name 'a'
    with sa.create_engine(workspace.url).begin() as conn:
        conn.execute(sa.text("INSERT INTO pagers (id, name, pager, size) VALUES (2, 'abcdefgh', 'p', 1)"))
    v2 = _with_name(v1, style, "sa.String(5)")
    workspace.models(v2)
    files = workspace.revision("narrow name")
    expand = files["expand"].read_text()
    assert "NARROWING pagers.name to 5 characters" in expand and "NARROWING to 5" in files["data"].read_text()
    for path, phase in ((files["expand"], "expand"), (files["contract"], "contract")):
        assert lint(path, phase) == [], path.name
    workspace.upgrade("expand@head")
    engine = sa.create_engine(workspace.url)
    with engine.begin() as conn:  # release N writes name only: a short value reaches name_new, a long one
        conn.execute(sa.text("INSERT INTO pagers (id, name, pager, size) VALUES (3, 'xy', 'p', 1)"))  # does not
        conn.execute(sa.text("INSERT INTO pagers (id, name, pager, size) VALUES (4, 'much too long', 'p', 1)"))
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT id, name_new FROM pagers WHERE id > 2 ORDER BY id")).all() == [
            (3, "xy"), (4, None)]
    workspace.use_data_migrations(files["data"])
    assert workspace.run_data_migrations() != 0  # rows 2 and 4 are stuck, reported
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT id, name_new FROM pagers ORDER BY id")).all() == [
            (1, "a"), (2, None), (3, "xy"), (4, None)]
    with engine.begin() as conn:  # the operator shortens them; the rerun completes
        conn.execute(sa.text("UPDATE pagers SET name = 'short' WHERE id IN (2, 4)"))
    assert workspace.run_data_migrations() == 0
    engine.dispose()


def test_two_type_changes_and_a_relaxed_column_on_one_table_keep_both_sync_triggers(workspace, backend):
    """On SQLite, relaxing NOT NULL rebuilds the table, which drops its triggers: expand must
    create the sync triggers after it."""
    v1 = _start(workspace, "column")
    workspace.models(v1.replace('sa.Column("name", sa.String(20))', 'sa.Column("name", sa.Text)')
                       .replace('sa.Column("pager", sa.String(20), nullable=False)',
                                'sa.Column("pager", sa.Text, nullable=False)'))
    files = workspace.revision("two to text")
    for path, phase in ((files["expand"], "expand"), (files["contract"], "contract")):
        assert lint(path, phase) == [], path.name
    workspace.upgrade("expand@head")
    engine = sa.create_engine(workspace.url)
    with engine.begin() as conn:  # release N writes the old columns; release N+1 only the new ones
        conn.execute(sa.text("INSERT INTO pagers (id, name, pager, size) VALUES (5, 'n5', 'p5', 1)"))
        conn.execute(sa.text("INSERT INTO pagers (id, name_new, pager_new, size) VALUES (6, 'n6', 'p6', 1)"))
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT id, name, name_new, pager, pager_new FROM pagers WHERE id > 4 "
                                    "ORDER BY id")).all() == [(5, "n5", "n5", "p5", "p5"), (6, "n6", "n6", "p6", "p6")]
    engine.dispose()


def test_orphans_of_a_not_null_foreign_key_column_are_found_never_deleted_by_default(workspace, backend, capsys):
    v1 = COLUMN_V1 + '''
owners = sa.Table("owners", metadata, sa.Column("id", sa.Integer, primary_key=True),
                  sa.Column("pager_id", sa.Integer, nullable=False))
'''
    workspace.upgrade()
    workspace.models(v1)
    workspace.revision("initial")
    workspace.upgrade()
    with sa.create_engine(workspace.url).begin() as conn:
        conn.execute(sa.text("INSERT INTO pagers (id, name, pager, size) VALUES (1, 'a', 'p', 3)"))
        conn.execute(sa.text("INSERT INTO owners (id, pager_id) VALUES (1, 1), (2, 99), (3, 98)"))
    workspace.models(v1.replace('sa.Column("pager_id", sa.Integer, nullable=False)',
                                'sa.Column("pager_id", sa.Integer, sa.ForeignKey("pagers.id", name="fk_owner_pager"), '
                                'nullable=False)'))
    files = workspace.revision("owner fk")
    data = files["data"].read_text()
    assert "only\n# FINDS them" in data and "sa.delete(owners)" not in data.split("# (the runner")[1]
    workspace.upgrade("expand@head")
    workspace.use_data_migrations(files["data"])
    assert workspace.run_data_migrations() != 0  # the two orphans: counted, stuck, reported
    with pytest.raises(Exception, match="owners_fk_owner_pager_orphans"):  # the gate waits
        workspace.upgrade("heads")
    engine = sa.create_engine(workspace.url)
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT id FROM owners ORDER BY id")).scalars().all() == [1, 2, 3]
    # Deleting them is the author's explicit choice, and reported as such.
    data = data.replace("@data_migration('owners_fk_owner_pager_orphans', table=owners, key='id',",
                        "@data_migration('owners_fk_owner_pager_orphans', table=owners, key='id', deletes=True,")
    data = data.replace("    return 0\n", "    return connection.execute(sa.delete(owners).where(batch.where)).rowcount\n")
    files["data"].write_text(data)
    sys.modules.pop(f"dm.{files['data'].stem}", None)
    capsys.readouterr()
    assert workspace.run_data_migrations() == 0
    printed = capsys.readouterr().out
    assert "2 deleted" in printed and "0 row(s) migrated, 2 row(s) DELETED" in printed, printed
    workspace.upgrade("heads")
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT id, pager_id FROM owners ORDER BY id")).all() == [(1, 1)]
    engine.dispose()


def test_unique_constraint_on_an_existing_table_uses_the_safe_form(workspace, backend):
    """Contract adds it the safe way; before that, a data migration counts the duplicates and
    the gate refuses contract while any is left."""
    v1 = _start(workspace, "column")  # row 1: name 'a'
    with sa.create_engine(workspace.url).begin() as conn:
        conn.execute(sa.text("INSERT INTO pagers (id, name, pager, size) VALUES (2, 'b', 'p', 1), (3, 'a', 'p', 1), "
                             "(4, NULL, 'p', 1), (5, NULL, 'p', 1)"))
    workspace.models(v1.replace('sa.Column("size", sa.Integer, nullable=False))',
                                'sa.Column("size", sa.Integer, nullable=False), sa.UniqueConstraint("name", '
                                'name="uq_pagers_name"))'))
    files = workspace.revision("unique name")
    contract = files["contract"].read_text()
    assert "postgresql_concurrently=True" in contract and "UNIQUE USING INDEX" in contract
    assert "pagers_uq_pagers_name_duplicates" in contract  # required by contract
    for path, phase in ((files.get("expand"), "expand"), (files["contract"], "contract")):
        if path is not None:
            assert lint(path, phase) == [], path.name
    workspace.upgrade("expand@head")
    workspace.use_data_migrations(files["data"])
    assert workspace.run_data_migrations() != 0  # row 3 duplicates row 1: counted, stuck
    with pytest.raises(Exception, match="data migration"):  # the gate refuses contract
        workspace.upgrade("heads")
    engine = sa.create_engine(workspace.url)
    with engine.begin() as conn:  # the operator resolves it
        conn.execute(sa.text("UPDATE pagers SET name = 'c' WHERE id = 3"))
    assert workspace.run_data_migrations() == 0
    workspace.upgrade("heads")
    with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO pagers (id, name, pager, size) VALUES (6, 'a', 'p', 3)"))
    _assert_schema_is_the_models(workspace, engine)
    engine.dispose()


@pytest.mark.parametrize("style", sorted(STYLES))
def test_a_varchar_widening_in_place_everywhere_is_one_alter_in_expand(workspace, backend, style):
    """varchar(20) -> varchar(100): PostgreSQL widens in the catalog only (relfilenode kept),
    MariaDB INPLACE whatever the character set (20 characters are at most 80 bytes): no copy."""
    v1 = _start(workspace, style)
    v2 = _with_name(v1, style, "sa.String(100)")
    workspace.models(v2)
    files = workspace.revision("widen name")
    assert set(files) == {"expand"}, "no copy, no data migration, no contract"
    expand = files["expand"].read_text()
    assert "name_new" not in expand and "op.alter_column('pagers', 'name'" in expand
    assert lint(files["expand"], "expand") == []
    engine = sa.create_engine(workspace.url)
    relfilenode = "SELECT relfilenode FROM pg_class WHERE relname = 'pagers'"
    if backend == "postgresql":
        with engine.connect() as conn:
            before = conn.execute(sa.text(relfilenode)).scalar_one()
    workspace.upgrade("heads")
    with engine.begin() as conn:
        if backend == "postgresql":
            assert conn.execute(sa.text(relfilenode)).scalar_one() == before, "the table was rewritten"
        conn.execute(sa.text("INSERT INTO pagers (id, name, pager, size) VALUES (2, :n, 'p', 1)"), {"n": "x" * 100})
    _assert_schema_is_the_models(workspace, engine)
    engine.dispose()


@pytest.mark.parametrize("dialects, one_alter", [("postgresql, mysql, sqlite", False), ("postgresql, sqlite", True)])
def test_a_widening_that_copies_on_a_configured_dialect_keeps_the_three_step_route(sqlite_workspace, dialects,
                                                                                  one_alter):
    """varchar(40) -> varchar(70): MariaDB copies the table under utf8mb4 (160 -> 280 bytes crosses
    255 with values up to 160 bytes).  Only when MariaDB is not configured is it one ALTER."""
    workspace = sqlite_workspace
    text = workspace.ini.read_text()
    assert "data_migrations = dm\n" in text
    workspace.ini.write_text(text.replace("data_migrations = dm\n", f"data_migrations = dm\ndialects = {dialects}\n"))
    v1 = COLUMN_V1.replace('sa.Column("name", sa.String(20))', 'sa.Column("name", sa.String(40))')
    workspace.upgrade()
    workspace.models(v1)
    workspace.revision("initial")
    workspace.upgrade()
    workspace.models(v1.replace('sa.Column("name", sa.String(40))', 'sa.Column("name", sa.String(70))'))
    files = workspace.revision("widen name")
    expand = files["expand"].read_text()
    assert ("name_new" not in expand) == one_alter and (set(files) == {"expand"}) == one_alter, expand
    from migrations_policy.lint.engine import Options, analyse

    configured = tuple(d.strip() for d in dialects.split(","))
    assert analyse(files["expand"], "expand", Options(dialects=configured)) == []
    hits = [(h.code, h.dialect) for h in lint(files["expand"], "expand")]  # every dialect
    assert hits == ([("MP103", "mysql")] if one_alter else []), hits  # the linter knows MariaDB would copy


@pytest.mark.parametrize("style", sorted(STYLES))
def test_a_type_change_ends_as_the_models_say_under_the_same_attribute(workspace, backend, style):
    """size: Integer NOT NULL -> BigInteger.  The split ends at size_new (a column cannot change in
    place while the old release runs); the models map it under the same attribute, as the note
    says, and after contract the schema is the models' (NOT NULL kept), release N's update made
    after the copy is there."""
    v1 = _start(workspace, style)  # row 1: size 3
    if style == "column":
        v2 = v1.replace('sa.Column("size", sa.Integer, nullable=False)', 'sa.Column("size", sa.BigInteger, '
                                                                         'nullable=False)')
        mapped = v1.replace('sa.Column("size", sa.Integer, nullable=False)',
                            'sa.Column("size_new", sa.BigInteger, key="size", nullable=False)')
    else:
        v2 = v1.replace("size: Mapped[int] = mapped_column()", "size: Mapped[int] = mapped_column(sa.BigInteger)")
        mapped = v1.replace("size: Mapped[int] = mapped_column()",
                            'size: Mapped[int] = mapped_column("size_new", sa.BigInteger)')
    workspace.models(v2)
    files = workspace.revision("size to bigint")
    expand, contract = files["expand"].read_text(), files["contract"].read_text()
    assert 'key=\'size\'' in expand and "and makes 'size_new' NOT NULL" in expand
    for path, phase in ((files["expand"], "expand"), (files["contract"], "contract")):
        assert lint(path, phase) == [], path.name
    workspace.models(mapped)  # what the note asks for
    workspace.upgrade("expand@head")
    engine = sa.create_engine(workspace.url)
    with engine.begin() as conn:  # release N+1 writes size_new only, release N size only
        conn.execute(sa.text("INSERT INTO pagers (id, name, pager, size_new) VALUES (2, 'b', 'p', 2000000000)"))
        conn.execute(sa.text("INSERT INTO pagers (id, name, pager, size) VALUES (3, 'c', 'p', 7)"))
    workspace.use_data_migrations(files["data"])
    assert workspace.run_data_migrations() == 0
    with engine.begin() as conn:  # release N updates after the copy: the trigger carries it
        conn.execute(sa.text("UPDATE pagers SET size = 4 WHERE id = 1"))
    workspace.upgrade("heads")
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT id, size_new FROM pagers ORDER BY id")).all() == [
            (1, 4), (2, 2000000000), (3, 7)]
    _assert_schema_is_the_models(workspace, engine)
    engine.dispose()


def _dbsync(workspace, *args):
    code = "import sys; from migrations_policy.cli import dbsync_main; sys.exit(dbsync_main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, "-c", str(workspace.ini), *args],
                          capture_output=True, text=True, cwd=workspace.root, timeout=300)


@pytest.mark.parametrize("change", ["primary key type", "unnamed foreign key"])
def test_dbsync_revision_prints_the_whole_refusal_once_and_exits_1(sqlite_workspace, change):
    workspace = sqlite_workspace
    v1 = _start(workspace, "column")
    if change == "primary key type":
        v2 = v1.replace('sa.Column("id", sa.Integer, primary_key=True)', 'sa.Column("id", sa.BigInteger, primary_key=True)')
        reason = "pagers.id is in the primary key: "
    else:
        v2 = v1 + 'tags = sa.Table("tags", metadata, sa.Column("id", sa.Integer, primary_key=True))\n'
        v2 = v2.replace('sa.Column("size", sa.Integer, nullable=False))',
                        'sa.Column("size", sa.Integer, sa.ForeignKey("tags.id"), nullable=False))')
        reason = "pagers: the new foreign key has no name"
    workspace.models(v2)
    before = workspace.files()
    done = _dbsync(workspace, "revision", "-m", "change")
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    printed = done.stdout + done.stderr
    assert printed.count("the expand/contract split refuses:") == 1, printed
    assert printed.count(reason) == 1 and "Traceback" not in printed, printed
    assert workspace.files() == before, "nothing written"
