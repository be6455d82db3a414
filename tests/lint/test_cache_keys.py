"""What a cached result depends on: each change below must give the answer of a fresh (uncached) run."""

from __future__ import annotations

import os

import pytest

from migrations_policy.core.config import Settings
from migrations_policy.lint import cache as cache_module
from migrations_policy.lint import run

from .conftest import script

DROP = 'op.drop_column("users", "fax")'
FK = 'op.create_foreign_key("fk", "users", "orgs", ["org_id"], ["id"])'
DEFAULT = 'op.add_column("users", sa.Column("n", sa.Integer, nullable=False, server_default="0"))'


def _codes(path, **kw) -> set[tuple[str, str, str]]:
    return {(f.code, f.severity, f.dialect) for f in run([path], **kw).findings}


def _fresh(path, monkeypatch, **kw) -> set[tuple[str, str, str]]:
    monkeypatch.setenv("MIGRATIONS_POLICY_CACHE_DIR", "off")
    try:
        return _codes(path, **kw)
    finally:
        monkeypatch.undo()


@pytest.fixture
def path(tmp_path):
    p = tmp_path / "r1.py"
    p.write_text(script(DROP + "\n" + FK))
    return p


def _analysed(monkeypatch) -> list:
    """Records the files sent to analysis (a cache miss): read without running (``lint.static``) or analysed in
    worker processes (the others)."""
    from migrations_policy.lint.sandbox import parallel
    from migrations_policy.lint.static import reader as static

    seen: list = []
    real, real_static = parallel.analyse_all, static.analyse

    def spy(tasks, options, *more):
        seen.extend((path.name, phase, options.dialects) for path, phase in tasks)
        return real(tasks, options, *more)

    def static_spy(path, phase, options):
        found = real_static(path, phase, options)
        if found is not None:
            seen.append((path.name, phase, options.dialects))
        return found

    monkeypatch.setattr(parallel, "analyse_all", spy)
    monkeypatch.setattr(static, "analyse", static_spy)
    return seen


def test_dialects_phase_and_server_version_are_part_of_the_key(path, monkeypatch, tmp_path):
    seen = _analysed(monkeypatch)
    assert _codes(path, phase="expand", dialects=["postgresql"]) == {("MP101", "error", "postgresql"),
                                                                    ("MP110", "error", "postgresql")}
    assert _codes(path, phase="expand", dialects=["sqlite"]) == {("MP101", "error", "sqlite"), ("MP150", "error", "sqlite")}
    assert _codes(path, phase="contract", dialects=["postgresql"]) == set()
    assert _codes(path, phase="expand", dialects=["postgresql"]) == {("MP101", "error", "postgresql"),
                                                                    ("MP110", "error", "postgresql")}
    assert len(seen) == 3  # the last run was answered from the cache
    path.write_text(script(DEFAULT))
    assert _codes(path, phase="expand", dialects=["postgresql"]) == set()
    old = Settings(postgresql_version=10)
    assert _codes(path, phase="expand", dialects=["postgresql"], settings=old) == {("MP114", "error", "postgresql")}
    assert len(seen) == 5


def test_severity_settings_apply_to_cached_results(path, monkeypatch):
    both = {("MP101", "error", "postgresql"), ("MP110", "error", "postgresql")}
    assert _codes(path, phase="expand", dialects=["postgresql"]) == both
    seen = _analysed(monkeypatch)
    assert _codes(path, phase="expand", dialects=["postgresql"], settings=Settings(severity={"MP101": "warning"})) == {
        ("MP101", "warning", "postgresql"), ("MP110", "error", "postgresql")}
    assert _codes(path, phase="expand", dialects=["postgresql"], settings=Settings(severity={"MP110": "off"})) == {
        ("MP101", "error", "postgresql")}
    assert not seen  # both answered from the cache, with the rules' default severities stored there
    assert _codes(path, phase="expand", dialects=["postgresql"]) == both


def test_a_changed_file_is_analysed_again(path, monkeypatch):
    assert _codes(path, phase="expand", dialects=["postgresql"])
    path.write_text(script('op.add_column("users", sa.Column("n", sa.String(5)))'))
    assert _codes(path, phase="expand", dialects=["postgresql"]) == set() == _fresh(path, monkeypatch, phase="expand",
                                                                                   dialects=["postgresql"])


def test_another_linter_version_ignores_the_cache(path, monkeypatch, tmp_path):
    run([path], phase="expand", dialects=["postgresql"])
    assert cache_module.Cache(tmp_path / "cache").results
    monkeypatch.setattr(cache_module, "__version__", "0.0.0-other")
    cache_module.fingerprint.cache_clear()
    try:
        assert not cache_module.Cache(tmp_path / "cache").results
        seen = _analysed(monkeypatch)
        run([path], phase="expand", dialects=["postgresql"])
        assert [name for name, _, _ in seen] == ["r1.py"]
    finally:
        monkeypatch.undo()
        cache_module.fingerprint.cache_clear()


def test_an_edited_rule_module_ignores_the_cache(path, monkeypatch, tmp_path):
    run([path], phase="expand", dialects=["postgresql"])
    before = cache_module.fingerprint()
    rule = next((cache_module.Path(cache_module.__file__).parent / "rules").glob("mp101_*.py"))
    stat = rule.stat()
    cache_module.fingerprint.cache_clear()
    try:
        os.utime(rule, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
        assert cache_module.fingerprint() != before
        assert not cache_module.Cache(tmp_path / "cache").results
    finally:
        os.utime(rule, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        cache_module.fingerprint.cache_clear()


@pytest.mark.parametrize("junk", [b"", b"\x00\x01garbage", b"{\"files\": {}}", b"\xe9" * 100])
def test_a_broken_cache_file_is_ignored_and_replaced(path, tmp_path, junk):
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / cache_module.FILENAME).write_bytes(junk)
    assert _codes(path, phase="expand", dialects=["postgresql"]) == {("MP101", "error", "postgresql"),
                                                                    ("MP110", "error", "postgresql")}
    assert cache_module.Cache(tmp_path / "cache").results


@pytest.mark.parametrize("change", ["edit", "delete"])
def test_a_changed_helper_module_invalidates_the_scripts_result(tmp_path, monkeypatch, change):
    """The result of a script is cached with the local modules it imports (issue 13: warm gave no findings)."""
    package = tmp_path / "helpers"
    package.mkdir()
    (package / "__init__.py").write_text("from .ops import apply\n")
    (package / "ops.py").write_text("from alembic import op\n\ndef apply():\n    pass\n")
    path = tmp_path / "r.py"
    path.write_text(script("apply()", extra="from helpers import apply\n"))
    assert _codes(path, phase="expand", dialects=["postgresql"]) == set()
    seen = _analysed(monkeypatch)
    assert _codes(path, phase="expand", dialects=["postgresql"]) == set() and seen == []  # warm: from the cache
    if change == "delete":
        (package / "ops.py").unlink()
        (package / "__init__.py").write_text("def apply():\n    from alembic import op\n    op.drop_column('u', 'a')\n")
    else:
        target = package / "ops.py"
        target.write_text("from alembic import op\n\ndef apply():\n    op.drop_column('u', 'a')\n")
    expected = {("MP101", "error", "postgresql")}
    assert _codes(path, phase="expand", dialects=["postgresql"]) == expected == _fresh(
        path, monkeypatch, phase="expand", dialects=["postgresql"])
    assert seen  # analysed again


def test_a_damaged_cache_file_is_ignored_whatever_byte_changed(path, tmp_path):
    """The cache file carries a digest of its payload: a changed byte (generated: each byte of the stored
    codes and severities, and random others) gives the answer of a fresh run, and the file is rebuilt."""
    import random

    expected = _codes(path, phase="expand", dialects=["postgresql"])
    assert expected
    index = tmp_path / "cache" / cache_module.FILENAME
    good = index.read_bytes()
    rng = random.Random(len(good))
    positions = {i for word in (b"MP101", b"MP110", b"error") for start in range(len(good))
                 if good.startswith(word, start) for i in range(start, start + len(word))}
    positions |= set(rng.sample(range(len(good)), 15))
    for position in sorted(positions):
        damaged = bytearray(good)
        damaged[position] ^= 1 << rng.randrange(8)
        index.write_bytes(bytes(damaged))
        assert _codes(path, phase="expand", dialects=["postgresql"]) == expected, position
        assert cache_module.Cache(tmp_path / "cache").results  # rebuilt
