"""``migrations-policy notes FROM TO``: every acknowledged finding of the revisions in the range,
with its reason, and nothing else (ignores without a reason, revisions outside the range).

The revisions are generated from a seed: each gets a random set of unsafe expand operations,
each silenced by an ignore comment at the end of its line or on the line above, with or
without a reason.
"""

from __future__ import annotations

import json
import random

import pytest

from migrations_policy import cli

from .helpers import copy_example, forget_example_modules

#: (source of one unsafe expand operation, the rule it triggers)
OPERATIONS = [
    ('op.drop_column("nodes", "uuid")', "MP101"),
    ('op.create_index("ix_{n}", "ports", ["address"])', "MP113"),
    ('op.drop_table("ports")', "MP101"),
]


def _write_revisions(root, seed: int) -> tuple[list[str], set[tuple[str, str, str]], set[tuple[str, str, str]]]:
    rng = random.Random(seed)
    previous, ids = "r2_meta_display_name_version", []
    acknowledged, outside = set(), set()
    for number in range(5):
        ident = f"g{seed % 1000}_{number}"
        body = []
        expected = set()
        for k in range(rng.randint(1, 3)):
            source, code = rng.choice(OPERATIONS)
            source = source.format(n=f"{number}_{k}")
            reason = rng.choice(["", f"reason {number}.{k}: the table is tiny", f"decided in review #{k}"])
            comment = f"# migrations-policy: ignore[{code}] {reason}".rstrip()
            if rng.random() < 0.5:
                body += [f"    {source}  {comment}"]
            else:
                body += [f"    {comment}", f"    {source}"]
            if reason:
                expected.add((ident, code, reason))
        (root / "migrations" / "versions" / "expand" / f"{ident}.py").write_text(
            "from alembic import op\nimport sqlalchemy as sa\n\n"
            f"revision = {ident!r}\ndown_revision = {previous!r}\nbranch_labels = None\ndepends_on = None\n\n\n"
            "def upgrade() -> None:\n" + "\n".join(body) + "\n\n\ndef downgrade() -> None:\n    pass\n")
        (acknowledged if number >= 1 else outside).update(expected)
        ids.append(ident)
        previous = ident
    return ids, acknowledged, outside


@pytest.mark.parametrize("seed", [random.randrange(10**6) for _ in range(3)])
def test_notes_export_exactly_the_acknowledged_findings(tmp_path, capsys, seed):
    forget_example_modules()
    ini = copy_example(tmp_path)
    ids, acknowledged, outside = _write_revisions(ini.parent, seed)
    capsys.readouterr()
    assert cli.main(["notes", ids[0], ids[-1], "-c", str(ini), "--format", "json"]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert {(n["revision"], n["code"], n["reason"]) for n in notes} == acknowledged, seed
    assert not outside & {(n["revision"], n["code"], n["reason"]) for n in notes}
    assert all(n["message"] and n["dialects"] for n in notes)

    assert cli.main(["notes", ids[0], ids[-1], "-c", str(ini), "--format", "yaml"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == ["---", "upgrade:" if acknowledged else "upgrade: []"]
    items = [json.loads(line.removeprefix("  - ")) for line in lines[2:]]
    assert len(items) == len(notes)
    assert all(any(reason in item for item in items) for _, _, reason in acknowledged)


def test_notes_with_an_unknown_revision_is_one_line(tmp_path, capsys):
    ini = copy_example(tmp_path)
    assert cli.main(["notes", "base", "no_such_revision", "-c", str(ini)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no_such_revision" in err and "Traceback" not in err
