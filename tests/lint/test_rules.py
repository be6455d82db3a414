"""Every rule, flagged and safe form, on every dialect it applies to.

Each case is (body of upgrade(), dialect, phase, codes that must be reported).  A case
with no codes must lint clean: exit 0 and no finding at all.
"""

from __future__ import annotations

import pytest

PG, MY, LITE = "postgresql", "mysql", "sqlite"
ALL = (PG, MY, LITE)

FLAGGED = [
    # MP101 drop in expand: ops, raw SQL, batch, helper
    ("drop_column", 'op.drop_column("users", "fax")', ALL, {"MP101"}),
    ("drop_table_sql", 'op.execute("DROP TABLE old_stuff")', ALL, {"MP101"}),
    ("drop_column_sql", 'op.execute(sa.text("ALTER TABLE users DROP COLUMN fax"))', ALL, {"MP101"}),
    ("drop_index", 'op.drop_index("ix_a", table_name="users")', ALL, {"MP101"}),
    ("drop_constraint", 'op.drop_constraint("fk_a", "users", type_="foreignkey")', (PG, MY), {"MP101"}),
    ("drop_in_batch", 'with op.batch_alter_table("users") as b:\n    b.drop_column("fax")', (PG, MY), {"MP101"}),
    ("drop_in_batch_sqlite", 'with op.batch_alter_table("users") as b:\n    b.drop_column("fax")', (LITE,), {"MP101", "MP151"}),
    ("multi_statement", 'op.execute("CREATE TABLE x (id int); DROP TABLE y")', ALL, {"MP101"}),
    ("drop_in_do_block", 'op.execute("DO $$ BEGIN IF EXISTS (SELECT 1) THEN ALTER TABLE users DROP COLUMN fax; '
     'END IF; END $$")', (PG,), {"MP101"}),
    # MP102 rename
    ("rename_table", 'op.rename_table("a", "b")', ALL, {"MP102"}),
    ("rename_column", 'op.alter_column("users", "name", new_column_name="full_name", existing_type=sa.String(50))', (PG, MY), {"MP102"}),
    ("rename_column_sql", 'op.execute("ALTER TABLE users RENAME COLUMN name TO full_name")', ALL, {"MP102"}),
    ("mysql_change", 'op.execute("ALTER TABLE users CHANGE name full_name VARCHAR(80)")', (MY,), {"MP102", "MP103"}),
    # MP103 type change
    ("alter_type", 'op.alter_column("orders", "id", type_=sa.BigInteger(), existing_type=sa.Integer())', (PG, MY), {"MP103"}),
    ("alter_type_sqlite", 'op.alter_column("orders", "id", type_=sa.BigInteger())', (LITE,), {"MP103", "MP150"}),
    ("alter_type_sql", 'op.execute("ALTER TABLE orders ALTER COLUMN id TYPE bigint")', (PG,), {"MP103"}),
    # a widening that crosses MariaDB's length-byte boundary copies there (utf8mb4: 160 -> 280 bytes)
    ("widen_crossing", 'op.alter_column("u", "name", type_=sa.String(70), existing_type=sa.String(40))', (MY,), {"MP103"}),
    ("narrow", 'op.alter_column("u", "name", type_=sa.String(40), existing_type=sa.String(70))', (PG, MY), {"MP103"}),
    ("modify_sql", 'op.execute("ALTER TABLE orders MODIFY id BIGINT NOT NULL")', (MY,), {"MP103"}),
    ("charset_loop", 'for t in ["a", "b"]:\n    op.execute(f"ALTER TABLE {t} CONVERT TO CHARACTER SET utf8mb4")', (MY,), {"MP103"}),
    # MP104 set not null
    ("set_not_null", 'op.alter_column("users", "email", nullable=False, existing_type=sa.String(255))', (PG, MY), {"MP104"}),
    ("set_not_null_sql", 'op.execute("ALTER TABLE users ALTER COLUMN email SET NOT NULL")', (PG,), {"MP104"}),
    # MP105 NOT NULL without server default (Python-side default too)
    ("not_null_no_default", 'op.add_column("users", sa.Column("active", sa.Boolean(), nullable=False))', (PG, MY), {"MP105"}),
    ("not_null_python_default", 'op.add_column("users", sa.Column("active", sa.Boolean(), nullable=False, default=True))', (PG, MY), {"MP105"}),
    ("not_null_sql", 'op.execute("ALTER TABLE users ADD COLUMN active boolean NOT NULL")', (PG, MY), {"MP105"}),
    # MP106 / MP107 data in schema scripts
    ("truncate", 'op.execute("TRUNCATE TABLE sessions")', ALL, {"MP106"}),
    ("update_sql", 'op.execute("UPDATE users SET email = lower(email)")', ALL, {"MP107"}),
    ("delete_text", 'op.execute(sa.text("DELETE FROM users WHERE id < 10"))', ALL, {"MP107"}),
    ("update_bind", 'op.get_bind().execute(sa.text("UPDATE users SET a = 1"))', ALL, {"MP107"}),
    ("update_executed_in_do_block", 'op.execute("DO $body$ DECLARE n int; BEGIN EXECUTE \'UPDATE users SET a = 1\'; '
     'END $body$ LANGUAGE plpgsql")', (PG,), {"MP107"}),
    ("update_core", 'users = sa.table("users", sa.column("a"))\nop.execute(users.update().values(a=1))', ALL, {"MP107"}),
    ("delete_bind_core", 'users = sa.table("users", sa.column("a"))\nop.get_bind().execute(users.delete())', ALL, {"MP107"}),
    # MP110 FK on existing table
    ("fk", 'op.create_foreign_key("fk_o_u", "orders", "users", ["user_id"], ["id"])', (PG, MY), {"MP110"}),
    ("fk_inline", 'op.add_column("orders", sa.Column("user_id", sa.Integer, sa.ForeignKey("users.id")))', (PG, MY), {"MP110"}),
    ("fk_sql", 'op.execute("ALTER TABLE orders ADD CONSTRAINT fk FOREIGN KEY (user_id) REFERENCES users (id)")', (PG, MY), {"MP110"}),
    ("fk_not_valid_on_mysql", 'op.create_foreign_key("fk", "orders", "users", ["user_id"], ["id"], postgresql_not_valid=True)', (MY,), {"MP110"}),
    ("fk_sqlite", 'op.create_foreign_key("fk_o_u", "orders", "users", ["user_id"], ["id"])', (LITE,), {"MP150"}),
    # MP111 unique
    ("unique", 'op.create_unique_constraint("uq_email", "users", ["email"])', (PG, MY), {"MP111"}),
    ("unique_sql", 'op.execute("ALTER TABLE users ADD CONSTRAINT uq UNIQUE (email)")', (PG, MY), {"MP111"}),
    # MP112 check
    ("check", 'op.create_check_constraint("ck", "items", "price > 0")', (PG, MY), {"MP112"}),
    ("check_sql", 'op.execute("ALTER TABLE items ADD CHECK (price > 0)")', (PG, MY), {"MP112"}),
    # MP113 index not concurrently (PostgreSQL only)
    ("index", 'op.create_index("ix_a", "orders", ["a"])', (PG,), {"MP113"}),
    ("index_sql", 'op.execute("CREATE INDEX ix_a ON orders (a)")', (PG,), {"MP113"}),
    ("unique_index", 'op.create_index("ix_a", "orders", ["a"], unique=True)', (PG,), {"MP113"}),
    # MP114 rewrite
    ("volatile_default", 'op.add_column("u", sa.Column("t", sa.String(36), server_default=sa.text("gen_random_uuid()")))', (PG,), {"MP114"}),
    ("identity", 'op.add_column("u", sa.Column("n", sa.Integer, sa.Identity()))', (PG,), {"MP114"}),
    ("mysql_uuid_default", 'op.add_column("u", sa.Column("t", sa.String(36), server_default=sa.text("(uuid())")))', (MY,), {"MP114"}),
    ("stored_generated", 'op.add_column("u", sa.Column("g", sa.Integer, sa.Computed("a + 1", persisted=True)))', (PG, MY), {"MP114"}),
    ("volatile_sql", 'op.execute("ALTER TABLE u ADD COLUMN t uuid DEFAULT gen_random_uuid()")', (PG,), {"MP114"}),
    # MP130 CONCURRENTLY in a transaction
    ("concurrently_in_txn", 'op.create_index("ix", "t", ["a"], postgresql_concurrently=True)', (PG,), {"MP130"}),
    ("concurrently_sql_in_txn", 'op.execute("CREATE INDEX CONCURRENTLY ix ON t (a)")', (PG,), {"MP130"}),
    # MP140 / MP141 / MP142 MySQL specifics
    ("fulltext", 'op.create_index("ft", "posts", ["body"], mysql_prefix="FULLTEXT")', (MY,), {"MP140"}),
    ("fulltext_sql", 'op.execute("CREATE FULLTEXT INDEX ft ON posts (body)")', (MY,), {"MP140"}),
    ("rand_default", 'op.add_column("u", sa.Column("r", sa.Float, server_default=sa.text("(rand())")))', (MY,), {"MP141"}),
    ("fk_checks_off", 'op.execute("SET foreign_key_checks = 0")\nop.create_foreign_key("fk", "o", "u", ["u_id"], ["id"])', (MY,), {"MP142"}),
    # MP150 / MP151 SQLite
    ("sqlite_not_null", 'op.add_column("u", sa.Column("a", sa.Integer, nullable=False))', (LITE,), {"MP150"}),
    ("sqlite_now_default", 'op.add_column("u", sa.Column("c", sa.DateTime, server_default=sa.func.now()))', (LITE,), {"MP150"}),
    ("sqlite_unique_column", 'op.add_column("u", sa.Column("c", sa.Integer, unique=True))', (LITE,), {"MP150"}),
    ("sqlite_stored", 'op.add_column("u", sa.Column("g", sa.Integer, sa.Computed("a + 1", persisted=True)))', (LITE,), {"MP150"}),
    ("sqlite_batch_recreate", 'with op.batch_alter_table("u") as b:\n    b.alter_column("a", type_=sa.BigInteger())', (LITE,), {"MP103", "MP151"}),
    ("batch_always", 'with op.batch_alter_table("u", recreate="always") as b:\n    b.add_column(sa.Column("a", sa.Integer))', ALL, {"MP151"}),
]

SAFE = [
    ("new_table_with_fk", 'op.create_table("p", sa.Column("id", sa.Integer, primary_key=True))\n'
     'op.create_table("c", sa.Column("id", sa.Integer, primary_key=True), sa.Column("p_id", sa.Integer, sa.ForeignKey("p.id")))', ALL),
    ("nullable_column", 'op.add_column("users", sa.Column("nick", sa.String(50)))', ALL),
    ("constant_default", 'op.add_column("users", sa.Column("n", sa.Integer, nullable=False, server_default="0"))', ALL),
    ("now_default_pg", 'op.add_column("u", sa.Column("c", sa.DateTime, server_default=sa.func.now()))', (PG, MY)),
    ("index_on_new_table", 'op.create_table("p", sa.Column("id", sa.Integer, primary_key=True), sa.Column("a", sa.Integer))\n'
     'op.create_index("ix_p_a", "p", ["a"])', ALL),
    ("fk_between_new_tables", 'op.create_table("p", sa.Column("id", sa.Integer, primary_key=True))\n'
     'op.create_table("c", sa.Column("id", sa.Integer, primary_key=True), sa.Column("p_id", sa.Integer))\n'
     'op.create_foreign_key("fk", "c", "p", ["p_id"], ["id"])', (PG, MY)),
    ("fk_not_valid", 'op.create_foreign_key("fk", "orders", "users", ["user_id"], ["id"], postgresql_not_valid=True)', (PG,)),
    ("fk_not_valid_sql", 'op.execute("ALTER TABLE orders ADD CONSTRAINT fk FOREIGN KEY (u) REFERENCES users (id) NOT VALID")', (PG,)),
    ("do_block_words_in_strings", 'op.execute("DO $$ BEGIN RAISE NOTICE \'DROP TABLE users\'; '
     'IF (SELECT count(*) FROM drop_log) > 0 THEN CREATE TABLE IF NOT EXISTS audit (id int); END IF; END $$")', (PG,)),
    ("check_not_valid", 'op.create_check_constraint("ck", "items", "price > 0", postgresql_not_valid=True)', (PG,)),
    ("validate", 'op.execute("ALTER TABLE orders VALIDATE CONSTRAINT fk")', (PG,)),
    ("unique_using_index", 'op.execute("ALTER TABLE users ADD CONSTRAINT uq UNIQUE USING INDEX ix_email")', (PG,)),
    ("comment_change", 'op.alter_column("users", "email", comment="login", existing_type=sa.String(255))', (PG, MY)),
    ("server_default_change", 'op.alter_column("users", "n", server_default="1", existing_type=sa.Integer())', (PG, MY)),
    ("drop_not_null", 'op.alter_column("users", "email", nullable=True, existing_type=sa.String(255))', (PG, MY)),
    ("widen_in_place", 'op.alter_column("u", "name", type_=sa.String(300), existing_type=sa.String(100))', (PG, MY)),
    ("widen_crossing_pg", 'op.alter_column("u", "name", type_=sa.String(70), existing_type=sa.String(40))', (PG,)),
    ("seed_new_table", 'op.create_table("colors", sa.Column("id", sa.Integer, primary_key=True), sa.Column("name", sa.String(20)))\n'
     'op.execute("INSERT INTO colors (id, name) VALUES (1, \'red\')")\n'
     'op.execute("UPDATE colors SET name = \'blue\' WHERE id = 1")', ALL),
    ("bulk_insert_new_table", 't = op.create_table("colors", sa.Column("id", sa.Integer, primary_key=True))\n'
     'op.bulk_insert(t, [{"id": 1}])', ALL),
    ("identifiers_named_drop", 'op.add_column("drop", sa.Column("rename", sa.Integer))\n'
     'op.execute(\'ALTER TABLE "drop" ADD COLUMN "truncate" integer\')', ALL),
    ("comments_and_literals", 'op.execute("-- DROP TABLE users\\n/* ALTER TABLE x RENAME TO y */ SELECT \'DROP TABLE z; UPDATE t SET a=1\'")', ALL),
    ("concurrently_autocommit", 'with op.get_context().autocommit_block():\n'
     '    op.create_index("ix", "t", ["a"], postgresql_concurrently=True)', (PG,)),
    ("concurrently_after_commit", 'op.execute("COMMIT")\nop.execute("CREATE INDEX CONCURRENTLY ix ON t (a)")', (PG,)),
    ("plain_index_mysql", 'op.create_index("ix_a", "orders", ["a"])', (MY, LITE)),
    ("unique_index_mysql", 'op.create_index("ix_a", "orders", ["a"], unique=True)', (MY,)),
    ("batch_add_column_sqlite", 'with op.batch_alter_table("u") as b:\n    b.add_column(sa.Column("a", sa.Integer))', ALL),
    ("batch_on_new_table", 'op.create_table("n", sa.Column("id", sa.Integer, primary_key=True))\n'
     'with op.batch_alter_table("n") as b:\n    b.alter_column("id", type_=sa.BigInteger())', (LITE,)),
    ("dialect_branch", 'if op.get_context().dialect.name == "postgresql":\n'
     '    with op.get_context().autocommit_block():\n'
     '        op.create_index("ix", "t", ["a"], postgresql_concurrently=True)\n'
     'else:\n'
     '    op.create_index("ix", "t", ["a"])', (PG, MY)),
    ("enum_add_value", 'op.execute("ALTER TYPE mood ADD VALUE \'meh\'")', (PG,)),
]


def _cases(table, with_codes=True):
    for case in table:
        name, body, dialects = case[:3]
        for dialect in dialects:
            yield pytest.param(body, dialect, *case[3:], id=f"{name}-{dialect}")


@pytest.mark.parametrize("body,dialect,codes", list(_cases(FLAGGED)))
def test_flagged(lint_body, body, dialect, codes):
    run = lint_body(body, dialect)
    assert run.code == 1, run.out
    assert codes <= run.codes, run.out
    for finding in run.json["findings"]:
        assert finding["dialect"] == dialect and finding["phase"] == "expand"
        assert finding["line"] >= 10  # the op's line inside upgrade(), never the header


@pytest.mark.parametrize("body,dialect", list(_cases(SAFE)))
def test_safe(lint_body, body, dialect):
    run = lint_body(body, dialect)
    assert run.json["findings"] == [], run.out
    assert run.code == 0


@pytest.mark.parametrize("body", [
    'op.create_table("n", sa.Column("id", sa.Integer, primary_key=True))',
    'op.add_column("users", sa.Column("nick", sa.String(50)))',
    'op.create_index("ix", "users", ["nick"])',
    'op.execute("CREATE INDEX ix ON users (nick)")',
])
def test_additive_in_contract(lint_body, body):
    run = lint_body(body, PG, "contract")
    assert run.codes == {"MP120"}, run.out


@pytest.mark.parametrize("body", [
    'op.drop_column("users", "fax")',
    'op.alter_column("users", "email", nullable=False, existing_type=sa.String(255))',
    'op.execute("ALTER TABLE users RENAME COLUMN a TO b")',
])
def test_contract_allows_destructive(lint_body, body):
    run = lint_body(body, PG, "contract")
    assert run.code == 0 and run.json["findings"] == [], run.out


def test_dml_is_flagged_in_contract_too(lint_body):
    assert lint_body('op.execute("DELETE FROM users WHERE orphan")', PG, "contract").codes == {"MP107"}


def test_concurrently_in_transaction_in_contract(lint_body):
    run = lint_body('op.execute("DROP INDEX CONCURRENTLY ix")', PG, "contract")
    assert run.codes == {"MP130"}


def test_postgresql_before_11_any_default_rewrites(lint_body, tmp_path):
    config = tmp_path / "old.cfg"
    config.write_text("[migrations_policy]\npostgresql_version = 10\n")
    body = 'op.add_column("users", sa.Column("n", sa.Integer, nullable=False, server_default="0"))'
    assert lint_body(body, PG).code == 0
    run = lint_body(body, PG, "expand", "", "--config", str(config))
    assert run.codes == {"MP114"}
    assert "before PostgreSQL 11" in run.findings("MP114")[0]["message"]


def test_same_problem_on_several_dialects_is_one_finding(lint_body):
    run = lint_body('op.drop_column("users", "fax")')
    (finding,) = run.json["findings"]
    assert finding["dialect"] == "postgresql,mysql,sqlite"
    assert "sqlite: DROP COLUMN rewrites the table" in finding["message"]


def test_helper_function_and_loop_lines(lint_body):
    extra = '''
def _drop(table):
    op.drop_column(table, "legacy")  # the op's line

'''
    run = lint_body('for t in ("a", "b"):\n    _drop(t)', PG, "expand", extra)
    findings = run.findings("MP101")
    assert {f["message"].split(" in an")[0] for f in findings} == {"drop column a.legacy", "drop column b.legacy"}
    source_line = [i for i, l in enumerate(run_source(run), 1) if "the op's line" in l]
    assert {f["line"] for f in findings} == set(source_line)


def run_source(run):
    from pathlib import Path
    return Path(run.json["findings"][0]["path"]).read_text().splitlines()


def test_enum_change_hidden_in_helper(lint_body):
    extra = '''
def change_enum(table, column, values):
    if op.get_context().dialect.name == "mysql":
        op.alter_column(table, column, type_=sa.Enum(*values), existing_type=sa.Enum("a"))

'''
    assert lint_body('change_enum("t", "c", ["b", "c"])', MY, "expand", extra).codes == {"MP103"}
    assert lint_body('change_enum("t", "c", ["b", "c"])', PG, "expand", extra).code == 0


def test_downgrade_is_not_linted(lint_body):
    assert lint_body('op.add_column("u", sa.Column("n", sa.String(5)))', PG).code == 0  # downgrade drops a table


def test_sql_a_do_block_builds_at_run_time_is_a_warning(lint_body):
    body = ('op.execute("DO $$ DECLARE t text; BEGIN FOR t IN SELECT tablename FROM pg_tables LOOP '
            'EXECUTE format(\'ALTER TABLE %I DROP COLUMN legacy\', t); END LOOP; END $$")')
    run = lint_body(body, "postgresql")
    assert run.code == 0, run.out
    assert [(f["code"], f["severity"]) for f in run.json["findings"]] == [("MP131", "warning")]
    constant = lint_body('op.execute("DO $$ BEGIN EXECUTE \'ALTER TABLE t DROP COLUMN legacy\'; END $$")', "postgresql")
    assert constant.code == 1 and constant.codes == {"MP101"}  # a constant string is read, not warned about


DIALECT_ONLY_SQL = [  # (statement, the only dialect that accepts it, the rule it breaks there in expand)
    ("ALTER TABLE users CONVERT TO CHARACTER SET utf8mb4", "mysql", "MP103"),
    ("ALTER TABLE users CONVERT TO CHARSET latin1", "mysql", "MP103"),
    ("ALTER TABLE users MODIFY name VARCHAR(300)", "mysql", "MP103"),
    ("ALTER TABLE users MODIFY COLUMN name TEXT NOT NULL", "mysql", "MP103"),
    ("ALTER TABLE users CHANGE name full_name VARCHAR(300)", "mysql", "MP102"),
]


@pytest.mark.parametrize("statement, only, code", DIALECT_ONLY_SQL)
@pytest.mark.parametrize("dialect", ["postgresql", "mysql", "sqlite"])
def test_raw_sql_of_one_dialect_is_judged_for_that_dialect_only(lint_body, statement, only, code, dialect):
    """issue 13: MySQL's CONVERT TO CHARACTER SET is not a PostgreSQL type change."""
    run = lint_body(f'op.execute("{statement}")', dialect)
    assert (code in run.codes) == (dialect == only), run.out
    if dialect != only:
        assert run.json["findings"] == [] and run.code == 0


def test_enum_value_addition_is_not_a_type_change(lint_body):
    for dialect in ("postgresql", "mysql", "sqlite"):
        run = lint_body('op.execute("ALTER TYPE mood ADD VALUE \'ecstatic\'")', dialect)
        assert "MP103" not in run.codes and run.code == 0, (dialect, run.out)


@pytest.mark.parametrize("old, new, type_change", [
    (("a", "b"), ("a", "b", "c"), False),
    (("a",), ("a", "b", "c", "d"), False),
    (("a", "b"), ("b", "a", "c"), True),   # reordered: MySQL rewrites
    (("a", "b", "c"), ("a", "b"), True),   # a member removed
    (("a", "b"), ("a", "c"), True),
])
@pytest.mark.parametrize("dialect", ["postgresql", "mysql"])
def test_appending_enum_members_is_not_a_type_change(lint_body, old, new, type_change, dialect):
    body = (f"op.alter_column('users', 'mood', existing_type=sa.Enum(*{old!r}, name='mood'), "
            f"type_=sa.Enum(*{new!r}, name='mood'))")
    run = lint_body(body, dialect)
    assert ("MP103" in run.codes) == type_change, run.out


@pytest.mark.parametrize("body", [
    'op.drop_constraint(None, "ports", type_="foreignkey")',
    'with op.batch_alter_table("ports") as batch:\n        batch.drop_constraint(None, type_="unique")',
])
def test_unnamed_constraint_is_named_as_unnamed_in_the_message(lint_body, body):
    """A constraint without a name reads "drop constraint (unnamed) on ports", not as if the
    table were the constraint ("drop constraint ports")."""
    run = lint_body(body, "postgresql")
    messages = [f["message"] for f in run.json["findings"]]
    assert any("drop constraint (unnamed) on ports" in m for m in messages), messages
    assert not any("drop constraint ports" in m for m in messages), messages
