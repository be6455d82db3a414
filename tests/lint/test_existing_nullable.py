"""MP104 honours ``existing_nullable`` (issue 28, neutron's type changes): ``alter_column(..., nullable=False,
existing_nullable=False)`` does not make the column NOT NULL -- it already is -- whether the script runs offline or
is read from its source."""

from __future__ import annotations

import os
import random

from .conftest import script

SEED = int(os.environ.get("MP_NULLABLE_SEED") or random.randrange(10 ** 9))
print(f"test_existing_nullable: MP_NULLABLE_SEED={SEED}")
FORCE_SOURCE = 'cols = sa.inspect(op.get_bind()).get_columns("x")\n'


def test_set_not_null_only_when_the_column_was_nullable(tmp_path, run_lint):
    rng = random.Random(SEED)
    for case in range(8):
        nullable = rng.choice([False, True])
        existing = rng.choice([None, False, True])
        extra = rng.choice(["", ", type_=sa.BigInteger()", ", existing_type=sa.Integer()",
                            ", existing_server_default='0'"])
        source = rng.choice([False, True])
        table, column = f"t{rng.randrange(10 ** 6)}", f"c{rng.randrange(10 ** 6)}"
        keywords = f"nullable={nullable}" + (f", existing_nullable={existing}" if existing is not None else "")
        body = (FORCE_SOURCE if source else "") + f'op.alter_column("{table}", "{column}", {keywords}{extra})'
        path = tmp_path / f"r{case}.py"
        path.write_text(script(body))
        run = run_lint("--format", "json", "--phase", "expand", "--dialect", "postgresql", path)
        flagged = bool(run.findings("MP104"))
        assert flagged == (nullable is False and existing is not False), (SEED, body, run.json)
        assert not run.findings("MP000"), (SEED, body, run.json)
