"""Phases as alembic sees them: headers resolved like the imported module, and MP121 (issue 13)."""

from __future__ import annotations

import itertools
import json
import runpy
import sys

import pytest

from migrations_policy.lint.script.headers import read_header

from .conftest import script

MIGRATION_MODULE = "EXPAND_BRANCH = 'expand'\nCONTRACT_BRANCH = 'contract'\nLABELS = (CONTRACT_BRANCH,)\n"

#: Ways real histories write a header; {label} is "EXPAND" or "CONTRACT".
WRITINGS = {
    "one_line": 'revision = "r2"; down_revision = "r1"; branch_labels = ("{lower}",)',
    "one_line_spaces": 'revision="r2" ;down_revision=("r1",);  branch_labels=["{lower}"]',
    "annotated": 'revision: str = "r2"\ndown_revision: Union[str, None] = "r1"\nbranch_labels: tuple = ("{lower}",)',
    "same_file_constant": '{label}_BRANCH = "{lower}"\nrevision = "r2"\ndown_revision = "r1"\nbranch_labels = ({label}_BRANCH,)',
    "from_package_import_module": 'from proj.db import migration\nrevision = "r2"\ndown_revision = "r1"\n'
                                  'branch_labels = (migration.{label}_BRANCH,)',
    "import_module_as": 'import proj.db.migration as mig\nrevision = "r2"\ndown_revision = "r1"\n'
                        'branch_labels = (mig.{label}_BRANCH,)',
    "dotted_import": 'import proj.db.migration\nrevision = "r2"\ndown_revision = "r1"\n'
                     'branch_labels = (proj.db.migration.{label}_BRANCH,)',
    "from_module_import_name": 'from proj.db.migration import {label}_BRANCH as LABEL\nrevision = "r2"\n'
                               'down_revision = "r1"\nbranch_labels = (LABEL,)',
    "revision_from_constant": 'REV = "r2"\nrevision = REV\ndown_revision = "r1"\nbranch_labels = "{lower}"',
}


@pytest.fixture
def project(tmp_path, monkeypatch):
    """proj/db/migration.py with branch constants, and proj/db/versions/ for scripts."""
    versions = tmp_path / "proj" / "db" / "versions"
    versions.mkdir(parents=True)
    for package in (tmp_path / "proj", tmp_path / "proj" / "db"):
        (package / "__init__.py").write_text("")
    (tmp_path / "proj" / "db" / "migration.py").write_text(MIGRATION_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield versions
    for name in [m for m in sys.modules if m == "proj" or m.startswith("proj.")]:
        del sys.modules[name]


@pytest.mark.parametrize("writing, label", list(itertools.product(sorted(WRITINGS), ("EXPAND", "CONTRACT"))))
def test_header_is_what_the_imported_module_says(project, writing, label):
    header_text = WRITINGS[writing].format(label=label, lower=label.lower())
    path = project / f"{writing}.py"
    path.write_text("from typing import Union\n" + header_text + "\n\ndef upgrade():\n    pass\n")
    module = runpy.run_path(str(path))  # what alembic reads: the module's attributes
    header = read_header(path.read_text(), path)
    labels = module["branch_labels"]
    assert header.revision == module["revision"]
    assert header.down_revisions == ((module["down_revision"],) if isinstance(module["down_revision"], str)
                                     else tuple(module["down_revision"]))
    assert header.branch_labels == ((labels,) if isinstance(labels, str) else tuple(labels))


def _lint(run_lint, *args) -> dict:
    run = run_lint("--format", "json", "--dialect", "postgresql", *map(str, args))
    return {"code": run.code, "findings": json.loads(run.out)["findings"]}


def test_constant_labels_make_contract_scripts_contract(project, run_lint):
    """glance: ``branch_labels = (migration.CONTRACT_BRANCH,)``: the drops are contract's, not false MP101s."""
    first = 'from proj.db import migration\n' + script('op.drop_column("users", "a")', revision="c1", down="e1")
    first = first.replace("branch_labels = None", "branch_labels = (migration.CONTRACT_BRANCH,)")
    (project / "c1.py").write_text(first)
    (project / "c2.py").write_text(script('op.drop_column("users", "b")', revision="c2", down="c1"))
    (project / "e1.py").write_text(script('op.add_column("users", sa.Column("n", sa.Integer))', revision="e1",
                                          labels=("expand",)))
    result = _lint(run_lint, project)
    assert result["code"] == 0, result
    assert {f["code"] for f in result["findings"]} == set()


def test_one_line_header_is_linted_not_skipped(tmp_path, run_lint):
    versions = tmp_path / "versions"
    versions.mkdir()
    (versions / "a.py").write_text('from alembic import op\nrevision = "a"; down_revision = None\n\n'
                                   'def upgrade():\n    op.drop_column("users", "x")\n')
    result = _lint(run_lint, "--phase", "expand", versions)
    assert [f["code"] for f in result["findings"]] == ["MP101"]


REQUIRES = {"none": "", "attribute": "requires_data_migrations = NAMES\n",
            "call": "", "empty": "requires_data_migrations = ()\n"}


@pytest.mark.parametrize("directory, label, requires",
                         list(itertools.product(("expand", "contract", "versions"), ("expand", "contract", None),
                                                sorted(REQUIRES))))
def test_label_directory_and_data_requirements_must_agree(tmp_path, run_lint, directory, label, requires):
    folder = tmp_path / directory
    folder.mkdir()
    body = 'op.require_data_migrations(*NAMES)' if requires == "call" else "pass"
    extra = 'NAMES = ("backfill_" + "users",)\n' + REQUIRES[requires]
    labels = (label,) if label else None
    (folder / "base.py").write_text(script("pass", revision="base", labels=labels))
    (folder / "child.py").write_text(script(body, revision="child", down="base", extra=extra))
    result = _lint(run_lint, folder)
    flagged = {f["path"].rsplit("/", 1)[1] for f in result["findings"] if f["code"] == "MP121"}
    wrong_directory = directory in ("expand", "contract") and directory != label
    wrong_branch = requires in ("attribute", "call") and label != "contract"
    assert flagged == ({"base.py"} if wrong_directory else set()) | ({"child.py"} if wrong_directory or wrong_branch
                                                                       else set()), result
    assert result["code"] == (1 if flagged else 0), result
