"""The gate never lets a revision drop data that nothing moved and nobody let go (issue 23):
random tables and columns, random ones holding data, random ones dropped, random decisions
recorded (``drops_data``); the gate refuses exactly the dropped ones that hold data and no
decision covers, and ``dbsync status`` and ``migrations-policy notes`` show the decisions.
``MP_DATA_DROPS_SEEDS`` raises the number of draws (default 2; each prints its seed)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import pytest
import sqlalchemy as sa

from .conftest import let_data_go

SEEDS = [random.randrange(10**9) for _ in range(int(os.environ.get("MP_DATA_DROPS_SEEDS", "2")))]


def _models(tables: dict[str, list[str]]) -> str:
    return "".join(f'{t} = sa.Table("{t}", metadata, sa.Column("id", sa.Integer, primary_key=True)'
                   + "".join(f', sa.Column("{c}", sa.String(20))' for c in columns) + ")\n"
                   for t, columns in tables.items())


def _cli(workspace, main: str, *args):
    code = f"import sys; from migrations_policy.cli import {main}; sys.exit({main}(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=workspace.root,
                          timeout=300)


@pytest.mark.parametrize("seed", SEEDS)
def test_the_gate_refuses_exactly_the_unmoved_drops_of_data(workspace, backend, seed):
    print(f"seed {seed}")
    rng = random.Random(seed)
    tables = {f"t{i}": [f"c{j}" for j in range(rng.randint(1, 4))] for i in range(rng.randint(2, 4))}
    workspace.upgrade()
    workspace.models(_models(tables))
    workspace.revision("release n")
    workspace.upgrade()
    engine = sa.create_engine(workspace.url)
    holds: set[str] = set()  # "t" (has a row) and "t.c" (has a non-NULL value)
    with engine.begin() as conn:
        for table, columns in tables.items():
            if rng.random() < 0.7:
                filled = [c for c in columns if rng.random() < 0.5]
                conn.execute(sa.table(table, sa.column("id"), *map(sa.column, filled)).insert().values(
                    id=1, **{c: "v" for c in filled}))
                holds.add(table)
                holds.update(f"{table}.{c}" for c in filled)
    dropped_tables = [t for t in tables if rng.random() < 0.4] or [next(iter(tables))]
    kept = {t: [c for c in cols if rng.random() < 0.5] for t, cols in tables.items() if t not in dropped_tables}
    dropped = dropped_tables + [f"{t}.{c}" for t, cols in kept.items() for c in tables[t] if c not in cols]
    print("dropped:", dropped, "holding data:", sorted(holds))
    workspace.models(_models(kept))
    files = workspace.revision("release n plus 1")
    names = let_data_go(files) if "data" in files else []  # the move stubs deleted without a word
    workspace.upgrade("expand@head") if "expand" in files else None
    at_stake = [d for d in dropped if d in holds]
    decided = {d: f"reason {i}" for i, d in enumerate(d for d in at_stake if rng.random() < 0.5)}
    if decided:
        text = files["contract"].read_text()
        files["contract"].write_text(text.replace("# drops_data = {}", f"drops_data = {decided!r}"))
    refused = [d for d in at_stake if d not in decided]
    if refused:
        with pytest.raises(Exception) as info:
            workspace.upgrade("heads")
        message = str(info.value)
        for what in dropped:
            assert (f"drops {what}, which holds data" in message) == (what in refused), (what, message)
        with engine.connect() as conn:  # nothing half-applied: every dropped table is still there
            assert all(sa.inspect(conn).has_table(t) for t in dropped_tables)
        done = _cli(workspace, "dbsync_main", "-c", str(workspace.ini), "status")
        assert all(f"drops {what}, which holds data" in done.stdout for what in refused), done.stdout
        assert all(f"drops {what} with its data, by decision: {why}" in done.stdout for what, why in decided.items())
        text = files["contract"].read_text()
        decided.update({d: "let go at last" for d in refused})
        old = "# drops_data = {}" if "# drops_data = {}" in text else next(
            line for line in text.splitlines() if line.startswith("drops_data = "))
        files["contract"].write_text(text.replace(old, f"drops_data = {decided!r}"))
    workspace.upgrade("heads")
    assert sorted(names) == sorted(d.replace(".", "_") + "_moved" for d in dropped), "a move stub per drop"
    with engine.connect() as conn:
        assert not any(sa.inspect(conn).has_table(t) for t in dropped_tables)
    done = _cli(workspace, "main", "notes", "-c", str(workspace.ini), "--format", "json", "base", "heads")
    if done.returncode == 0:
        notes = json.loads(done.stdout)["notes"]
        assert {n["message"].split(" and the data")[0][len("drops "):]: n["reason"] for n in notes
                if n["code"] == "drops_data"} == decided
    else:
        raise AssertionError(done.stdout + done.stderr)
    engine.dispose()
