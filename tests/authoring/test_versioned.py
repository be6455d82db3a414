"""VersionedMixin (version written on insert/update, pin honoured), the comparator adding
``version`` to marked object tables, ``check-models``, and ``dbsync revision``."""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from migrations_policy import cli
from migrations_policy.authoring import VersionedMixin, configure_object_versions, is_object_table, object_table
from migrations_policy.core.config import Settings
from migrations_policy.core.errors import ConfigError

MAPPING = {"1.0": {"Widget": ["1.0"]}, "2.0": {"Widget": ["1.0", "1.1"]}}


class Base(DeclarativeBase):
    pass


class Widget(VersionedMixin, Base):
    __tablename__ = "widgets"
    VERSION = "1.1"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str | None] = mapped_column(sa.String(20))


@pytest.fixture(autouse=True)
def no_pin():
    configure_object_versions()
    yield
    configure_object_versions()


def test_mixin_column_and_marker():
    column = Widget.__table__.c.version
    assert isinstance(column.type, sa.String) and column.type.length == 15 and column.nullable
    assert [ix.name for ix in Widget.__table__.indexes] == ["ix_widgets_version"]
    assert is_object_table(Widget.__table__)


def test_version_written_on_insert_and_update_honouring_the_pin(db_engine):
    Base.metadata.create_all(db_engine)
    with Session(db_engine) as session:
        session.add(Widget(id=1, name="a"))
        session.commit()
        assert session.get(Widget, 1).version == "1.1"

        configure_object_versions(pin_release_version="1.0", release_mapping=MAPPING)
        session.add(Widget(id=2, name="b"))
        session.get(Widget, 1).name = "changed"
        session.commit()
        stored = dict(session.execute(sa.text("SELECT id, version FROM widgets")).all())
        assert stored == {1: "1.0", 2: "1.0"}  # a pinned service writes the older release's version

        configure_object_versions(settings=Settings(pin_release_version="2.0"), release_mapping=MAPPING)
        session.get(Widget, 2).name = "again"
        session.commit()
        assert session.execute(sa.text("SELECT version FROM widgets WHERE id = 2")).scalar() == "1.1"


def test_pin_must_be_a_release_of_the_mapping():
    with pytest.raises(ConfigError, match="'9.9' is not a release"):
        configure_object_versions(pin_release_version="9.9", release_mapping=MAPPING)


MARKED = '''
things = sa.Table("things", metadata, sa.Column("id", sa.Integer, primary_key=True), sa.Column("name", sa.String(20)))
'''


def test_comparator_adds_version_and_index_to_a_marked_table(sqlite_workspace):
    workspace = sqlite_workspace
    workspace.models(MARKED)
    workspace.upgrade()
    workspace.revision("things")
    workspace.upgrade()
    # mark it without declaring the column (a Core table marked through info)
    workspace.models(MARKED.replace('sa.String(20)))', 'sa.String(20)), '
                                    'info={"migrations_policy.object_table": True})'))
    files = workspace.revision("version for things")
    assert set(files) == {"expand"}
    text = files["expand"].read_text()
    assert "op.add_column('things', sa.Column('version', sa.String(length=15), nullable=True))" in text
    assert "op.create_index('ix_things_version', 'things', ['version'], unique=False, " \
           "postgresql_concurrently=True)" in text


def test_object_table_helper_declares_column_and_index():
    table = object_table(sa.Table("gadgets", sa.MetaData(), sa.Column("id", sa.Integer, primary_key=True)))
    assert "version" in table.c and [ix.name for ix in table.indexes] == ["ix_gadgets_version"]


MODELS_MODULE = '''
import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from migrations_policy.authoring import VersionedMixin

class Base(DeclarativeBase):
    pass

class Good(VersionedMixin, Base):
    __tablename__ = "good"
    id: Mapped[int] = mapped_column(primary_key=True)

bad = sa.Table("bad", Base.metadata, sa.Column("id", sa.Integer, primary_key=True),
               info={"migrations_policy.object_table": True})
plain = sa.Table("plain", Base.metadata, sa.Column("id", sa.Integer, primary_key=True))
'''


def test_check_models(tmp_path, monkeypatch, capsys):
    (tmp_path / "cm_models.py").write_text(MODELS_MODULE)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["check-models", "cm_models"]) == 1
    out = capsys.readouterr().out
    assert out.strip() == "bad: object table without a 'version' column (use VersionedMixin or object_table())"
    assert cli.main(["check-models", "cm_models:Good"]) == 1  # Good.metadata is the same MetaData
    capsys.readouterr()
    assert cli.main(["check-models", "no_such_module_xyz"]) == 2
    assert "cannot import 'no_such_module_xyz'" in capsys.readouterr().err


def test_check_models_on_the_example(monkeypatch, capsys):
    from ..helpers import EXAMPLE

    monkeypatch.syspath_prepend(str(EXAMPLE))
    assert cli.main(["check-models", "inventory.models.release3", "--format", "json"]) == 0
    assert '"object_tables": [\n    "nodes",\n    "ports"\n  ]' in capsys.readouterr().out
    assert cli.main(["check-models", "inventory.models.release1", "-c", str(EXAMPLE / "alembic.ini")]) == 1
    out = capsys.readouterr().out  # release 1 has no version column; the mapping names both tables
    assert "nodes: object table without a 'version' column" in out and "ports:" in out


def test_dbsync_revision(workspace, capsys):
    workspace.upgrade()
    workspace.models(MARKED)
    assert cli.dbsync_main(["-c", str(workspace.ini), "revision", "-m", "things", "--rev-id", "t1"]) == 0
    out = capsys.readouterr().out
    assert "wrote " in out and "t1_things.py" in out
    assert (workspace.versions / "expand" / "t1_things.py").is_file()
    workspace.upgrade()
    assert cli.dbsync_main(["-c", str(workspace.ini), "revision", "-m", "again"]) == 0
    assert "no schema changes detected" in capsys.readouterr().out


def test_dbsync_revision_refuses_unsafe_and_taken_ids(sqlite_workspace, capsys):
    """Generated ids with path separators, dots, quotes, spaces or too long are refused in one line,
    and so is an id (or its _contract twin) already in the history; nothing is written."""
    import random
    import string

    workspace = sqlite_workspace
    workspace.upgrade()
    workspace.models(MARKED)
    capsys.readouterr()
    before = sorted(p.name for p in workspace.versions.rglob("*.py"))
    rng = random.Random(14)
    hostile = ["../../x", "t-1", "..", "a/b", "a\\b", "x.py", " t1", "t 1", "'t'", "-t", "", "a" * 65, "é1"]
    hostile += ["".join(rng.choices(string.ascii_letters + "./\\ '\"$%", k=rng.randint(1, 12))) for _ in range(20)]
    hostile = [h for h in hostile if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_]{0,63}", h)]
    for rev_id in hostile + ["expand_root", "contract_root"]:
        code = cli.dbsync_main(["-c", str(workspace.ini), "revision", "-m", "things", "--rev-id", rev_id])
        err = capsys.readouterr().err
        assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, (rev_id, err)
    assert sorted(p.name for p in workspace.versions.rglob("*.py")) == before
    assert not (workspace.versions.parent.parent / "x").exists()
    # a safe, free id still works
    code = cli.dbsync_main(["-c", str(workspace.ini), "revision", "-m", "things", "--rev-id", "t_1"])
    assert code == 0, capsys.readouterr().err
