"""Plain scripts judged from their syntax tree (``lint.static``) get the findings running them gives (issue 28).

Scripts are drawn from a seeded grammar of what autogenerate and people write in plain scripts: every
operation ``lint.offline.plain`` allows, the argument forms autogenerate writes, batch blocks, ``op.f()``, dialect
types, both phases, all three dialects, calls laid out over several lines.  For every script the static path
accepts, its findings (codes, lines, messages, dialects, severities) must equal ``engine.analyse``'s, which runs
the script offline.  Some drawn forms make the script raise when run (a constraint naming a missing column, a
keyword-only argument given by position, an annotation that raises): the static path must decline those or
agree.  And what lies outside its tables must be declined (None: the script is run).
``MP_STATIC_SEED`` replays a draw; ``MP_STATIC_COUNT`` sets how many scripts (default 60).
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import pytest

from migrations_policy.lint import engine
from migrations_policy.lint.options import Options
from migrations_policy.lint.static import reader as static

SEED = int(os.environ.get("MP_STATIC_SEED") or random.randrange(10 ** 9))
COUNT = int(os.environ.get("MP_STATIC_COUNT") or 60)
print(f"test_static_equivalence: MP_STATIC_SEED={SEED}", file=sys.stderr)

TYPES = ["sa.Integer()", "sa.Integer", "sa.BigInteger()", "sa.SmallInteger()", "sa.String(length={n})", "sa.String({n})",
         "sa.String()", "sa.String", "sa.VARCHAR(length={n})", "sa.Unicode({n})", "sa.NCHAR({n})", "sa.CHAR({n})",
         "sa.Text()", "sa.Text", "sa.TEXT()", "sa.UnicodeText()", "sa.String({n}, collation='utf8mb4_bin')",
         "sa.Enum('a', 'b', name='e{n}')", "sa.Enum('a', 'b', 'c', name='e{n}')", "sa.Enum('a', name='e{n}')",
         "sa.Enum", "sa.Boolean()", "sa.Boolean(create_constraint=True)", "sa.DateTime()",
         "sa.DateTime(timezone=True)", "sa.Date()", "sa.Numeric(10, 2)", "sa.Numeric(precision=8)", "sa.Float()",
         "sa.JSON()", "sa.Uuid()", "sa.LargeBinary()", "postgresql.JSONB()", "postgresql.JSONB",
         "postgresql.JSONB(astext_type=sa.Text())", "sa.JSON(none_as_null=True)", "sa.Float(precision=53)",
         "postgresql.UUID(as_uuid=True)", "postgresql.TIMESTAMP(timezone=True)", "postgresql.ARRAY(sa.String())",
         "postgresql.ENUM('x', 'y', name='pe{n}')", "postgresql.INET()", "postgresql.CITEXT()",
         "mysql.VARCHAR({n}, charset='utf8mb4')", "mysql.VARCHAR(length={n})", "mysql.TEXT()",
         "mysql.MEDIUMTEXT(collation='utf8mb4_bin')", "mysql.TINYINT(display_width=1)", "mysql.INTEGER(unsigned=True)",
         "mysql.ENUM('x', 'y')", "mysql.ENUM('x', 'yz', charset='utf8mb4')", "mysql.ENUM('x', name='me{n}')",
         "mysql.SET('a', 'bc')", "mysql.SET('a', 'bcd', collation='utf8mb4_bin')", "mysql.ENUM", "mysql.SET",
         "Integer()", "String({n})", "JSONB()"]
DEFAULTS = ["", "", ", server_default='0'", ", server_default=\"x'y\"", ", server_default=sa.text('1')",
            ", server_default=sa.text('now()')", ", server_default=sa.func.now()",
            ", server_default=sa.func.gen_random_uuid()", ", server_default=sa.text(\"'a'\")",
            ", server_default=sa.func.current_timestamp()", ", server_default=None", ", default=1",
            ", default='x'", ", default=None", ", server_default=func.now()"]
ITEMS = ["", "", "", ", sa.ForeignKey('p{n}.id')", ", sa.ForeignKey('p{n}.id', ondelete='CASCADE')",
         ", sa.Computed('a + 1')", ", sa.Computed('a + 1', persisted=True)", ", sa.Identity()",
         ", sa.Identity(always=True, start=1)"]
FLAGS = ["", ", nullable=False", ", nullable=True", ", nullable=None", ", unique=True", ", primary_key=True",
         ", primary_key=True, autoincrement=False", ", index=True", ", comment='c'", ", autoincrement=True"]
SQL = ["UPDATE t{n} SET c = 1", "ALTER TABLE t{n} ADD COLUMN x integer NOT NULL",
       "CREATE INDEX CONCURRENTLY ix{n} ON t{n} (c)", "DELETE FROM t{n}", "ALTER TABLE t{n} DROP COLUMN c",
       "ALTER TYPE e ADD VALUE 'z'", "ALTER TABLE t{n} MODIFY c varchar(20)", "SET foreign_key_checks = 0",
       "INSERT INTO t{n} (a) VALUES (1)", "ALTER TABLE t{n} ALTER COLUMN c SET NOT NULL", "SELECT 1",
       # read differently per dialect and server setting (backslash escapes, "..." a string on MySQL)
       "UPDATE t{n} SET c = 'a\\'; ALTER TABLE t{n} DROP COLUMN d; -- '",
       'UPDATE t{n} SET c = "x;y"; ALTER TABLE t{n} DROP COLUMN e',
       "UPDATE t{n} SET c = $$a; ALTER TABLE t{n} DROP COLUMN f; $$"]


def _pick(rng: random.Random, options: list[str]) -> str:
    return rng.choice(options).format(n=rng.randint(1, 300))


def _column(rng: random.Random, name: str | None = None) -> str:
    name = name or f"c{rng.randint(1, 300)}"
    return f"sa.Column({name!r}, {_pick(rng, TYPES)}{_pick(rng, ITEMS)}{_pick(rng, FLAGS)}{_pick(rng, DEFAULTS)})"


def _name(rng: random.Random, prefix: str) -> str:
    n = rng.randint(1, 300)
    return rng.choice([f"'{prefix}{n}'", f"op.f('{prefix}{n}')", "None" if prefix in ("fk", "uq") else f"'{prefix}{n}'"])


def _operation(rng: random.Random, table: str, batch: bool) -> str:
    """One operation call; *batch*: as ``batch_op.NAME`` (no table argument)."""
    t = "" if batch else f"{table!r}, "
    n = rng.randint(1, 300)
    kind = rng.randrange(17)
    if kind == 0:
        where = rng.choice(["", ", insert_after='a'"]) if batch else rng.choice(["", ", schema='s'"])
        return f"add_column({t}{_column(rng)}{where})"
    if kind == 1:
        parts = [f"{t}'c{n}'"]
        for option in rng.sample(["nullable={b}", "existing_nullable={b}", "type_={type}", "existing_type={type}",
                                  "server_default={default}", "new_column_name='d{n}'", "comment='x'",
                                  "comment=None", "existing_server_default=sa.text('0')",
                                  "existing_comment='y'", "postgresql_using='c::int'"], rng.randint(0, 4)):
            parts.append(option.format(b=rng.choice([True, False]), type=_pick(rng, TYPES), n=n,
                                       default=rng.choice(["'0'", "None", "sa.text('now()')", "sa.func.now()",
                                                           "sa.text('random()')"])))
        return f"alter_column({', '.join(parts).lstrip(', ')})" if batch else f"alter_column({', '.join(parts)})"
    if kind == 2:
        columns = rng.choice(["['a']", "['a', 'b']", "[sa.text('lower(a)')]", "('a',)"])
        extra = "".join(rng.sample([", unique=True", ", unique=False", ", postgresql_concurrently=True",
                                    ", mysql_prefix='FULLTEXT'", ", postgresql_using='gin'", ", if_not_exists=True",
                                    ", postgresql_where=sa.text('a > 0')"], rng.randint(0, 3)))
        return f"create_index({_name(rng, 'ix')}, {t}{columns}{extra})"
    if kind == 3:
        extra = rng.choice(["", ", postgresql_concurrently=True", ", if_exists=True"]) if not batch else ""
        table_arg = "" if batch else rng.choice([f", table_name={table!r}", f", {table!r}", ""])
        return f"drop_index({_name(rng, 'ix')}{table_arg}{extra})"
    if kind == 4:
        extra = "".join(rng.sample([", postgresql_not_valid=True", ", ondelete='CASCADE'", ", onupdate='SET NULL'",
                                    ", deferrable=True", ", postgresql_not_valid=False"], rng.randint(0, 2)))
        return f"create_foreign_key({_name(rng, 'fk')}, {t}'p{n}', ['p_id'], ['id']{extra})"
    if kind == 5:
        return f"create_unique_constraint({_name(rng, 'uq')}, {t}['a', 'b'])"
    if kind == 6:
        extra = rng.choice(["", ", postgresql_not_valid=True"])
        condition = rng.choice(["'a > 0'", "sa.text('a > 0')"])
        return f"create_check_constraint('ck{n}', {t}{condition}{extra})"
    if kind == 7:
        return f"create_primary_key('pk{n}', {t}['id'])"
    if kind == 8:
        kind_arg = rng.choice(["", ", type_='foreignkey'", ", type_='unique'"])
        return f"drop_constraint({_name(rng, 'uq')}, {t}{kind_arg})".replace(", )", ")")
    if kind == 9:
        return f"drop_column({t}'c{n}')"
    if kind == 10 and not batch:
        return f"drop_table('t{n}')"
    if kind == 11 and not batch:
        return f"rename_table({table!r}, 'r{n}')"
    if kind == 12:
        return f"create_table_comment({t}'a comment')" if rng.random() < 0.5 else f"drop_table_comment({t})".replace(", )", ")")
    if kind == 13:
        sql = _pick(rng, SQL)
        return f"execute({sql!r})" if rng.random() < 0.5 else f"execute(sa.text({sql!r}))"
    if kind == 14 and not batch:
        columns = [_column(rng, name) for name in rng.sample(["id", "a", "b", "c"], rng.randint(1, 4))]
        constraints = rng.sample(["sa.PrimaryKeyConstraint('id')", "sa.UniqueConstraint('a')",
                                  "sa.ForeignKeyConstraint(['b'], ['p.id'])",
                                  "sa.ForeignKeyConstraint(['b'], ['p.id'], ondelete='CASCADE', name='fk_b')",
                                  "sa.UniqueConstraint('a', name=op.f('uq_a'))", "sa.CheckConstraint('a > 0')",
                                  "sa.PrimaryKeyConstraint('id', name='pk_x')"], rng.randint(0, 2))
        extra = rng.choice(["", ", schema='s'", ", mysql_engine='InnoDB'", ", comment='t'", ", if_not_exists=True"])
        return f"create_table('n{n}', {', '.join(columns + constraints)}{extra})"
    if kind == 15:  # forms that raise when run: the static path declines them or agrees
        return rng.choice([f"create_index('ix{n}', {t}['a'], True)" if not batch else "create_index('ix', ['a'], 1, 2)",
                           f"add_column({t}sa.Column('x', sa.String(True)))",
                           f"add_column({t}sa.Column('x', sa.Integer, sa.Computed('1'), server_default='1'))",
                           "create_table('t', sa.Column('a', sa.Integer), sa.PrimaryKeyConstraint('zz'))"
                           if not batch else "drop_column('x')",
                           "create_table('t', sa.Column('a', sa.Integer), sa.Column('a', sa.Integer))"
                           if not batch else "drop_column('x')",
                           f"drop_column({t}'c', bogus_kw=1)", f"rename_table({t}'a', 'b', 'c')",
                           # a keyword only the compiler refuses (ops taking **kw bind any other name)
                           f"drop_column({t}'c{n}', __debug__=1)", f"create_index('ix{n}', {t}['a'], __debug__=True)"])
    return f"drop_column({t}'c{n}')"


def _layout(rng: random.Random, prefix: str, call: str) -> str:
    """*call* on one line, or its arguments spread over several (the line recorded is the call's)."""
    if rng.random() < 0.7 or "(" not in call:
        return prefix + call
    head, _, rest = call.partition("(")
    return prefix + head + "(\n        " + rest.replace(", ", ",\n        ", rng.randint(1, 3))


HEADERS = [
    "from typing import Sequence, Union\n\nfrom alembic import op\nimport sqlalchemy as sa\n"
    "from sqlalchemy.dialects import postgresql\nfrom sqlalchemy.dialects import mysql\n"
    "from sqlalchemy import Integer, String, func\nfrom sqlalchemy.dialects.postgresql import JSONB\n\n"
    "revision: str = {rid!r}\ndown_revision: Union[str, None] = {down!r}\n"
    "branch_labels: Union[str, Sequence[str], None] = {labels!r}\ndepends_on: Union[str, Sequence[str], None] = None\n",
    "from alembic import op\nimport sqlalchemy as sa\nimport sqlalchemy.dialects.postgresql as postgresql\n"
    "from sqlalchemy.dialects import mysql\nfrom sqlalchemy import Integer, String, func\n"
    "from sqlalchemy.dialects.postgresql import JSONB\n\n"
    "revision = {rid!r}\ndown_revision = {down!r}\nbranch_labels = {labels!r}\n",
    # no dialect module: the source never says "dialect", so one recording serves every dialect (and the
    # types of a dialect module are unbound names: those scripts are declined)
    "from alembic import op\nimport sqlalchemy as sa\nfrom sqlalchemy import Integer, String, func\n\n"
    "revision = {rid!r}\ndown_revision = {down!r}\nbranch_labels = {labels!r}\n",
    # an annotation that raises when the module runs: declined, or the same MP000
    "from typing import Optional\nfrom alembic import op\nimport sqlalchemy as sa\nfrom sqlalchemy.dialects import postgresql, mysql\n"
    "from sqlalchemy import Integer, String, func\nfrom sqlalchemy.dialects.postgresql import JSONB\n\n"
    "revision: Optional[str, int] = {rid!r}\ndown_revision = {down!r}\nbranch_labels = {labels!r}\n",
    # ``from __future__`` first (annotations are then never evaluated: a ``(yield)`` in one only the compiler
    # refuses), or after another import (only the compiler refuses it: running the script gives MP000)
    "from __future__ import annotations\n\nfrom alembic import op\nimport sqlalchemy as sa\n"
    "from sqlalchemy import Integer, String, func\n\nrevision = {rid!r}\ndown_revision = {down!r}\n"
    "branch_labels = {labels!r}\n",
    "from alembic import op\nfrom __future__ import annotations\nimport sqlalchemy as sa\n"
    "from sqlalchemy import Integer, String, func\n\nrevision = {rid!r}\ndown_revision = {down!r}\n"
    "branch_labels = {labels!r}\n",
]


def _script(rng: random.Random, index: int) -> str:
    labels = rng.choice([("expand",), ("contract",), None])
    header = HEADERS[rng.choices(range(len(HEADERS)), weights=(5, 2, 3, 1, 1, 1))[0]]
    lines = [f'"""generated {index}"""', header.format(rid=f"r{index}", down=None, labels=labels), "", "",
             "def upgrade() -> None:"]
    if rng.random() < 0.1:
        lines.append('    """Upgrade."""')
    table = f"t{rng.randint(1, 50)}"
    for _ in range(rng.randint(1, 8)):
        if rng.random() < 0.2:
            batch_table = f"b{rng.randint(1, 50)}"
            recreate = rng.choice(["", "", ", recreate='always'", ", recreate='never'", ", schema=None"])
            # ``as __debug__``: the one name only the compiler refuses to bind (running the script gives MP000)
            target = "__debug__" if rng.random() < 0.05 else "batch_op"
            lines.append(f"    with op.batch_alter_table({batch_table!r}{recreate}) as {target}:")
            for _ in range(rng.randint(1, 3)):
                lines.append(_layout(rng, f"        {target}.", _operation(rng, batch_table, True)))
            if rng.random() < 0.2:
                lines.append("        op.execute('UPDATE b SET x = 1')")
        else:
            lines.append(_layout(rng, "    op.", _operation(rng, table, False)))
        if rng.random() < 0.1:
            code = rng.choice(["MP101", "MP104", "MP102,MP103"])
            lines[-1] += f"  # migrations-policy: ignore[{code}]" + rng.choice([" reason", ""])
    if rng.random() < 0.3:
        lines.append("    pass")
    lines += ["", "", "def downgrade() -> None:", "    " + rng.choice(DOWNGRADES), ""]
    return "\n".join(lines)


#: ``downgrade()`` bodies (never run): some that only the compiler refuses, so running the script gives MP000.
DOWNGRADES = ["op.drop_table('x')", "pass", "op.drop_column('t', 'c')\n    op.drop_index(op.f('ix'), table_name='t')",
              "with op.batch_alter_table('t') as batch_op:\n        batch_op.drop_column('x')",
              "op.alter_column('t', 'c', existing_type=sa.VARCHAR(length=5), nullable=True)",
              "x = op.f('a')\n    op.drop_table(x)", "op.drop_table('x', schema='a', schema='b')", "break",
              "__debug__ = 1", "op.drop_table(__debug__=1)", "return", "for t in 'ab':\n        continue",
              "def inner(a, a):\n        pass", "from os import *", "def inner(a: (yield)):\n        pass"]

DIALECT_SETS = [("postgresql",), ("mysql",), ("sqlite",), ("postgresql", "mysql", "sqlite"), ("mysql", "postgresql")]


def test_static_findings_equal_running_the_script(tmp_path):
    rng = random.Random(SEED)
    accepted = 0
    for index in range(COUNT):
        text = _script(rng, index)
        path = tmp_path / f"s{index}.py"
        path.write_text(text)
        options = Options(dialects=rng.choice(DIALECT_SETS))
        phase = rng.choice(["expand", "contract"])
        found = static.analyse(path, phase, options)
        if found is None:
            continue
        accepted += 1
        expected = engine.analyse(path, phase, options)
        assert [h.to_list() for h in found] == [h.to_list() for h in expected], (SEED, index, options.dialects,
                                                                                 phase, text)
    # about a quarter is read (many drawn forms raise when run, or lie outside the tables): never none of them
    assert accepted >= max(3, COUNT // 20), (SEED, accepted, COUNT)


#: Findings about the script, not a dialect's verdict: MP001 ("linted from source") names the dialect whose run
#: could not finish, once for a recording several dialects share.
_ABOUT_THE_SCRIPT = frozenset({"MP001"})


def _per_dialect(hits, dialects: tuple[str, ...]) -> set[tuple[int, str, str]]:
    """(line, code, dialect) of every finding, a finding for several dialects (or none named, or about the script)
    once per dialect."""
    return {(h.line, h.code, d) for h in hits
            for d in (h.dialect.split(",") if h.dialect and h.code not in _ABOUT_THE_SCRIPT else dialects)}


def test_linting_dialects_together_gives_each_the_verdict_it_gets_alone(tmp_path):
    """One recording may serve several dialects only where it changes no dialect's verdict: the findings of a
    run for every dialect, in a drawn order, are those of a run for each dialect alone (generated scripts,
    run by ``engine`` as the worker runs them)."""
    rng = random.Random(SEED + 1)
    for index in range(max(3, COUNT // 3)):
        text = _script(rng, index)
        path = tmp_path / f"s{index}.py"
        path.write_text(text)
        dialects = tuple(rng.sample(["postgresql", "mysql", "sqlite"], 3))
        phase = rng.choice(["expand", "contract"])
        try:
            together = _per_dialect(engine.analyse(path, phase, Options(dialects=dialects)), dialects)
        except Exception as exc:  # noqa: BLE001 - a drawn form that cannot load: then alone too
            together = type(exc).__name__
        alone: set | str = set()
        for dialect in dialects:
            try:
                alone |= _per_dialect(engine.analyse(path, phase, Options(dialects=(dialect,))), (dialect,))
            except Exception as exc:  # noqa: BLE001
                alone = type(exc).__name__
                break
        assert together == alone, (f"MP_STATIC_SEED={SEED}", index, dialects, phase, text)


PLAIN_HEAD = ("from alembic import op\nimport sqlalchemy as sa\nfrom sqlalchemy.dialects import postgresql\n"
              "revision = 'a'\ndown_revision = None\n\n\ndef upgrade():\n")
DECLINED = {
    "unknown type": "    op.add_column('t', sa.Column('c', sa.Geometry()))\n",
    "type argument of another kind": "    op.add_column('t', sa.Column('c', sa.Integer(5)))\n",
    "unknown keyword": "    op.add_column('t', sa.Column('c', sa.Integer(), weird=True))\n",
    "column without type": "    op.add_column('t', sa.Column('c'))\n",
    "unknown function": "    op.add_column('t', sa.Column('c', sa.Integer(), server_default=sa.func.my_func()))\n",
    "literal_column default": "    op.alter_column('t', 'c', server_default=sa.literal_column('1'))\n",
    "bulk_insert": "    op.bulk_insert(sa.table('t', sa.column('a')), [{'a': 1}])\n",
    "inline_literal": "    op.execute(op.inline_literal('x'))\n",
    "exclude constraint": "    op.create_exclude_constraint('ex', 't', ('a', '='))\n",
    "get_bind": "    op.get_bind()\n",
    "a loop": "    for t in ('a', 'b'):\n        op.drop_column(t, 'c')\n",
    "an assignment": "    t = 'a'\n    op.drop_column(t, 'c')\n",
    "unknown op": "    op.create_sync_trigger('t')\n",
    "keyword-only by position": "    op.create_index('ix', 't', ['a'], True)\n",
    "too many positional": "    op.drop_table('t', 's')\n",
    "missing constraint column": "    op.create_table('t', sa.Column('a', sa.Integer), sa.PrimaryKeyConstraint('b'))\n",
    "duplicate column": "    op.create_table('t', sa.Column('a', sa.Integer), sa.Column('a', sa.Integer))\n",
    "computed and server_default": "    op.add_column('t', sa.Column('c', sa.Integer, sa.Computed('1'), server_default='1'))\n",
    "table name of another kind": "    op.drop_table(5)\n",
    "nested batch": "    with op.batch_alter_table('t') as b:\n        with op.batch_alter_table('u') as c:\n            c.drop_column('x')\n",
    "dialect through attribute": "    op.add_column('t', sa.Column('c', sa.dialects.postgresql.JSONB()))\n",
    "starred": "    op.drop_column(*('t', 'c'))\n",
    "multi-line attribute": "    (op\n     .drop_column)('t', 'c')\n",
}
MODULE_DECLINED = {
    "another import": "import os\n" + PLAIN_HEAD + "    op.drop_column('t', 'c')\n",
    "a name bound twice": PLAIN_HEAD.replace("revision = 'a'", "revision = 'a'\nrevision = 'b'") + "    pass\n",
    "op rebound": PLAIN_HEAD.replace("down_revision = None", "down_revision = None\nop = 5") + "    pass\n",
    "a decorator": PLAIN_HEAD.replace("def upgrade():", "@staticmethod\ndef upgrade():") + "    pass\n",
    "a default": PLAIN_HEAD.replace("def upgrade():", "def upgrade(x=1):") + "    pass\n",
    "upgrade takes an argument": PLAIN_HEAD.replace("def upgrade():", "def upgrade(op):") + "    pass\n",
    "bad annotation": PLAIN_HEAD.replace("revision = 'a'", "from typing import Optional\nrevision: Optional[str, int] = 'a'") + "    pass\n",
    "unbound annotation": PLAIN_HEAD.replace("revision = 'a'", "revision: Foo = 'a'") + "    pass\n",
    "computed value": PLAIN_HEAD.replace("revision = 'a'", "revision = 'a' + 'b'") + "    pass\n",
    "no upgrade": PLAIN_HEAD.replace("def upgrade():", "def other():") + "    pass\n",
    "compile error in downgrade": PLAIN_HEAD + "    pass\n\n\ndef downgrade():\n    break\n",
    "a shadowed builtin": PLAIN_HEAD.replace("revision = 'a'", "str = 'a'") + "    pass\n",
    "from sqlalchemy import unknown": "from sqlalchemy import Geometry\n" + PLAIN_HEAD + "    pass\n",
    # what only the compiler refuses, outside and inside ``upgrade()`` (running the script gives MP000)
    "from __future__ after an import": PLAIN_HEAD.replace("revision = 'a'", "from __future__ import annotations\n"
                                                          "revision = 'a'") + "    op.drop_column('t', 'c')\n",
    "a yield in an annotation under __future__": "from __future__ import annotations\n" + PLAIN_HEAD
    + "    op.drop_column('t', 'c')\n\n\ndef downgrade():\n    def inner(a: (yield)):\n        pass\n",
    "a batch block as __debug__": PLAIN_HEAD + "    with op.batch_alter_table('t') as __debug__:\n"
                                  "        __debug__.drop_column('c')\n",
    "a keyword __debug__": PLAIN_HEAD + "    op.drop_column('t', 'c', __debug__=1)\n",
    "a batch keyword __debug__": PLAIN_HEAD + "    with op.batch_alter_table('t', __debug__=1) as b:\n"
                                 "        b.drop_column('c')\n",
}


@pytest.mark.parametrize("case", sorted(DECLINED) + sorted(MODULE_DECLINED))
def test_what_is_outside_the_tables_is_declined(tmp_path, case):
    text = MODULE_DECLINED.get(case) or PLAIN_HEAD + DECLINED[case]
    path = tmp_path / "s.py"
    path.write_text(text)
    options = Options(dialects=("postgresql", "mysql", "sqlite"))
    assert static.analyse(path, "expand", options) is None, (case, text)
    control = tmp_path / "control.py"  # the same head with a known op is read: the decline is the case's
    control.write_text(PLAIN_HEAD + "    op.drop_column('t', 'c')\n")
    assert static.analyse(control, "expand", options) is not None


def test_a_plugin_or_a_scratch_database_disables_it(tmp_path):
    from migrations_policy.lint.offline.plugins import Plugins

    path = tmp_path / "s.py"
    path.write_text(PLAIN_HEAD + "    op.drop_column('t', 'c')\n")
    assert static.analyse(path, "expand", Options(dialects=("postgresql",))) is not None
    with_plugin = Options(dialects=("postgresql",), plugins=Plugins(configured=("myproject.ops",)))
    assert static.analyse(path, "expand", with_plugin) is None
    assert static.analyse(path, "expand", Options(dialects=("postgresql",), url="postgresql://x/y")) is None


def test_the_lines_are_those_of_the_calls(tmp_path):
    """A call over several lines records the line of its attribute (Python's frame line), as running it does."""
    path = tmp_path / "s.py"
    path.write_text(PLAIN_HEAD + "    op.drop_column(\n        't',\n        'c')\n\n    op.add_column('t',\n"
                    "        sa.Column('x', sa.Integer(), nullable=False))\n")
    options = Options(dialects=("postgresql",))
    found = static.analyse(path, "expand", options)
    assert found == engine.analyse(path, "expand", options)
    assert sorted({h.line for h in found}) == [9, 13]


def test_sql_one_dialect_reads_differently_is_judged_as_each_reads_it_in_either_order(tmp_path):
    """A script that never mentions a dialect is recorded once for every dialect, unless its SQL reads
    differently for one of them: ``$$`` quotes on PostgreSQL, not on MySQL, so the ``DROP COLUMN`` is a
    statement of its own on MySQL only.  Recorded once, its SQL was read as the first dialect's servers read
    it: linted for ``postgresql,mysql`` MySQL's drop went unseen (``mysql,postgresql`` saw it).  Both paths, both
    orders: the drop on MySQL only."""
    path = tmp_path / "s.py"
    path.write_text("from alembic import op\nrevision = 'a'\ndown_revision = None\n\n\ndef upgrade():\n"
                    "    op.execute(\"UPDATE t SET c = $$a; ALTER TABLE t DROP COLUMN f; $$\")\n")
    verdicts = []
    for dialects in (("postgresql", "mysql"), ("mysql", "postgresql")):
        options = Options(dialects=dialects)
        found = static.analyse(path, "expand", options)
        assert found == engine.analyse(path, "expand", options), dialects
        verdicts.append({(h.code, frozenset(h.dialect.split(","))) for h in found})
    assert verdicts[0] == verdicts[1]
    assert ("MP101", frozenset({"mysql"})) in verdicts[0], verdicts
    assert not any(code == "MP101" and "postgresql" in ds for code, ds in verdicts[0]), verdicts


AUTOGENERATED = '''"""add accounts

Revision ID: 1a2b3c4d5e6f
Revises: 0f9e8d7c6b5a
Create Date: 2026-11-28 10:00:00.000000

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

# revision identifiers, used by Alembic.
revision: str = '1a2b3c4d5e6f'
down_revision: Union[str, None] = '0f9e8d7c6b5a'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    # ### commands auto generated by Alembic - please adjust! ###
    op.create_table('account',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('email', sa.String(length=255), nullable=False),
    sa.Column('data', postgresql.JSONB(astext_type=sa.Text()), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index(op.f('ix_account_email'), 'account', ['email'], unique=True)
    op.add_column('user', sa.Column('account_id', sa.Integer(), nullable=True))
    op.create_foreign_key(None, 'user', 'account', ['account_id'], ['id'])
    op.alter_column('user', 'name',
               existing_type=sa.VARCHAR(length=50),
               type_=sa.String(length=100),
               existing_nullable=False)
    op.drop_column('user', 'legacy')
    with op.batch_alter_table('user', schema=None) as batch_op:
        batch_op.add_column(sa.Column('score', postgresql.DOUBLE_PRECISION(precision=53), nullable=True))
        batch_op.create_index(batch_op.f('ix_user_score'), ['score'], unique=False)
        batch_op.create_unique_constraint(batch_op.f('uq_user_score'), ['score'])
    op.create_table('audit',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('account_id', sa.Integer(), nullable=True),
    sa.ForeignKeyConstraint(['account_id'], ['account.id'], name=op.f('fk_audit_account_id_account')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_audit'))
    )
    # ### end Alembic commands ###


def downgrade() -> None:
    # ### commands auto generated by Alembic - please adjust! ###
    op.add_column('user', sa.Column('legacy', sa.VARCHAR(), autoincrement=False, nullable=True))
    op.alter_column('user', 'name',
               existing_type=sa.String(length=100),
               type_=sa.VARCHAR(length=50),
               existing_nullable=False)
    op.drop_constraint(None, 'user', type_='foreignkey')
    op.drop_column('user', 'account_id')
    op.drop_index(op.f('ix_account_email'), table_name='account')
    op.drop_table('account')
    # ### end Alembic commands ###
'''


def test_autogenerates_output_is_read(tmp_path):
    """What ``alembic revision --autogenerate`` writes (its template and its op forms) is read, not run."""
    path = tmp_path / "1a2b3c4d5e6f_add_accounts.py"
    path.write_text(AUTOGENERATED)
    for dialects in (("postgresql",), ("postgresql", "mysql", "sqlite")):
        for phase in ("expand", "contract"):
            options = Options(dialects=dialects)
            found = static.analyse(path, phase, options)
            assert found is not None and found == engine.analyse(path, phase, options), (dialects, phase)


MYSQL_ENUM_AND_SET = """from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import mysql

revision = 'e1'
down_revision = None


def upgrade():
    op.add_column('t', sa.Column('state', mysql.ENUM('new', 'done', charset='utf8mb4'), nullable=True))
    op.add_column('t', sa.Column('flags', mysql.SET('a', 'bcd'), nullable=True))
    op.alter_column('t', 'kind', existing_type=mysql.ENUM('a', 'b'), type_=mysql.ENUM('a', 'b', 'c'))
    op.alter_column('t', 'tags', existing_type=mysql.SET('x'), type_=mysql.SET('x', 'yy'))
"""


def test_mysql_enum_and_set_are_read(tmp_path):
    """``mysql.ENUM`` / ``mysql.SET`` (what autogenerate writes for MySQL's ENUM and SET columns) are read, not
    run, with the findings of running the script (an ENUM given a member more, a SET's length growing)."""
    path = tmp_path / "e1.py"
    path.write_text(MYSQL_ENUM_AND_SET)
    for dialects in (("mysql",), ("postgresql", "mysql", "sqlite")):
        options = Options(dialects=dialects)
        found = static.analyse(path, "expand", options)
        assert found is not None and found == engine.analyse(path, "expand", options), dialects
