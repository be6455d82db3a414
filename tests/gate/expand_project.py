"""A small alembic project in the expand/contract layout whose expand revision the test writes.

Release 1 creates ``books``, ``loans`` and any extra tables; the expand revision
``r2_expand`` gets the body the test gives (``op`` calls, one per line).  Used by
the expand-recovery tests (lock give-ups, SIGKILLs, live traffic).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import sqlalchemy as sa

REPO = Path(__file__).resolve().parents[2]

ENV_PY = '''
from alembic import context
from sqlalchemy import engine_from_config, pool

from migrations_policy import environment as policy

config = context.config


def _run(connection):
    context.configure(connection=connection, target_metadata=None, **policy.configure_options(context))
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    context.configure(url=config.get_main_option("sqlalchemy.url"), literal_binds=True,
                      **policy.configure_options(context))
    with context.begin_transaction():
        context.run_migrations()
elif config.attributes.get("connection") is not None:
    _run(config.attributes["connection"])
else:
    engine = engine_from_config(config.get_section(config.config_ini_section, {}), prefix="sqlalchemy.",
                                poolclass=pool.NullPool)
    with engine.connect() as connection:
        _run(connection)
'''

ROOTS = {
    "expand/0000_expand_root.py": '''
        revision = "expand_root"
        down_revision = None
        branch_labels = ("expand",)
        depends_on = None


        def upgrade():
            pass


        def downgrade():
            pass
        ''',
    "contract/0000_contract_root.py": '''
        revision = "contract_root"
        down_revision = None
        branch_labels = ("contract",)
        depends_on = "expand_root"


        def upgrade():
            pass


        def downgrade():
            pass
        ''',
}

R1 = '''
from alembic import op
import sqlalchemy as sa

revision = "r1_release1"
down_revision = "expand_root"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table("books", sa.Column("id", sa.Integer, primary_key=True), sa.Column("title", sa.String(80)))
    op.create_table("loans", sa.Column("id", sa.Integer, primary_key=True), sa.Column("book_id", sa.Integer),
                    sa.Column("who", sa.String(40)))
    for name in EXTRA_TABLES:
        op.create_table(name, sa.Column("id", sa.Integer, primary_key=True), sa.Column("v", sa.Integer))


def downgrade():
    pass
'''

R2 = '''
from alembic import op
import sqlalchemy as sa

revision = "r2_expand"
down_revision = "r1_release1"
branch_labels = None
depends_on = None


def upgrade():
    dialect = op.get_context().dialect.name
{body}


def downgrade():
{downgrade}
'''


class ExpandProject:
    """The project on disk and its database."""

    def __init__(self, directory: Path, url: sa.URL, body: str, extra_tables: tuple[str, ...] = (),
                 downgrade: str = "pass", **settings: str):
        self.directory = directory
        self.url = url
        self.url_text = url.render_as_string(hide_password=False)
        versions = directory / "migrations" / "versions"
        for relative, source in ROOTS.items():
            (versions / relative).parent.mkdir(parents=True, exist_ok=True)
            (versions / relative).write_text(textwrap.dedent(source))
        (directory / "migrations" / "env.py").write_text(ENV_PY)
        (versions / "expand" / "0001_r1.py").write_text(
            R1.replace("EXTRA_TABLES", repr(tuple(extra_tables))))
        self.write_expand(body, downgrade)
        options = {"lock_timeout": "1", "lock_retries": "1", **settings}
        self.ini = directory / "alembic.ini"
        self.ini.write_text(
            "[alembic]\nscript_location = %(here)s/migrations\n"
            "version_locations = %(here)s/migrations/versions/expand %(here)s/migrations/versions/contract\n"
            "path_separator = space\n"
            f"sqlalchemy.url = {self.url_text.replace('%', '%%')}\n\n[migrations_policy]\n"
            + "".join(f"{k} = {v}\n" for k, v in options.items()))
        self.engine = sa.create_engine(url)

    def write_expand(self, body: str, downgrade: str = "pass") -> None:
        path = self.directory / "migrations" / "versions" / "expand" / "0002_r2.py"
        path.write_text(R2.format(body=textwrap.indent(textwrap.dedent(body).strip(), "    "),
                                  downgrade=textwrap.indent(textwrap.dedent(downgrade).strip(), "    ")))
        for cached in path.parent.glob("__pycache__/0002_r2*"):
            cached.unlink()

    def dbsync_argv(self, *args: str) -> list[str]:
        code = "import sys; from migrations_policy.cli import dbsync_main; sys.exit(dbsync_main())"
        return [sys.executable, "-c", code, "-c", str(self.ini), *args]

    def dbsync(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        """``dbsync`` in a subprocess (this checkout first on the path)."""
        return subprocess.run(self.dbsync_argv(*args), capture_output=True, text=True, timeout=timeout,
                              env=self.env())

    def popen(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen(self.dbsync_argv(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=self.env())

    def alembic(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "alembic", "-c", str(self.ini), *args],
                              capture_output=True, text=True, timeout=timeout, env=self.env())

    @staticmethod
    def env() -> dict[str, str]:
        return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}

    def heads(self) -> list[str]:
        with self.engine.connect() as conn:
            return sorted(r[0] for r in conn.execute(sa.text("SELECT version_num FROM alembic_version")))

    def columns(self, table: str) -> list[str]:
        return [c["name"] for c in sa.inspect(self.engine).get_columns(table)]

    def indexes(self, table: str) -> list[str]:
        return [i["name"] for i in sa.inspect(self.engine).get_indexes(table)]

    def journal(self) -> list[tuple]:
        with self.engine.connect() as conn:
            if not sa.inspect(conn).has_table("migrations_policy_statements"):
                return []
            return [tuple(r) for r in conn.execute(sa.text(
                "SELECT ordinal, state FROM migrations_policy_statements ORDER BY ordinal"))]
