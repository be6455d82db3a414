"""Dialect guards are honoured when the script is read from its source (issue 28, dagster's
``011_wipe_schedules_table_for_0_10_0_sqlite_2.py``): a script that inspects the database cannot run offline, but
the inspector's dialect is known, so ``if "sqlite" not in inspector.dialect.dialect_description: return`` ends the
PostgreSQL and MySQL readings before the drop."""

from __future__ import annotations

import os
import random

from .conftest import script

SEED = int(os.environ.get("MP_GUARD_SEED") or random.randrange(10 ** 9))
print(f"test_dialect_guards: MP_GUARD_SEED={SEED}")
DIALECTS = ("postgresql", "mysql", "sqlite")
GUARDS = [
    'inspector = sa.inspect(op.get_bind())\nif "{d}" not in inspector.dialect.dialect_description:\n    return\n',
    'inspector = sa.inspect(op.get_bind())\nif inspector.dialect.name != "{d}":\n    return\n',
    'bind = op.get_bind()\ninspector = sa.inspect(bind)\nif bind.dialect.name != "{d}":\n    return\n',
]


def test_a_guard_read_from_the_source_keeps_the_other_dialects_out(tmp_path, run_lint):
    rng = random.Random(SEED)
    for case in range(4):
        dialect = rng.choice(DIALECTS)
        guard = rng.choice(GUARDS).format(d=dialect)
        table = f"t{rng.randrange(10 ** 6)}"
        tables = 'names = inspector.get_table_names()\n' if rng.random() < 0.5 else ""
        body = guard + tables + f'op.drop_table("{table}")'
        path = tmp_path / f"g{case}.py"
        path.write_text(script(body))
        run = run_lint("--format", "json", "--phase", "expand", path)
        dropped = {d for f in run.findings("MP101") for d in f["dialect"].split(",")}
        assert dropped == {dialect}, (SEED, body, run.json)
        assert not run.findings("MP000"), (SEED, body)
