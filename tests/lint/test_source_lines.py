"""Every finding of a script read from its source (MP001: it cannot run offline) names a line of
the script, and an operation's finding the line of the statement that issues it: a
``batch_alter_table`` block that recreates its table is reported at its ``with`` (the block's
context manager is entered by the source reader, not by a frame of the script: its line was 0).
Drawn scripts: an inspection first (so the whole body is read from source), then batch blocks
that recreate or not and plain operations, in drawn order, with drawn blank lines between."""

from __future__ import annotations

import random

import pytest

from .conftest import script

#: (lines of a batch block's body, recreates on SQLite)
BATCH_BODIES = [
    (['batch_op.alter_column("{c}", type_=sa.String(300), existing_type=sa.String(30))'], True),
    (['batch_op.drop_column("{c}")'], True),
    (['batch_op.alter_column("{c}", nullable=False, existing_type=sa.Integer())'], True),
    (['batch_op.add_column(sa.Column("{c}_new", sa.Integer(), nullable=True))'], False),
    (['batch_op.add_column(sa.Column("{c}_x", sa.Integer(), nullable=True))',
      'batch_op.drop_column("{c}")'], True),
]
PLAIN = ['op.drop_table("gone_{i}")', 'op.create_index("ix_{i}", "t_{i}", ["a"])',
         'op.add_column("t_{i}", sa.Column("c", sa.Integer(), nullable=True))']


def _drawn(rng: random.Random) -> tuple[str, dict[int, str]]:
    """A body and the line (of the body) of each batch block that recreates, by table."""
    lines = ['insp = sa.inspect(op.get_bind())', 'names = insp.get_table_names()']
    recreating: dict[int, str] = {}
    for i in range(rng.randint(1, 6)):
        lines += [""] * rng.randint(0, 2)
        if rng.random() < 0.6:
            body, recreates = rng.choice(BATCH_BODIES)
            table = f"t_{i}"
            args = f'"{table}"' + rng.choice(["", ", schema=None", ', recreate="auto"'])
            if rng.random() < 0.3:  # the call spread over lines, as formatters write it
                lines += [f"with op.batch_alter_table(", f"    {args}", ") as batch_op:"]
                start = len(lines) - 3
            else:
                lines.append(f"with op.batch_alter_table({args}) as batch_op:")
                start = len(lines) - 1
            lines += ["    " + b.format(c=f"c{i}") for b in body]
            if recreates:
                recreating[start] = table
        else:
            lines.append(rng.choice(PLAIN).format(i=i))
    return "\n".join(lines), recreating


@pytest.mark.parametrize("seed", [random.randrange(2**32) for _ in range(3)] + [1, 2])
def test_source_read_findings_name_their_lines(seed, lint_body):
    rng = random.Random(seed)
    body, recreating = _drawn(rng)
    text = script(body)
    first = text.splitlines().index("def upgrade():") + 2  # the body's first line, 1-based
    run = lint_body(body, "sqlite")
    print(f"seed {seed}")  # (after the run: its JSON is read from the captured stdout)
    assert "MP001" in run.codes, run.out
    total = len(text.splitlines())
    for finding in run.json["findings"]:
        assert 1 <= finding["line"] <= total, f"seed {seed}: {finding['code']} at line {finding['line']}: {finding['message']}"
    found = sorted(f["line"] for f in run.findings("MP151"))
    # the script's line of each recreating with (the body starts after "def upgrade():")
    expected = sorted(first + offset for offset in recreating)
    assert found == expected, f"seed {seed}:\n{text}\nMP151 at {found}, expected {expected}"
