"""Plain scripts are analysed in the worker itself, without a child per script (issue 28, cold speed): their
verdict is the one a forked child gives.  Each generated plain script has a twin that differs by one harmless
top-level ``import os`` (not plain: analysed in a child); both must get the same findings.  And nothing that can
run code of its own is ever plain."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

from migrations_policy.lint.offline.plain import is_plain

ROOT = str(Path(__file__).resolve().parents[2])
SEED = int(os.environ.get("MP_PLAIN_SEED") or random.randrange(10 ** 9))
print(f"test_plain_scripts: MP_PLAIN_SEED={SEED}")
RUNNER = "import sys; from migrations_policy.cli import main; sys.exit(main(sys.argv[1:]))"

ARGS = ['sa.Integer()', 'sa.String({n})', 'sa.Text', 'sa.BigInteger()', 'postgresql.JSONB()', 'sa.Boolean()',
        'sa.Enum("a", "b", name="e{n}")', 'sa.Numeric(10, 2)']
OPS = [
    'op.add_column("t{n}", sa.Column("c{n}", {type}, nullable={bool}{default}))',
    'op.drop_column("t{n}", "c{n}")',
    'op.create_index(op.f("ix_{n}"), "t{n}", ["c{n}"], unique={bool}{concurrently})',
    'op.alter_column("t{n}", "c{n}", nullable={bool}, existing_type={type}{existing})',
    'op.execute("UPDATE t{n} SET c{n} = 1")',
    'op.execute(sa.text("ALTER TABLE t{n} ADD COLUMN x{n} integer NOT NULL"))',
    'op.create_table("n{n}", sa.Column("id", sa.Integer, primary_key=True), sa.Column("ts", sa.DateTime(), '
    'server_default=sa.func.now()))',
    'op.create_foreign_key("fk{n}", "t{n}", "p", ["p_id"], ["id"]{not_valid})',
    'op.create_unique_constraint("uq{n}", "t{n}", ["c{n}"])',
    'op.rename_table("t{n}", "u{n}")',
    'op.drop_index("ix_{n}", table_name="t{n}")',
    'op.create_check_constraint("ck{n}", "t{n}", "c{n} > 0")',
]
BATCH = 'with op.batch_alter_table("t{n}") as batch_op:\n        batch_op.drop_column("d{n}")\n        ' \
        'batch_op.add_column(sa.Column("e{n}", {type}, nullable={bool}))'


def _op(rng: random.Random) -> str:
    template = rng.choice(OPS + [BATCH])
    return template.format(n=rng.randrange(1000), type=rng.choice(ARGS).format(n=rng.randint(1, 300)),
                           bool=rng.choice([True, False]),
                           default=rng.choice(["", ', server_default="0"', ", server_default=sa.text('1')"]),
                           concurrently=rng.choice(["", ", postgresql_concurrently=True"]),
                           existing=rng.choice(["", ", existing_nullable=False", ", existing_nullable=True"]),
                           not_valid=rng.choice(["", ", postgresql_not_valid=True"]))


def _script(rng: random.Random, rid: str, down: str | None, labels) -> str:
    body = "\n".join("    " + _op(rng) for _ in range(rng.randint(1, 6)))
    header = rng.choice(['revision = {rid!r}\ndown_revision = {down!r}\n',
                         'revision: str = {rid!r}\ndown_revision: Union[str, Sequence[str], None] = {down!r}\n'])
    return (f'"""generated"""\nfrom typing import Sequence, Union\n\nfrom alembic import op\nimport sqlalchemy as sa\n'
            f'from sqlalchemy.dialects import postgresql\n\n' + header.format(rid=rid, down=down)
            + f"branch_labels = {labels!r}\n\n\ndef upgrade() -> None:\n{body}\n\n\ndef downgrade() -> None:\n"
            "    op.drop_table('x')\n")


def _lint(cwd: Path, directory: Path) -> dict:
    env = {**os.environ, "MIGRATIONS_POLICY_CACHE_DIR": "off", "PYTHONPATH": ROOT}
    proc = subprocess.run([sys.executable, "-c", RUNNER, "lint", "--format", "json", str(directory)], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode in (0, 1), (SEED, proc.stderr[-2000:])
    return json.loads(proc.stdout)


def test_a_plain_script_gets_the_verdict_a_child_gives(tmp_path):
    rng = random.Random(SEED)
    plain, forked = tmp_path / "plain" / "versions", tmp_path / "forked" / "versions"
    plain.mkdir(parents=True)
    forked.mkdir(parents=True)
    down = None
    for i in range(8):
        rid = f"r{i:02d}"
        text = _script(rng, rid, down, ("expand",) if down is None else None)
        assert is_plain(text), (SEED, text)
        twin = text.replace("import sqlalchemy as sa\n", "import sqlalchemy as sa\nimport os\n")
        assert not is_plain(twin)
        (plain / f"{rid}.py").write_text(text)
        (forked / f"{rid}.py").write_text(twin)
        down = rid

    def findings(report, shift):  # the twin's lines after its 'import os' (line 6) are one further down
        return sorted((Path(f["path"]).name, f["line"] - (shift and f["line"] > 6), f["code"], f["dialect"],
                       f["message"]) for f in report["findings"])

    a, b = _lint(tmp_path, plain), _lint(tmp_path, forked)
    assert findings(a, False) == findings(b, True), SEED
    assert a["files"] == b["files"] == 8


def test_nothing_that_runs_its_own_code_is_plain():
    base = ('from alembic import op\nimport sqlalchemy as sa\nrevision = "a"\ndown_revision = None\n\n'
            'def upgrade():\n    op.drop_column("t", "c")\n')
    assert is_plain(base)
    rng = random.Random(SEED)
    hostile = [
        ("import os\n", "top"), ("from . import x\n", "top"), ("X = open('f').read()\n", "top"),
        ("class A:\n    pass\n", "top"), ("if True:\n    pass\n", "top"), ("X = [i for i in range(9)]\n", "top"),
        ("@staticmethod\ndef f():\n    pass\n", "top"), ("def f(x=print('hi')):\n    pass\n", "top"),
        ("    print('x')\n", "body"), ("    op.get_bind()\n", "body"), ("    op.execute(open('f').read())\n", "body"),
        ("    op.execute(sa.create_engine('sqlite://'))\n", "body"), ("    x = 1\n", "body"),
        ("    op.add_column('t', sa.Column('c', sa.String(10 ** 9)))\n", "body"),
        ("    op.execute(sa.text('x').__class__.__subclasses__())\n", "body"), ("    while True:\n        pass\n", "body"),
        ("    op.drop_column(*['t', 'c'])\n", "body"), ("    op.my_custom_op('t')\n", "body"),
        ("    op.execute(sa.event.listen)\n", "body"), ("    op.add_column('t', sa.Column('c', sa.orm.Session()))\n", "body"),
    ]
    for text, where in rng.sample(hostile, len(hostile)):
        source = text + base if where == "top" else base + text
        assert not is_plain(source), (SEED, source)
