"""Declarations, discovery and the terminal progress line: no database needed."""

from __future__ import annotations

import io
import sys
import textwrap

import pytest
import sqlalchemy as sa

from migrations_policy.core.config import Settings
from migrations_policy.data import DataMigration, ReleaseMapping, data_migration, load_registry
from migrations_policy.data.walk.report import MigrationReport, TerminalProgress
from migrations_policy.core.errors import ConfigError

t = sa.table("things", sa.column("id", sa.Integer), sa.column("a"), sa.column("b"))


def declare(**overrides):
    kw = dict(table=t, key="id", pending=t.c.b.is_(None), values={"b": t.c.a})
    kw.update(overrides)
    return DataMigration(kw.pop("name", "things_a_to_b"), **kw)


@pytest.mark.parametrize("overrides, message", [
    ({"name": "Bad-Name"}, "name must match"),
    ({"key": "uuid"}, "key column 'uuid' is not a column of things"),
    ({"values": None}, "exactly one of values="),
    ({"migrate": lambda conn, batch: 0}, "exactly one of values="),
    ({"values": {"c": 1}}, "values sets 'c'"),
    ({"options": {"not valid": 1}}, "not an identifier"),
    ({"values": None, "migrate": lambda conn, batch: 0, "pending": None}, "function form needs pending="),
    ({"values": {}}, "values= sets no column"),
])
def test_declaration_errors_are_one_line(overrides, message):
    with pytest.raises(ConfigError, match=message) as info:
        declare(**overrides)
    assert "\n" not in info.value.message


def test_options_are_converted_to_the_defaults_type():
    migration = declare(options={"limit": 10, "ratio": 0.5, "dry_run": False, "tag": "x"})
    assert migration.parse_options({"limit": "3", "ratio": "1.5", "dry_run": "yes"}) == \
        {"limit": 3, "ratio": 1.5, "dry_run": True, "tag": "x"}
    with pytest.raises(ValueError, match="has no option 'nope'"):
        migration.parse_options({"nope": "1"})
    with pytest.raises(ValueError, match="expected a boolean"):
        migration.parse_options({"dry_run": "perhaps"})


def test_unmigratable_is_pending_with_the_values_substituted():
    def sql(expression) -> str:
        return str(expression.compile(compile_kwargs={"literal_binds": True}))

    same_table_elsewhere = sa.Table("things", sa.MetaData(), sa.Column("id", sa.Integer), sa.Column("b"),
                                    sa.Column("n", sa.Integer))
    migration = DataMigration("things_b", table=t, key="id",
                              pending=sa.and_(same_table_elsewhere.c.b.is_(None), t.c.a.is_not(None)),
                              values={"b": sa.func.nullif(t.c.a, "bad")})
    # pending: the divergence of the values, AND the author's condition (kept as ``condition``)
    assert sql(migration.pending) == ("things.b IS DISTINCT FROM nullif(things.a, 'bad') "
                                      "AND things.b IS NULL AND things.a IS NOT NULL")
    assert sql(migration.condition) == "things.b IS NULL AND things.a IS NOT NULL"
    assert sql(migration.unmigratable) == ("coalesce(nullif(things.a, 'bad') IS DISTINCT FROM nullif(things.a, 'bad') "
                                           "AND nullif(things.a, 'bad') IS NULL AND things.a IS NOT NULL, false)")
    swap = declare(pending=None, values={"a": t.c.b, "b": t.c.a})  # SET sees the old row: never converges
    assert sql(swap.pending) == "things.a IS DISTINCT FROM things.b OR things.b IS DISTINCT FROM things.a"
    assert sql(swap.unmigratable) == ("coalesce(things.b IS DISTINCT FROM things.a "
                                      "OR things.a IS DISTINCT FROM things.b, false)")
    constants = declare(pending=None, values={"a": None, "b": 7})
    assert sql(constants.pending) == "things.a IS DISTINCT FROM NULL OR things.b IS DISTINCT FROM 7"
    assert sql(constants.unmigratable) == "coalesce(NULL IS DISTINCT FROM NULL OR 7 IS DISTINCT FROM 7, false)"
    assert declare(values=None, migrate=lambda conn, batch: 0).unmigratable is None


def test_columns_used_include_other_tables():
    other = sa.table("others", sa.column("id", sa.Integer))

    @data_migration("things_orphans", table=t, key="id",
                    pending=~sa.exists().where(other.c.id == t.c.a))
    def things_orphans(connection, batch):
        """Detach orphans.

        More text."""

    assert things_orphans.columns_used() == {"things": {"id", "a"}, "others": {"id"}}
    assert things_orphans.description == "Detach orphans."


def test_discovery_from_modules_and_release_mapping(tmp_path, monkeypatch):
    (tmp_path / "mp_disc_app.py").write_text(textwrap.dedent('''
        import sqlalchemy as sa
        from migrations_policy.data import DataMigration, ReleaseMapping
        t = sa.table("things", sa.column("id", sa.Integer), sa.column("a"), sa.column("b"))
        second = DataMigration("second", table=t, key="id", pending=t.c.b.is_(None), values={"b": 2})
        first = DataMigration("first", table=t, key="id", pending=t.c.a.is_(None), values={"a": 1})
        MAPPING = ReleaseMapping(tables={"Thing": "things"}, releases={"1": {"Thing": ["1.0"]}, "2": {"Thing": ["1.0", "1.1"]}})
        NOT_A_MAPPING = {}
    '''))
    monkeypatch.delitem(sys.modules, "mp_disc_app", raising=False)
    settings = Settings(data_migrations=["mp_disc_app"], release_mapping="mp_disc_app:MAPPING")
    registry = load_registry(settings, sys_paths=[str(tmp_path)], use_entry_points=False)
    assert registry.names() == ["second", "first", "object_version_things"]
    backfill = registry["object_version_things"]
    assert backfill.run_last and backfill.values == {"version": "1.1"}
    for bad, message in [
        (Settings(data_migrations=["mp_no_such_module"]), "cannot import 'mp_no_such_module'"),
        (Settings(release_mapping="mp_disc_app"), "expected 'package.module:NAME'"),
        (Settings(release_mapping="mp_disc_app:NOPE"), "has no 'NOPE'"),
        (Settings(release_mapping="mp_disc_app:NOT_A_MAPPING"), "is not a migrations_policy.data.ReleaseMapping"),
        (Settings(data_migrations=["mp_disc_app", "mp_disc_app"]), None),  # the same objects twice: fine
    ]:
        if message is None:
            assert len(load_registry(bad, use_entry_points=False)) == 2
            continue
        with pytest.raises(ConfigError, match=message):
            load_registry(bad, use_entry_points=False)


def test_release_mapping_accepted_versions():
    mapping = ReleaseMapping(tables={"Node": "nodes", "Port": "ports"},
                             releases={"1": {"Node": ["1.0"]}, "2": {"Node": ["1.1"], "Port": ["1.0"]}})
    assert mapping.accepted() == {"Node": {"1.0", "1.1"}, "Port": {"1.0"}}
    assert mapping.accepted("1") == {"Node": {"1.0"}, "Port": set()}
    assert (mapping.current, mapping.latest("Node"), mapping.latest("Port")) == ("2", "1.1", "1.0")
    with pytest.raises(ConfigError, match="objects without a table: Chassis"):
        ReleaseMapping(tables={}, releases={"1": {"Chassis": ["1.0"]}})


def test_terminal_progress_line():
    stream = io.StringIO()
    progress = TerminalProgress(stream, interval=0)
    progress.update([MigrationReport("a", remaining_before=100, migrated=40), MigrationReport("b", remaining_before=0)],
                    current="a", force=True)
    progress.close()
    line = stream.getvalue().split("\r")[1]
    assert line.startswith("40 done, 60 remaining, ") and "rows/s, ETA" in line and line.rstrip().endswith("[a]")
