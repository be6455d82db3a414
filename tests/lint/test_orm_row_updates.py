"""Rows changed through an ORM session, read from the source (issue 28, labelled real scripts: superset 0ca9e5f1dacd,
d0ac08bb5b83, 9c2a5681ddfd, 9f4a086c2676, 378cecfdba9f; mlflow 90e64c465722): objects loaded by ``session.query(...)``
(directly, through a name bound to the query's result, or through a wrapper such as ``paginated_update(query)``) whose
attributes the loop assigns are UPDATEd when the session flushes: MP107 in a schema script.  ``session.merge(obj)``
updates the row when it exists: MP107 too.  A loop that only reads the rows, or assigns attributes of something
else, is no DML."""

from __future__ import annotations

import os
import random
import textwrap

SEED = int(os.environ.get("MP_ORM_SEED") or random.randrange(10 ** 9))
print(f"test_orm_row_updates: MP_ORM_SEED={SEED}")

HEAD = "from mp_absent_models_q import Model, paginated_update\nfrom sqlalchemy import orm\n"


def _loop(rng: random.Random, row: str, writes: bool) -> str:
    session = rng.choice(["session", "db_session", "sess"])
    query = rng.choice([f"{session}.query(Model)", f"{session}.query(Model).filter(Model.kind == 'x')",
                        f"{session}.query(Model).all()"])
    lines = [f"{session} = orm.Session(bind=op.get_bind())"]
    shape = rng.choice(["direct", "bound", "wrapped"])
    if shape == "bound":
        lines.append(f"rows = {query}")
        source = "rows"
    elif shape == "wrapped":
        source = f"paginated_update({query})"
    else:
        source = query
    body = [f"value = {row}.params or ''"]
    if writes:
        assignment = rng.choice([f"{row}.params = value.upper()", f"{row}.count += 1", f"{row}.flag = True"])
        if rng.random() < 0.5:
            assignment = "try:\n    " + assignment + "\nexcept Exception:\n    pass"
        if rng.random() < 0.5:
            assignment = "if value:\n" + textwrap.indent(assignment, "    ")
        body.append(assignment)
    else:
        body.append(rng.choice(["print(value)", "other.params = value", "seen[" + row + ".id] = value"]))
    lines.append(f"for {row} in {source}:\n" + textwrap.indent("\n".join(body), "    "))
    lines.append(f"{session}.commit()")
    return "\n".join(lines)


def test_rows_assigned_in_a_loop_over_a_query_are_updates(lint_body):
    rng = random.Random(SEED)
    for _ in range(4):
        row = rng.choice(["obj", "slc", "entry", "table"])
        writes = _loop(rng, row, True)
        run = lint_body(writes, "postgresql", "expand", HEAD)
        assert "MP107" in run.codes, (SEED, writes, run.json)
        reads = "other = object()\nseen = {}\n" + _loop(rng, row, False)
        run = lint_body(reads, "postgresql", "expand", HEAD)
        assert "MP107" not in run.codes, (SEED, reads, run.json)


def test_session_merge_may_update_an_existing_row(lint_body):
    body = "session = orm.Session(bind=op.get_bind())\nsession.merge(Model(id=1, params='x'))\nsession.commit()"
    assert "MP107" in lint_body(body, "postgresql", "expand", HEAD).codes
