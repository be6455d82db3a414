"""A table named by what could not be imported (issue 28, labelled real scripts: mlflow 1a0cddfcaa16, 76601a5f987d):
``op.create_table(Model.__tablename__, ...)`` then ``op.create_index(..., Model.__tablename__, ...)`` read from the
source, ``Model`` from a package that is not installed.  The name is unknown, but the same module-level expression
names the same table within the script: the index is on the table the script creates (no MP113), as with the
package installed; an index on a *different* unknown table, or on a name a loop rebinds, is still MP113."""

from __future__ import annotations

import os
import random
import sys
import textwrap

SEED = int(os.environ.get("MP_UNKNOWN_TABLE_SEED") or random.randrange(10 ** 9))
print(f"test_unknown_table_names: MP_UNKNOWN_TABLE_SEED={SEED}")


def _package(root, name: str, classes: dict[str, str]) -> None:
    (root / name).mkdir()
    (root / name / "__init__.py").write_text("".join(
        f"class {cls}:\n    __tablename__ = {table!r}\n\n" for cls, table in classes.items()))


def _script(rng: random.Random, package: str, classes: list[str], existing: str) -> tuple[str, set[str]]:
    new = rng.choice(classes)
    ref = f"{new}.__tablename__"
    lines = [f'op.create_table({ref}, sa.Column("id", sa.Integer, primary_key=True), sa.Column("c", sa.String(5)))']
    expected = set()
    for k in range(rng.randint(1, 3)):
        style = rng.choice(["op", "batch", "keyword"])
        if style == "op":
            lines.append(f'op.create_index("ix_{k}", {ref}, ["c"])')
        elif style == "keyword":
            lines.append(f'op.create_index("ix_{k}", table_name={ref}, columns=["c"])')
        else:
            lines.append(f'with op.batch_alter_table({ref}) as batch_op:\n    batch_op.create_index("ix_{k}", ["c"])')
    if rng.random() < 0.6:  # an index on a table the script does not create: MP113 with or without the package
        lines.append(f'op.create_index("ix_other", {existing}.__tablename__, ["c"])')
        expected.add("MP113")
    head = f"from {package} import {', '.join(classes)}\n"
    return head, "\n".join(lines), expected


def test_the_same_unknown_name_is_the_same_table(tmp_path, run_lint, monkeypatch):
    from .conftest import script

    rng = random.Random(SEED)
    monkeypatch.chdir(tmp_path)
    package = "mpmodels_" + "".join(rng.choice("abcdef") for _ in range(6))
    classes = {f"M{i}": f"table_{i}_{rng.randrange(1000)}" for i in range(3)}
    names = list(classes)
    for round_ in range(3):
        existing = rng.choice(names)
        head, body, expected = _script(rng, package, [n for n in names if n != existing] or names, existing)
        head = f"from {package} import {', '.join(names)}\n"
        path = tmp_path / f"rev_{round_}.py"
        path.write_text(script(body, revision=f"r{round_}", extra=head))
        missing = run_lint("--format", "json", "--phase", "expand", "--dialect", "postgresql", path)
        rules = {f["code"] for f in missing.json["findings"] if f["code"].startswith("MP1")}
        assert "MP001" in missing.codes, (SEED, body, missing.json)  # read from its source, saying so
        assert rules == expected, (SEED, body, missing.json)
        # the reference: the same script with the package importable
        _package(tmp_path, package, classes) if not (tmp_path / package).exists() else None
        monkeypatch.syspath_prepend(str(tmp_path))
        present = run_lint("--format", "json", "--phase", "expand", "--dialect", "postgresql", path)
        assert {f["code"] for f in present.json["findings"] if f["code"].startswith("MP1")} == expected, (SEED, body)
        (tmp_path / package / "__init__.py").unlink()
        (tmp_path / package).rmdir()
        sys.modules.pop(package, None)


def test_a_rebound_local_name_is_not_assumed_to_be_the_same_table(lint_body):
    body = textwrap.dedent("""
        for name in missing_pkg.NAMES:
            op.create_table(name, sa.Column("id", sa.Integer, primary_key=True))
        op.create_index("ix", name, ["id"])
    """)
    run = lint_body(body, "postgresql", "expand", "import missing_pkg_xyzzy as missing_pkg\n")
    assert "MP113" in run.codes, run.json
