"""The test servers' own promises (``migrations_policy.testing.servers``): every test gets a fresh,
empty database, whatever the tests before it did to theirs or to the server's sessions; and the
MariaDB test URL connects without the per-connection TLS attempt the server cannot answer."""

from __future__ import annotations

import random

import pytest
import sqlalchemy as sa


def _tables(url: sa.URL) -> list[str]:
    engine = sa.create_engine(url)
    try:
        return sorted(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()


def _fill(url: sa.URL, rng: random.Random) -> list[str]:
    engine = sa.create_engine(url)
    names = sorted({f"t_{rng.randrange(10**6)}" for _ in range(rng.randint(1, 4))})
    try:
        meta = sa.MetaData()
        tables = [sa.Table(n, meta, sa.Column("id", sa.Integer, primary_key=True), sa.Column("v", sa.String(20)))
                  for n in names]
        meta.create_all(engine)
        with engine.begin() as conn:
            for table in tables:
                conn.execute(table.insert(), [{"id": i, "v": str(i)} for i in range(1, rng.randint(2, 30))])
    finally:
        engine.dispose()
    return names


def _kill_other_sessions(server) -> None:
    """What several tests do on purpose: terminate every other session on the server (the admin
    connection the server keeps between tests included)."""
    engine = server.engine(isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            if server.name == "postgresql":
                conn.execute(sa.text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                     "WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'"))
            else:
                ids = conn.execute(sa.text("SELECT id FROM information_schema.processlist "
                                           "WHERE id <> CONNECTION_ID() AND user = :u"),
                                   {"u": server.url.username}).scalars().all()
                for session in ids:
                    try:
                        conn.execute(sa.text("KILL :id"), {"id": session})
                    except sa.exc.DBAPIError:
                        pass  # already gone
    finally:
        engine.dispose()


@pytest.mark.parametrize("name", ["postgresql", "mysql"])
def test_every_database_is_fresh_whatever_came_before(server_for, name):
    """Generated: rounds of create / fill / (kill the server's other sessions) / create again;
    each new database is empty and the earlier one still holds what was put in it until dropped."""
    server = server_for(name)
    seed = random.SystemRandom().randrange(10**9)
    print(f"seed={seed}")
    rng = random.Random(seed)
    previous = None
    for _ in range(3):
        url = server.create_database()
        assert _tables(url) == [], f"seed={seed}: a new database is not empty"
        names = _fill(url, rng)
        if previous is not None:
            assert _tables(previous[0]) == previous[1], f"seed={seed}"
            server.drop_database(previous[0])
        if rng.random() < 0.7:
            _kill_other_sessions(server)
        previous = (url, names)
    server.drop_database(previous[0])
    engine = server.engine()
    try:
        with engine.connect() as conn:
            if name == "postgresql":
                left = conn.execute(sa.text("SELECT count(*) FROM pg_database WHERE datname = :d"),
                                    {"d": previous[0].database}).scalar()
            else:
                left = conn.execute(sa.text("SELECT count(*) FROM information_schema.schemata "
                                            "WHERE schema_name = :d"), {"d": previous[0].database}).scalar()
    finally:
        engine.dispose()
    assert left == 0, f"seed={seed}: the dropped database is still there"


def test_mariadb_test_url_makes_no_tls_attempt(server_for):
    """The throwaway MariaDB has TLS disabled; PyMySQL >= 1.2 would otherwise build an SSL context
    (reading the system CA store) on every connect to try it: the largest fixed cost per MariaDB
    connection the suite had.  The URL every test and command gets says ``ssl_disabled``."""
    server = server_for("mysql")
    engine = server.engine()
    try:
        with engine.connect() as conn:
            raw = conn.connection.dbapi_connection
            assert raw.ssl is False
            assert conn.execute(sa.text("SELECT 1")).scalar() == 1
    finally:
        engine.dispose()
