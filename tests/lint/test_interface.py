"""The stable interface: phases, formats, ignores, settings, cache, dbsync lint, post_write_hook, docs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

from migrations_policy import cli, policy
from migrations_policy.policy import model as m

from .conftest import script

DROP = 'op.drop_column("users", "fax")'
ADD = 'op.add_column("users", sa.Column("nick", sa.String(20)))'


# -- phase detection -------------------------------------------------------------
def test_phase_from_branch_label_walk(tmp_path, run_lint):
    versions = tmp_path / "versions"
    versions.mkdir()
    (versions / "e0.py").write_text(script("pass", revision="e0", labels=("expand",)))
    (versions / "e1.py").write_text(script(DROP, revision="e1", down="e0"))
    (versions / "c0.py").write_text(script("pass", revision="c0", labels=("contract",)))
    (versions / "c1.py").write_text(script(DROP + "\n" + ADD, revision="c1", down="c0"))
    run = run_lint("--format", "json", "--dialect", "postgresql", versions)
    found = {(Path(f["path"]).name, f["code"], f["phase"]) for f in run.json["findings"]}
    assert found == {("e1.py", "MP101", "expand"), ("c1.py", "MP120", "contract")}
    # a single changed file (pre-commit) still finds its phase through its siblings
    run = run_lint("--format", "json", "--dialect", "postgresql", versions / "c1.py")
    assert {f["phase"] for f in run.json["findings"]} == {"contract"}


def test_phase_from_directory_and_override(tmp_path, run_lint):
    contract = tmp_path / "versions" / "contract"
    contract.mkdir(parents=True)
    path = contract / "x.py"
    path.write_text(script(DROP, down="not-in-this-tree"))
    assert run_lint("--dialect", "postgresql", path).code == 0
    assert run_lint("--dialect", "postgresql", "--phase", "expand", path).code == 1


def test_directory_skips_non_revision_files(tmp_path, run_lint):
    (tmp_path / "env.py").write_text("from alembic import context\n")
    (tmp_path / "r.py").write_text(script(ADD))
    run = run_lint("--format", "json", "--phase", "expand", tmp_path)
    assert run.code == 0 and run.json["files"] == 1


# -- output formats ----------------------------------------------------------------
@pytest.fixture
def two_files(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(script(DROP))
    good = tmp_path / "good.py"
    good.write_text(script(ADD))
    return bad, good


def test_json_shape(run_lint, two_files):
    run = run_lint("--format", "json", "--phase", "expand", "--dialect", "mysql", *two_files)
    assert set(run.json) == {"findings", "files"} and run.json["files"] == 2
    (finding,) = run.json["findings"]
    assert set(finding) == {"path", "line", "code", "severity", "message", "phase", "dialect", "url"}
    assert finding["url"].endswith("/docs/rules/MP101.rst")
    assert (finding["code"], finding["severity"], finding["line"], finding["dialect"]) == ("MP101", "error", 11, "mysql")


def test_json_renders_any_text_one_finding_per_line():
    from migrations_policy.lint.output.report import Finding, LintReport
    from migrations_policy.lint.output.reporters import render

    tricky = 'quote " backslash \\ newline \n tab \t non-ASCII é ☃ control \x01'
    findings = [Finding(f"/p/{tricky}.py", i, "MP101", "error", tricky, "expand", "mysql,sqlite") for i in (1, 2)]
    for report in (LintReport(findings=findings, files=3), LintReport(files=0)):
        text = render(report, "json")
        assert json.loads(text) == {"findings": [f.to_dict() for f in report.findings], "files": report.files}
    assert len(render(LintReport(findings=findings, files=3), "json").splitlines()) == 5 + len(findings)
    # what comes from a script is made printable (report.printable): line breaks and controls as escapes
    printed = 'quote " backslash \\ newline \\n tab \t non-ASCII é ☃ control \\x01'
    # a path's backslash is doubled (report.printable_path): "\\x01" and a real control stay two names
    path = "/p/" + printed.replace("\\ ", "\\\\ ") + ".py"
    assert findings[0].to_dict() == {"path": path, "line": 1, "code": "MP101", "severity": "error",
                                     "message": printed, "phase": "expand", "dialect": "mysql,sqlite",
                                     "url": "https://github.com/migrations-policy/migrations-policy/blob/main/docs/rules/MP101.rst"}


def test_github_format(run_lint, two_files):
    run = run_lint("--format", "github", "--phase", "expand", *two_files)
    (line,) = run.out.strip().splitlines()
    assert line.startswith(f"::error file={two_files[0]},line=11,title=MP101::MP101 drop column users.fax")
    assert run.code == 1


def test_sarif_format(run_lint, two_files):
    run = run_lint("--format", "sarif", "--phase", "expand", *two_files)
    doc = json.loads(run.out)
    assert doc["version"] == "2.1.0"
    sarif_run = doc["runs"][0]
    rule_ids = [r["id"] for r in sarif_run["tool"]["driver"]["rules"]]
    (result,) = sarif_run["results"]
    assert rule_ids[result["ruleIndex"]] == result["ruleId"] == "MP101"
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == 11
    assert "What it does" in sarif_run["tool"]["driver"]["rules"][result["ruleIndex"]]["fullDescription"]["text"]


def test_junit_format(run_lint, two_files):
    run = run_lint("--format", "junit", "--phase", "expand", *two_files)
    root = ElementTree.fromstring(run.out.split("?>", 1)[1])
    suite = root.find("testsuite")
    assert suite.get("tests") == "2" and suite.get("failures") == "1"
    assert suite.find("testcase/failure").get("type") == "MP101"


def test_text_format(run_lint, two_files):
    run = run_lint("--phase", "expand", "--dialect", "sqlite", *two_files)
    assert f"{two_files[0]}:11:1: MP101 [error]" in run.out and "MP101: https://" in run.out
    assert run.out.strip().endswith("2 file(s) checked: 1 error(s), 0 warning(s)")


# -- inline ignores and severities --------------------------------------------------
def test_inline_ignores(lint_body):
    body = '''
# migrations-policy: ignore[MP101] column never read by any released version
op.drop_column("users", "fax")
op.drop_column("users", "pager")  # migrations-policy: ignore[MP101,MP102] both names dead
op.drop_column("users", "telex")  # migrations-policy: ignore[MP101]
op.add_column("users", sa.Column("n", sa.String(5)))  # migrations-policy: ignore[MP113] nothing to ignore
x = "# migrations-policy: ignore[MP101] inside a string does not count"
op.drop_column("users", "modem")
'''
    run = lint_body(body, "postgresql")
    by_code = {}
    for f in run.json["findings"]:
        by_code.setdefault(f["code"], []).append(f["line"])
    assert by_code["MP101"] == [14, 17]  # telex (ignore without reason) and modem
    assert by_code["MP002"] == [14]
    assert sorted(by_code["MP003"]) == [13, 15]  # MP102 unused on the pager line; MP113 unused
    assert run.code == 1


def test_severity_settings(lint_body, tmp_path):
    config = tmp_path / "pyproject.toml"
    config.write_text('[tool.migrations_policy]\nseverity = {MP101 = "warning", MP107 = "off"}\n')
    run = lint_body(DROP + '\nop.execute("UPDATE users SET a = 1")', "postgresql")
    assert run.codes == {"MP101"} and run.code == 0
    assert run.json["findings"][0]["severity"] == "warning"


# -- cache ------------------------------------------------------------------------
def test_warm_run_uses_cache_without_importing_alembic(tmp_path, two_files):
    env = {**os.environ, "MIGRATIONS_POLICY_CACHE_DIR": str(tmp_path / "cache")}
    code = ("import sys, json; from migrations_policy.lint import run; "
            f"r = run({[str(p) for p in two_files]!r}, phase='expand'); "
            "print(json.dumps([r.to_dict(), 'alembic' in sys.modules, 'sqlalchemy' in sys.modules]))")
    first = json.loads(subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True, check=True).stdout)
    second = json.loads(subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True, check=True).stdout)
    assert first[1:] == second[1:] == [False, False]  # scripts run in worker processes (lint.sandbox.worker)
    assert first[0] == second[0] and first[0]["findings"]
    two_files[1].write_text(script('op.execute("TRUNCATE users")'))
    third = json.loads(subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True, check=True).stdout)
    assert third[1] is False and {f["code"] for f in third[0]["findings"]} == {"MP101", "MP106"}


# -- dbsync lint, post_write_hook ---------------------------------------------------
def _alembic_project(tmp_path: Path, upgrade_body: str) -> Path:
    (tmp_path / "migrations" / "versions" / "expand").mkdir(parents=True)
    (tmp_path / "migrations" / "versions" / "contract").mkdir(parents=True)
    (tmp_path / "migrations" / "script.py.mako").write_text(
        '"""${message}"""\nfrom alembic import op\nimport sqlalchemy as sa\n\nrevision = ${repr(up_revision)}\n'
        'down_revision = ${repr(down_revision)}\nbranch_labels = ${repr(branch_labels)}\ndepends_on = None\n\n\n'
        f"def upgrade():\n    {upgrade_body}\n\n\ndef downgrade():\n    pass\n")
    ini = tmp_path / "alembic.ini"
    ini.write_text(
        "[alembic]\nscript_location = migrations\nprepend_sys_path = .\npath_separator = space\n"
        "version_locations = migrations/versions/expand migrations/versions/contract\n"
        "sqlalchemy.url = sqlite:///never-used.db\n\n"
        "[post_write_hooks]\nhooks = mplint\nmplint.type = migrations_policy.lint\nmplint.dialects = postgresql\n\n"
        "[migrations_policy]\ndialects = postgresql\n")
    return ini


def test_dbsync_lint(tmp_path, capsys):
    ini = _alembic_project(tmp_path, "pass")
    (tmp_path / "migrations" / "versions" / "expand" / "e0.py").write_text(script("pass", revision="e0", labels=("expand",)))
    (tmp_path / "migrations" / "versions" / "contract" / "c0.py").write_text(script(ADD, revision="c0", labels=("contract",)))
    (tmp_path / "migrations" / "versions" / "expand" / "e1.py").write_text(script(DROP, revision="e1", down="e0"))
    code = cli.dbsync_main(["-c", str(ini), "--format", "json", "lint"])
    data = json.loads(capsys.readouterr().out)
    assert code == 1 and data["files"] == 3
    assert {(Path(f["path"]).name, f["code"], f["phase"], f["dialect"]) for f in data["findings"]} == {
        ("e1.py", "MP101", "expand", "postgresql"), ("c0.py", "MP120", "contract", "postgresql")}
    assert not (tmp_path / "never-used.db").exists()  # no database needed


def test_post_write_hook_rejects_new_script_with_errors(tmp_path):
    from alembic import command
    from alembic.config import Config
    from alembic.util import CommandError

    ini = _alembic_project(tmp_path, 'op.create_index("ix", "users", ["a"])')
    config = Config(str(ini))
    with pytest.raises(CommandError, match="MP113 .* create index ix on users without CONCURRENTLY"):
        command.revision(config, "first", branch_label="expand", head="base",
                         version_path=str(tmp_path / "migrations/versions/expand"))
    assert len(list((tmp_path / "migrations/versions/expand").glob("*first.py"))) == 1  # the file stays


def test_post_write_hook_accepts_clean_script(tmp_path):
    from alembic import command
    from alembic.config import Config

    config = Config(str(_alembic_project(tmp_path, 'op.add_column("users", sa.Column("n", sa.String(5)))')))
    command.revision(config, "first", branch_label="expand", head="base",
                     version_path=str(tmp_path / "migrations/versions/expand"))


# -- the knowledge base's API (for the autogenerate split) ---------------------------
def test_policy_api():
    add = m.Operation(kind=m.ADD_COLUMN, table="t", column="c", nullable=True)
    verdict = policy.classify(add, "postgresql")
    assert verdict.phase == policy.EXPAND and verdict.allowed_in(policy.EXPAND)
    fk = m.Operation(kind=m.ADD_FK, table="t")
    assert not policy.classify(fk, "postgresql").allowed_in(policy.EXPAND)
    assert policy.classify(fk.with_(not_valid=True), "postgresql").allowed_in(policy.EXPAND)
    assert policy.classify(fk, "mysql").effect.rewrite
    assert policy.classify(m.Operation(kind=m.ALTER_TYPE, table="t", column="c"), "mysql").phase == policy.MULTI_STEP
    assert policy.classify(m.Operation(kind=m.UPDATE, table="t"), "sqlite").phase == policy.DATA
    assert [o.kind for o in policy.from_sql("ALTER TABLE t DROP COLUMN c; -- DROP TABLE x")] == [m.DROP_COLUMN]
    import sqlalchemy as sa
    from alembic.operations import ops
    converted = policy.from_alembic(ops.AlterColumnOp("t", "c", modify_type=sa.BigInteger(), modify_nullable=False))
    assert [o.kind for o in converted] == [m.ALTER_TYPE, m.SET_NOT_NULL]
    with pytest.raises(ValueError):
        policy.classify(add, "oracle")


def test_rule_docs_are_current():
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, str(root / "docs" / "_generate_rules.py"), "--check"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_every_rule_is_documented():
    from migrations_policy.lint import rules
    for rule in rules.all_rules():
        for section in ("## What it does", "## Why is this bad", "## Example", "## Use instead"):
            assert section in rule.doc, (rule.code, section)
