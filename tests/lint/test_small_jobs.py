"""A job of one or two scripts (pre-commit on the changed files, issue 28): the worker imports what only a forked
child needs (``gate.operations``) before its first fork, never when every script is plain; ``sqlalchemy.orm``
(~0.1 CPU-s) is bound but executed only where a script reaches for it (``worker._orm_on_first_use``) -- and the
verdicts are those the same scripts get in a large job (batches, everything imported first), including scripts
that use ``sa.orm`` without importing it in every way drawn here (an attribute, ``from sqlalchemy import orm``,
``getattr``, ``dir()``, at the top level, beside an import that is missing) and one that reads the error of an
attribute SQLAlchemy does not have."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

from tests.lint.test_plain_scripts import _script

ROOT = str(Path(__file__).resolve().parents[2])
SEED = int(os.environ.get("MP_SMALL_JOB_SEED") or random.randrange(10 ** 9))
print(f"test_small_jobs: MP_SMALL_JOB_SEED={SEED}")
RUNNER = "import sys; from migrations_policy.cli import main; sys.exit(main(sys.argv[1:]))"

#: Not plain: analysed in a forked child.  ``sa.orm`` is used without ``import sqlalchemy.orm``.
ORM_USER = ('"""uses sa.orm"""\nfrom alembic import op\nimport sqlalchemy as sa\n\nrevision = {rid!r}\n'
            'down_revision = {down!r}\nbranch_labels = {labels!r}\n\n\ndef upgrade():\n'
            '    Session = sa.orm.Session\n    op.drop_column("users", "orm_{rid}")\n')
#: Not plain, each a way of reaching ``sqlalchemy.orm`` without ``import sqlalchemy.orm`` (or of probing whether it
#: is there): the verdict names what the script saw (its column name), so a difference in what it saw is a
#: difference in the findings.
ORM_WAYS = {
    "orm_from": "    from sqlalchemy import orm\n    op.drop_column('users', 'from_' + orm.Session.__name__)\n",
    "orm_getattr": "    op.drop_column('users', 'getattr_' + getattr(sa, 'orm').Session.__name__)\n",
    "orm_hasattr": "    op.drop_column('users', 'hasattr_' + str(hasattr(sa, 'orm')))\n",
    "orm_dir": ("    import types\n    op.drop_column('users', 'dir_' + str('orm' in dir(sa)) + "
                "str(isinstance(sa.orm, types.ModuleType)) + str('orm' in vars(sa)))\n"),
    "orm_modules": ("    import sys\n    op.drop_column('users', 'modules_' + str('sqlalchemy.orm' in sys.modules)"
                    " + sa.orm.Session.__module__.replace('.', '_'))\n"),
    "orm_submodule": ("    import sqlalchemy.orm.session as s\n    op.drop_column('users', 'sub_' + s.Session.__name__"
                      " + str(s is sa.orm.session))\n"),
    "no_attribute": ("    try:\n        sa.NoSuchName\n    except AttributeError as exc:\n"
                     "        op.drop_column('users', ''.join(c if c.isalnum() else '_' for c in str(exc)))\n"),
}
#: Module level: ``sa.orm`` used while the module is loaded (beside an import that is missing: the partial load).
ORM_TOP = ('"""uses sa.orm at the top level"""\nfrom alembic import op\nimport sqlalchemy as sa\n{missing}'
           'Base = sa.orm.declarative_base()\n\nrevision = {rid!r}\ndown_revision = {down!r}\n'
           'branch_labels = {labels!r}\n\n\ndef upgrade():\n    op.drop_column("users", "top_" + Base.__name__)\n')
#: Not plain: a custom operation of our own (registered by ``gate.operations``).
GATE_USER = ('"""requires a data migration"""\nfrom alembic import op\nimport sqlalchemy as sa\n\nrevision = {rid!r}\n'
             'down_revision = {down!r}\nbranch_labels = {labels!r}\n\n\ndef upgrade():\n'
             '    op.require_data_migrations("m_{rid}")\n    op.drop_column("users", "g_{rid}")\n')
#: Not plain: imports pygments (hidden from mako while the worker imports alembic, visible to scripts).
PYGMENTS_USER = ('"""imports pygments"""\nimport pygments.lexers\nfrom alembic import op\nimport sqlalchemy as sa\n\n'
                 'revision = {rid!r}\ndown_revision = {down!r}\nbranch_labels = {labels!r}\n\n\ndef upgrade():\n'
                 '    assert pygments.lexers.get_lexer_by_name("sql")\n    op.drop_column("users", "p_{rid}")\n')
#: In the worker process, after it served *job*: was sqlalchemy.orm executed (its ``session`` module imported)?
SERVE = ("import marshal, sys\nfrom migrations_policy.lint.sandbox import worker\n"
         "worker.serve(marshal.loads(sys.stdin.buffer.read()))\nsys.stdout.flush()\n"
         "print('sqlalchemy.orm.session' in sys.modules, file=sys.stderr)\n"
         "print(repr(sys.modules.get('pygments', 'absent')), file=sys.stderr)\n")


def _text(rng: random.Random, kind: str, rid: str, down, labels) -> str:
    if kind == "plain":
        return _script(rng, rid, down, labels)
    if kind in ORM_WAYS:
        return ('"""reaches for sa.orm"""\nfrom alembic import op\nimport sqlalchemy as sa\n\n'
                f'revision = {rid!r}\ndown_revision = {down!r}\nbranch_labels = {labels!r}\n\n\n'
                f'def upgrade():\n{ORM_WAYS[kind]}')
    if kind in ("orm_top", "orm_top_missing"):
        missing = "import not_installed_anywhere_mp\n" if kind == "orm_top_missing" else ""
        return ORM_TOP.format(rid=rid, down=down, labels=labels, missing=missing)
    return {"orm": ORM_USER, "gate": GATE_USER, "pygments": PYGMENTS_USER}[kind].format(rid=rid, down=down,
                                                                                       labels=labels)


def _lint(cwd: Path, files: list[Path]) -> dict:
    env = {**os.environ, "MIGRATIONS_POLICY_CACHE_DIR": "off", "PYTHONPATH": ROOT}
    proc = subprocess.run([sys.executable, "-c", RUNNER, "lint", "--format", "json", "--phase", "expand",
                           *map(str, files)], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode in (0, 1), (SEED, proc.stderr[-2000:])
    return json.loads(proc.stdout)


def _findings(report: dict, name: str) -> list:
    return sorted((f["line"], f["code"], f["dialect"], f["message"]) for f in report["findings"]
                  if Path(f["path"]).name == name)


KINDS = ["plain", "plain", "orm", "gate", "pygments", *ORM_WAYS, "orm_top", "orm_top_missing"]


def test_one_or_two_scripts_get_the_verdicts_of_a_large_job(tmp_path):
    rng = random.Random(SEED)
    for round_ in range(4):
        directory = tmp_path / f"round{round_}"
        directory.mkdir()
        kinds = [rng.choice(KINDS) for _ in range(rng.choice([1, 2]))]
        fillers = ["plain"] * 3
        files, down = [], None
        for i, kind in enumerate(kinds + fillers):
            rid = f"r{round_}{i}"
            path = directory / f"{rid}.py"
            path.write_text(_text(rng, kind, rid, down, ("expand",) if down is None else None))
            files.append(path)
            down = rid
        small = _lint(tmp_path, files[:len(kinds)])
        large = _lint(tmp_path, files)
        assert small["files"] == len(kinds), (SEED, kinds)
        for path, kind in zip(files, kinds):
            found = _findings(small, path.name)
            assert found == _findings(large, path.name), (SEED, kinds, path.read_text())
            assert not any(code == "MP000" for _, code, _, _ in found), (SEED, kind, found)
            if kind != "plain":  # it ran: its drop is judged (MP101), not an error
                assert any(code == "MP101" for _, code, _, _ in found), (SEED, kind, found)


def test_a_worker_of_one_or_two_scripts_executes_the_orm_only_in_a_child_that_uses_it(tmp_path):
    from migrations_policy.lint.options import Options
    from migrations_policy.lint.sandbox.parallel import worker_job

    rng = random.Random(SEED)
    for round_ in range(3):
        kinds = [rng.choice(KINDS) for _ in range(rng.choice([1, 2]))]
        if round_ == 0:
            kinds = ["plain"] * len(kinds)
        tasks, down = [], None
        for i, kind in enumerate(kinds):
            rid = f"w{round_}{i}"
            path = tmp_path / f"{rid}.py"
            path.write_text(_text(rng, kind, rid, down, ("expand",) if down is None else None))
            tasks.append((i, path, "expand"))
            down = rid
        job = worker_job(tasks, Options(dialects=("postgresql",)), workers=2)
        import marshal

        proc = subprocess.run([sys.executable, "-c", SERVE], input=marshal.dumps(job), cwd=tmp_path,
                              env={**os.environ, "PYTHONPATH": ROOT}, capture_output=True, timeout=600)
        assert proc.returncode == 0, (SEED, proc.stderr[-2000:])
        imported, hidden = proc.stderr.decode().strip().splitlines()[-2:]
        # (no script of these imports sqlalchemy.orm at its top level, which the worker would pre-import for all)
        assert imported == "False", (SEED, kinds, proc.stderr[-2000:])
        # mako's highlighter is not imported with alembic; pygments is never left hidden (None) from the scripts
        # (one that imports it has it pre-imported by the worker, as any installed package it imports)
        assert hidden != "None" and (hidden == "'absent'") == ("pygments" not in kinds), (SEED, kinds, hidden)
