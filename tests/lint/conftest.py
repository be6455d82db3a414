"""Fixtures for the linter tests: write a revision script, run ``migrations-policy lint`` on it."""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass

import pytest

from migrations_policy import cli

HEADER = '''"""test revision"""
from alembic import op
import sqlalchemy as sa

revision = "{revision}"
down_revision = {down!r}
branch_labels = {labels!r}

'''


#: Operations a generated helper issues, each with the one code the linter must report for it in an expand
#: (the helper-following tests: a helper's operations are judged as if the script ran them itself).
HELPER_OPERATIONS = {
    'op.drop_table("{t}")': "MP101",
    'op.create_index("ix_{t}", "{t}", ["a"])': "MP113",
    'op.alter_column("{t}", "a", nullable=False, existing_nullable=True)': "MP104",
}


def script(body: str, revision: str = "r1", down: str | None = None, labels=None, extra: str = "") -> str:
    """A revision module whose upgrade() runs *body* (downgrade drops things: it must never be linted)."""
    return (HEADER.format(revision=revision, down=down, labels=labels) + textwrap.dedent(extra)
            + "\ndef upgrade():\n" + textwrap.indent(textwrap.dedent(body).strip() or "pass", "    ")
            + "\n\n\ndef downgrade():\n    op.drop_table('everything')\n")


@dataclass
class Run:
    code: int
    out: str
    err: str

    @property
    def json(self) -> dict:
        return json.loads(self.out)

    @property
    def codes(self) -> set[str]:
        return {f["code"] for f in self.json["findings"]}

    def findings(self, code: str) -> list[dict]:
        return [f for f in self.json["findings"] if f["code"] == code]


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    """Each test in its own cwd (no project settings) with its own cache."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MIGRATIONS_POLICY_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def run_lint(capsys):
    def run(*args: str) -> Run:
        code = cli.main(["lint", *map(str, args)])
        captured = capsys.readouterr()
        return Run(code, captured.out, captured.err)
    return run


@pytest.fixture
def lint_body(tmp_path, run_lint):
    """``lint_body(body, dialect, phase="expand")`` -> Run with --format json."""
    counter = [0]

    def run(body: str, dialect: str | None = None, phase: str = "expand", extra: str = "", *more: str) -> Run:
        counter[0] += 1
        path = tmp_path / f"rev_{counter[0]}.py"
        path.write_text(script(body, extra=extra))
        args = ["--format", "json", "--phase", phase, *more, path]
        if dialect:
            args = ["--dialect", dialect, *args]
        return run_lint(*args)
    return run
