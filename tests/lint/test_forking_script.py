"""A script that forks gets its own verdict, the same every run.

The forked process runs on through the linter's child and would answer too: whether its answer reached the
result pipe before the child's process group was killed depended on timing, so the verdict did (MP000 "its
result pipe held more or less than its one answer", or the script's findings): found by
``test_fuzz_scripts`` (seed 276082296) comparing runs with one and two workers.  Here the script waits for
what it forked, so before the fix the pipe always held two answers."""

from __future__ import annotations

from pathlib import Path

import pytest

from migrations_policy.lint import run

SCRIPT = '''from alembic import op
revision = "a"
down_revision = None
branch_labels = ("expand",)


def upgrade():
    import os
    pid = os.fork()
    if pid:
        os.waitpid(pid, 0)
    op.drop_column("users", "{column}")
'''


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_script_that_forks_gets_its_own_verdict(tmp_path, jobs, monkeypatch):
    monkeypatch.setenv("MIGRATIONS_POLICY_LINT_STATIC", "0")
    for n in range(3):
        (tmp_path / f"s{n}.py").write_text(SCRIPT.replace("{column}", f"c{n}").replace('"a"', f'"a{n}"')
                                           .replace("down_revision = None", "down_revision = None" if not n
                                                    else f'down_revision = "a{n - 1}"'))
    report = run([tmp_path], dialects=("postgresql",), jobs=jobs)
    codes = sorted((Path(f.path).name, f.code) for f in report.findings)
    assert codes == [("s0.py", "MP101"), ("s1.py", "MP101"), ("s2.py", "MP101")], codes
