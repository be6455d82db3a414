"""Offline (``--sql``) SQL applied with the database's own client gates every drop form the online run
gates (issue 27): the example at release 2 (``nodes.extra`` not migrated yet), its contract replaced by
one that drops ``nodes.extra`` in a random form (an op, ``op.execute``, ``op.get_bind().execute``, the
context's connection, SQL in random spelling), declared or not.  ``psql -v ON_ERROR_STOP=1``,
``mariadb`` and ``sqlite3 -bail`` must stop before anything is dropped: every ``extra`` value stays,
the version table does not move.  Once the data migrations are complete the same SQL applies.
Seeded: ``MP_PROVE_SEED``.
"""

from __future__ import annotations

import os
import random
import subprocess
import textwrap

import pytest
import sqlalchemy as sa
from alembic import command as alembic_command

from migrations_policy.testing import servers

from .conftest import ROWS

EXPAND_HEAD = "r2_meta_display_name_version"


def _spelling(rng: random.Random, dialect: str) -> str:
    quote = {"postgresql": '\\"', "mysql": "`", "sqlite": '\\"'}[dialect]
    table = rng.choice(["nodes", f"{quote}nodes{quote}"])
    column = rng.choice(["extra", f"{quote}extra{quote}"])
    keyword = "COLUMN " if dialect == "sqlite" or rng.random() < 0.6 else ""
    text = f"ALTER TABLE {table} DROP {keyword}{column}"
    if rng.random() < 0.3 and dialect != "sqlite":
        text = f"ALTER TABLE {table} RENAME COLUMN {column} TO extra_old"
    return text.lower() if rng.random() < 0.3 else text


def _drop_form(rng: random.Random, dialect: str) -> str:
    sql = _spelling(rng, dialect)
    return rng.choice([
        'op.drop_column("nodes", "extra")',
        f'op.execute("{sql}")',
        f'op.execute(sa.text("{sql}"))',
        f'op.get_bind().execute(sa.text("{sql}"))',
        f'op.get_context().connection.execute(sa.text("{sql}"))',
        f'bind = op.get_bind()\nbind.execute(sa.text("{sql}"))',
        f'op.get_context().impl.execute("{sql}")',
    ])


def _write_contract(app, body: str, declared: bool) -> None:
    root = app.ini.parent / "migrations" / "versions" / "contract"
    (root / "0003_r3_drop_extra_name.py").unlink()
    requires = 'requires_data_migrations = ("nodes_extra_to_meta",)' if declared else ""
    (root / "0003_r3_offline.py").write_text(
        "from alembic import op\nimport sqlalchemy as sa\n\nimport migrations_policy.window.sync_triggers\n\n"
        f"revision = 'r3_offline'\ndown_revision = 'contract_root'\nbranch_labels = None\n"
        f"depends_on = {EXPAND_HEAD!r}\n{requires}\n\n"
        f"def upgrade() -> None:\n{textwrap.indent(body, '    ')}\n\n\ndef downgrade() -> None:\n    pass\n")


def _client(app, backend: str, sql_file, tmp_path) -> subprocess.CompletedProcess:
    """The SQL file applied with the database's own command-line client, stopping at the first error."""
    url = app.url
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "MYSQL"))}
    if backend == "postgresql":
        env["PGPASSWORD"] = url.password or ""
        argv = [str(servers.postgresql_bindir() / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", url.host,
                "-p", str(url.port), "-U", url.username, "-d", url.database, "-f", str(sql_file)]
        return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    if backend == "mysql":
        defaults = tmp_path / "client.cnf"
        defaults.write_text(f"[client]\npassword={url.password}\n")
        defaults.chmod(0o600)
        argv = [servers.ensure_mysql_client(), f"--defaults-extra-file={defaults}", "-h", url.host,
                "-P", str(url.port), "-u", url.username, url.database]
        with open(sql_file) as stdin:
            return subprocess.run(argv, stdin=stdin, capture_output=True, text=True, env=env, timeout=300)
    with open(sql_file) as stdin:
        return subprocess.run([servers.ensure_sqlite3_cli(), "-bail", url.database], stdin=stdin,
                              capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.parametrize("round_", range(3))
def test_offline_sql_of_random_drop_forms_stops_in_the_database_client(expanded, backend, capsys, tmp_path,
                                                                       round_):
    seed = int(os.environ.get("MP_PROVE_SEED", random.randrange(10**6))) + round_
    print(f"MP_PROVE_SEED={seed - round_} (round {round_})")
    rng = random.Random(seed)
    dialect = expanded.engine.dialect.name
    drop = _drop_form(rng, dialect)
    declared = rng.random() < 0.3
    body = ('op.drop_sync_trigger("nodes", old="extra", new="meta")\n'
            'op.drop_sync_trigger("nodes", old="name", new="display_name")\n' + drop)
    _write_contract(expanded, body, declared)
    project = expanded.project()
    try:
        capsys.readouterr()
        alembic_command.upgrade(project.alembic_config, f"{EXPAND_HEAD}:r3_offline", sql=True)
        out = capsys.readouterr().out
    finally:
        project.dispose()
    sql_file = tmp_path / "contract.sql"
    sql_file.write_text(out)
    heads = expanded.heads()
    applied = _client(expanded, backend, sql_file, tmp_path)
    assert applied.returncode != 0, (seed, drop, declared, out[-2000:])
    assert "extra" in expanded.columns("nodes"), (seed, drop, declared, out[-2000:])
    with expanded.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(extra) FROM nodes")).scalar_one() == ROWS, (seed, drop)
    assert expanded.heads() == heads
    # the triggers the SQL dropped before its drop would be lost too: the guards come before any DDL
    assert {"meta", "display_name"} <= expanded.columns("nodes")
    if round_ == 0:  # complete: the same SQL now applies (and drops what it says)
        assert expanded.dbsync("online_data_migrations") == 0
        done = _client(expanded, backend, sql_file, tmp_path)
        assert done.returncode == 0, (seed, drop, done.stderr)
        assert "extra" not in expanded.columns("nodes"), (seed, drop)
