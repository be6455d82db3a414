"""The cache's stat index (a warm run reads no script) and the process pool (same report as one process)."""

from __future__ import annotations

import os

import pytest

from migrations_policy.lint import cache as cache_module
from migrations_policy.lint import run

from .conftest import script

DROP = 'op.drop_column("users", "fax")'
TRUNCATE = 'op.execute("TRUNCATE users")'


def _history(directory, count: int, body: str = DROP) -> list:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        path = directory / f"r{i:03d}.py"
        path.write_text(script(body, revision=f"r{i:03d}", down=f"r{i - 1:03d}" if i else None,
                               labels=("expand",) if not i else None))
        paths.append(path)
    return paths


def _forbid_reading(monkeypatch, allowed: set[str]) -> list[str]:
    """After the index is loaded, the cache may open only *allowed* paths; returns what it opened."""
    opened: list[str] = []
    real_load, real_open = cache_module.Cache._load, open

    def guarded_open(name, *args, **kwargs):
        assert str(name) in allowed, f"the cache read {name}"
        opened.append(str(name))
        return real_open(name, *args, **kwargs)

    def load_then_forbid(self, path):
        real_load(self, path)  # reading the index itself is the point
        monkeypatch.setattr(cache_module, "open", guarded_open, raising=False)

    monkeypatch.setattr(cache_module.Cache, "_load", load_then_forbid)
    return opened


def test_warm_run_reads_no_script(tmp_path, monkeypatch):
    _history(tmp_path / "versions", 3)
    first = run([tmp_path / "versions"], dialects=["postgresql"])
    opened = _forbid_reading(monkeypatch, allowed=set())
    second = run([tmp_path / "versions"], dialects=["postgresql"])
    monkeypatch.undo()
    assert second.to_dict() == first.to_dict() and first.findings and not opened


def test_one_changed_file_is_the_only_one_read(tmp_path, monkeypatch):
    paths = _history(tmp_path / "versions", 5)
    run([tmp_path / "versions"], dialects=["postgresql"])
    paths[2].write_text(paths[2].read_text().replace(DROP, TRUNCATE))
    opened = _forbid_reading(monkeypatch, allowed={str(paths[2])})
    report = run([tmp_path / "versions"], dialects=["postgresql"])
    monkeypatch.undo()
    assert opened == [str(paths[2])]
    assert [f.code for f in report.findings if f.path == str(paths[2])] == ["MP106"]


def test_same_size_same_mtime_rewrite_is_seen(tmp_path):
    """An edit that keeps size and mtime (``touch -r``) still changes ctime: the file is re-read."""
    path = _history(tmp_path / "versions", 1)[0]
    assert {f.code for f in run([path], phase="expand", dialects=["postgresql"]).findings} == {"MP101"}
    stat = path.stat()
    text = path.read_text().replace('op.drop_column("users", "fax")', 'op.execute("TRUNCATE usersxx")')
    assert len(text) == stat.st_size
    path.write_text(text)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert {f.code for f in run([path], phase="expand", dialects=["postgresql"]).findings} == {"MP106"}


def test_racy_entries_are_re_read(tmp_path):
    """An entry not older than the index may hide a same-tick edit: it is verified by content."""
    path = _history(tmp_path / "versions", 1)[0]
    run([path], phase="expand", dialects=["postgresql"])
    index = tmp_path / "cache" / cache_module.FILENAME
    entry_mtime = path.stat().st_mtime_ns
    os.utime(index, ns=(entry_mtime, entry_mtime))  # the index is as old as the file: racy
    cache = cache_module.Cache(tmp_path / "cache")
    assert cache.digest(path) is not None and cache.dirty  # re-read, and saved again (then trusted)
    os.utime(index, ns=(entry_mtime + 10**9, entry_mtime + 10**9))
    cache = cache_module.Cache(tmp_path / "cache")
    assert cache.digest(path) is not None and not cache.dirty


@pytest.mark.parametrize("cache_dir", ["off", None])
def test_process_pool_gives_the_same_report(tmp_path, monkeypatch, cache_dir):
    if cache_dir:
        monkeypatch.setenv("MIGRATIONS_POLICY_CACHE_DIR", cache_dir)
    _history(tmp_path / "versions", 70, body=DROP + "\n" + TRUNCATE)
    (tmp_path / "versions" / "r010.py").write_text("revision = 'r010'\nsyntax error here\n")
    reports = {}
    for jobs in ("1", "2"):
        monkeypatch.setenv("MIGRATIONS_POLICY_LINT_JOBS", jobs)
        monkeypatch.setenv("MIGRATIONS_POLICY_CACHE_DIR", str(tmp_path / f"cache{jobs}") if not cache_dir else "off")
        reports[jobs] = run([tmp_path / "versions"], dialects=["postgresql", "sqlite"]).to_dict()
    assert reports["1"] == reports["2"]
    assert reports["1"]["files"] == 70 and {f["code"] for f in reports["1"]["findings"]} == {"MP000", "MP101", "MP106"}


def test_warm_cli_run_imports_no_engine_rule_or_policy_module(tmp_path):
    """Answered from the cache, ``migrations-policy lint`` loads neither alembic nor the analysis modules."""
    import json
    import subprocess
    import sys

    _history(tmp_path / "versions", 3)
    env = {**os.environ, "MIGRATIONS_POLICY_CACHE_DIR": str(tmp_path / "cache")}
    code = ("import sys, json; from migrations_policy.cli import main\n"
            "try:\n    main(['lint', '--format', 'json', 'versions'])\nexcept SystemExit:\n    pass\n"
            "heavy = ('alembic', 'sqlalchemy', 'sqlparse', 'migrations_policy.policy', 'migrations_policy.lint.engine',"
            " 'migrations_policy.lint.rules')\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith(heavy))), file=sys.stderr)")
    runs = [subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True, check=True)
            for _ in range(2)]
    assert json.loads(runs[0].stdout) == json.loads(runs[1].stdout) and json.loads(runs[1].stdout)["findings"]
    # the warm run imports none of them; the cold one reads its plain scripts here (lint.static: the engine,
    # rules and policy) and runs the others in worker processes (lint.sandbox.worker): never alembic nor SQLAlchemy here
    assert json.loads(runs[1].stderr) == []
    assert not [m for m in json.loads(runs[0].stderr) if m.startswith(("alembic", "sqlalchemy", "sqlparse"))]
