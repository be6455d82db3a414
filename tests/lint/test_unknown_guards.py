"""A guard whose test uses what could not be imported is unknown (issue 28, labelled real script: dagster 043,
``if not has_table("t"): return`` with ``has_table`` from a package whose dependencies are missing): both paths are
read, so the operation after the guard is judged.  The placeholder of a missing name must never give the test a
truth value (it made the scan return at once: no op, no finding)."""

from __future__ import annotations

import os
import random

SEED = int(os.environ.get("MP_GUARD_UNKNOWN_SEED") or random.randrange(10 ** 9))
print(f"test_unknown_guards: MP_GUARD_UNKNOWN_SEED={SEED}")

OPS = {  # op -> the finding on an existing PostgreSQL table in expand
    'op.create_index("ix_a", "t", ["a"])': "MP113",
    'op.create_index("ix_a", "t", ["a"], postgresql_concurrently=True)': "MP130",
    'op.drop_column("t", "a")': "MP101",
    'op.create_unique_constraint("uq_a", "t", ["a"])': "MP111",
}


def test_an_operation_behind_a_guard_on_a_missing_helper_is_judged(lint_body):
    rng = random.Random(SEED)
    for _ in range(2):
        helper = rng.choice(["has_table", "has_index", "table_exists", "column_missing"])
        call = f'{helper}("t"{rng.choice(["", ", " + repr("a")])})'
        operation, code = rng.choice(list(OPS.items()))
        head = f"from mp_absent_pkg_{rng.randrange(10 ** 6)}.migration.utils import {helper}\n"
        for test in (call, f"not {call}", f"{call} and True", f"not ({call} or False)"):
            for body in (f"if {test}:\n    return\n{operation}", f"if {test}:\n    {operation}"):
                run = lint_body(body, "postgresql", "expand", head)
                assert code in run.codes and "MP001" in run.codes, (SEED, body, run.json)
