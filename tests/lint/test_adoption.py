"""Adopting the policy on a long history: baseline, exclude, per-file-ignores (generated inputs).

Histories are random DAGs (branches and merges) written in a shuffled file order with
random names; the expected ancestors of the baseline are computed while the graph is
built (not by walking it as the linter does).  Globs are derived from the generated
paths and checked against an independent component-by-component matcher.
"""

from __future__ import annotations

import fnmatch
import random
import subprocess
import sys
from pathlib import Path

import pytest

from migrations_policy.core.config import Settings
from migrations_policy.core.errors import ConfigError
from migrations_policy.core.globs import compile_glob
from migrations_policy.lint import rules, run
from migrations_policy.lint.adoption import rule_codes

from .conftest import script

DROP = 'op.drop_column("t", "c_{n}")'  # MP101 in expand
NOT_NULL = 'op.add_column("t", sa.Column("n_{n}", sa.Integer, nullable=False))'  # MP105
SEEDS = [3, 17, 2024]


def _history(rng: random.Random, size: int) -> tuple[list[str], dict[str, tuple[str, ...]], dict[str, set[str]]]:
    """Revisions in creation order, their parents, and each one's ancestors (built incrementally)."""
    revisions, parents, ancestors = [], {}, {}
    heads: list[str] = []
    for index in range(size):
        revision = f"{rng.getrandbits(40):010x}"
        if not heads:
            downs: tuple[str, ...] = ()
        elif len(heads) > 1 and rng.random() < 0.3:
            downs = tuple(rng.sample(heads, 2))  # a merge
        else:
            downs = (rng.choice(heads) if rng.random() < 0.7 else rng.choice(revisions),)  # maybe a new branch
        revisions.append(revision)
        parents[revision] = downs
        ancestors[revision] = set().union(*(ancestors[d] | {d} for d in downs)) if downs else set()
        heads = [h for h in heads if h not in downs] + [revision]
    return revisions, parents, ancestors


def _write(directory: Path, rng: random.Random, revisions, parents) -> dict[str, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    order = list(revisions)
    rng.shuffle(order)  # file names say nothing of the order
    paths = {}
    for position, revision in enumerate(order):
        downs = parents[revision]
        down = None if not downs else downs[0] if len(downs) == 1 else downs
        body = DROP.format(n=revision) + "\n" + NOT_NULL.format(n=revision)
        path = directory / f"{position:03d}_{rng.choice(['add', 'fix', 'drop'])}.py"
        path.write_text(script(body, revision=revision, down=down))
        paths[revision] = path
    return paths


@pytest.mark.parametrize("seed", SEEDS)
def test_baseline_skips_exactly_its_ancestors_in_the_graph(tmp_path, seed):
    rng = random.Random(seed)
    revisions, parents, ancestors = _history(rng, 14)
    paths = _write(tmp_path / "versions", rng, revisions, parents)
    baseline = revisions[rng.randrange(3, 11)]
    skipped = ancestors[baseline] | {baseline}
    settings = Settings()
    settings.update({"baseline": baseline[:7]}, "setup.cfg")  # a unique prefix, as alembic accepts
    report = run([tmp_path / "versions"], settings=settings, dialects=["postgresql"])
    reported = {Path(f.path) for f in report.findings}
    assert reported == {paths[r] for r in revisions if r not in skipped}, f"seed {seed}"
    assert report.baseline == len(skipped) and report.files == len(revisions) - len(skipped)
    assert sorted(report.paths) == sorted(str(paths[r]) for r in revisions if r not in skipped)

    everything = run([tmp_path / "versions"], settings=settings, dialects=["postgresql"], include_baseline=True)
    assert {Path(f.path) for f in everything.findings} == set(paths.values())
    assert everything.baseline == 0 and everything.files == len(revisions)
    # the skipped results were not stale: what a run without baseline reports, file by file
    plain = run([tmp_path / "versions"], dialects=["postgresql"])
    assert sorted((f.path, f.code, f.line) for f in plain.findings) == \
        sorted((f.path, f.code, f.line) for f in everything.findings)


@pytest.mark.parametrize("seed", SEEDS)
def test_baseline_skips_what_its_depends_on_brings_too(tmp_path, seed):
    """``depends_on`` makes alembic apply a revision (and its ancestors) before the baseline even
    though it is no parent: those are at or before the baseline too.  Dependencies are drawn at
    random, named by revision id, unique prefix or branch label, as alembic accepts."""
    rng = random.Random(seed)
    revisions, parents, _ = _history(rng, 16)
    depends: dict[str, list[str]] = {}
    labels: dict[str, str] = {}
    for index, revision in enumerate(revisions[2:], 2):
        if rng.random() < 0.4:
            target = rng.choice(revisions[:index])
            how = rng.choice(["id", "prefix", "label"])
            if how == "label":
                labels.setdefault(target, f"lbl_{target[:6]}")
            depends.setdefault(revision, []).append(
                target if how == "id" else target[:8] if how == "prefix" else labels[target])
    by_name = {**{r: r for r in revisions}, **{r[:8]: r for r in revisions}, **{v: k for k, v in labels.items()}}

    def before(revision: str, seen: set[str]) -> set[str]:
        if revision not in seen:
            seen.add(revision)
            for other in (*parents[revision], *(by_name[d] for d in depends.get(revision, ()))):
                before(other, seen)
        return seen

    directory = tmp_path / "versions"
    directory.mkdir()
    paths = {}
    for position, revision in enumerate(revisions):
        downs = parents[revision]
        extra = f"depends_on = {tuple(depends[revision])!r}\n" if revision in depends else ""
        path = directory / f"{position:03d}_{rng.choice(['add', 'fix'])}.py"
        path.write_text(script(DROP.format(n=revision), revision=revision,
                               down=None if not downs else downs[0] if len(downs) == 1 else downs,
                               labels=(labels[revision],) if revision in labels else None, extra=extra))
        paths[revision] = path
    _, _, ancestors = _history(random.Random(seed), 16)  # the same graph: parents only
    baseline = max(revisions[6:], key=lambda r: len(before(r, set()) - ancestors[r]))
    skipped = before(baseline, set())
    assert skipped - ancestors[baseline] - {baseline}, "the draw must give the baseline a dependency off its line"
    settings = Settings()
    settings.update({"baseline": baseline}, "setup.cfg")
    report = run([directory], settings=settings, dialects=["postgresql"])
    assert {Path(f.path) for f in report.findings} == {paths[r] for r in revisions if r not in skipped}, \
        (seed, baseline, depends)
    assert report.baseline == len(skipped)


def test_baseline_in_the_other_directory_of_the_split_layout(tmp_path):
    expand, contract = tmp_path / "versions" / "expand", tmp_path / "versions" / "contract"
    expand.mkdir(parents=True)
    contract.mkdir()
    (expand / "a.py").write_text(script(DROP.format(n="a"), revision="a", labels=("expand",)))
    (contract / "b.py").write_text(script("pass", revision="b", down="a", labels=("contract",)))
    (expand / "c.py").write_text(script(DROP.format(n="c"), revision="c", down="a"))
    settings = Settings()
    settings.update({"baseline": "b"}, "setup.cfg")
    report = run([expand], settings=settings, dialects=["postgresql"])
    assert [Path(f.path).name for f in report.findings] == ["c.py"] and report.baseline == 1


def test_unknown_or_ambiguous_baseline_is_one_line_exit_2(tmp_path):
    versions = tmp_path / "versions"
    versions.mkdir()
    (versions / "a.py").write_text(script("pass", revision="abc1"))
    (versions / "b.py").write_text(script("pass", revision="abc2", down="abc1"))
    for value, says in (("zzz", "is not a revision"), ("abc", "is an ambiguous prefix")):
        (tmp_path / "setup.cfg").write_text(f"[migrations_policy]\nbaseline = {value}\n")
        proc = _cli(tmp_path, "lint", "versions")
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.count("\n") == 1 and says in proc.stderr and "setup.cfg" in proc.stderr
        assert "Traceback" not in proc.stderr and proc.stdout == ""


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "migrations_policy.cli", *args], cwd=cwd, capture_output=True,
                          text=True, env=_env(cwd))


def _env(cwd: Path) -> dict:
    import os

    root = str(Path(__file__).resolve().parents[2])
    return {**os.environ, "PYTHONPATH": root, "MIGRATIONS_POLICY_CACHE_DIR": str(cwd / "cache")}


# -- globs --------------------------------------------------------------------------------------------------
def _oracle(pattern: str, path: str) -> bool:
    """The documented semantics, matched component by component (fnmatch on one component)."""
    parts = path.split("/")
    if "/" not in pattern:
        return any(fnmatch.fnmatchcase(part, pattern) for part in parts)
    wanted = pattern.split("/")

    def match(i: int, j: int) -> bool:
        if i == len(wanted):
            return True  # a matched directory covers what is under it
        if wanted[i] == "**":  # zero or more components; at the end, at least one
            return any(match(i + 1, k) for k in range(j, len(parts) + 1)) if i + 1 < len(wanted) else j < len(parts)
        return j < len(parts) and fnmatch.fnmatchcase(parts[j], wanted[i]) and match(i + 1, j + 1)

    return match(0, 0)


def _random_path(rng: random.Random) -> str:
    names = ["versions", "legacy", "lib", "a1", "old", "2019", "2020_a", "x"]
    depth = rng.randint(1, 4)
    return "/".join(rng.choice(names) for _ in range(depth)) + "/" + rng.choice(["a_old.py", "b.py", "2019_c.py"])


def _pattern_from(rng: random.Random, path: str) -> str:
    parts = path.split("/")
    if rng.random() < 0.3:
        part = rng.choice(parts)
        return part[:2] + "*" if rng.random() < 0.5 else part
    keep = parts[: rng.randint(1, len(parts))]
    out = []
    for part in keep:
        roll = rng.random()
        out.append("**" if roll < 0.15 else "*" if roll < 0.3 else part[0] + "?" * (len(part) - 1) if roll < 0.4
                   else f"[{part[0]}x]{part[1:]}" if roll < 0.5 else part)
    if len(out) == 1:
        out.append("**")
    return "/".join(out)


@pytest.mark.parametrize("seed", range(6))
def test_globs_match_the_documented_semantics(seed):
    rng = random.Random(seed)
    paths = [_random_path(rng) for _ in range(60)]
    for _ in range(80):
        pattern = _pattern_from(rng, rng.choice(paths))
        glob = compile_glob(pattern)
        for path in paths:
            assert glob.matches(path) == _oracle(pattern, path), (seed, pattern, path)


@pytest.mark.parametrize("bad", ["", "a[b", "a**/x", "x/**b", "a//b", "[!"])
def test_malformed_globs_are_refused(bad):
    with pytest.raises(ValueError):
        compile_glob(bad)


@pytest.mark.parametrize("seed", SEEDS)
def test_exclude_and_per_file_ignores(tmp_path, monkeypatch, seed):
    rng = random.Random(seed)
    monkeypatch.chdir(tmp_path)
    files: dict[str, Path] = {}
    for index in range(10):
        relative = f"{_random_path(rng).rsplit('/', 1)[0]}/r{index}.py"
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(script(DROP.format(n=index) + "\n" + NOT_NULL.format(n=index), revision=f"r{index}"))
        files[relative] = path
    names = list(files)
    exclude = sorted({_pattern_from(rng, rng.choice(names)) for _ in range(2)})
    ignores = {_pattern_from(rng, rng.choice(names)): rng.sample(["MP101", "MP105", "MP1"], rng.randint(1, 2))
               for _ in range(3)}
    settings = Settings()
    settings.update({"exclude": ", ".join(exclude),
                     "per-file-ignores": "\n".join(f"{g}: {', '.join(c)}" for g, c in ignores.items())}, "setup.cfg")
    report = run(sorted(files.values()), settings=settings, dialects=["postgresql"])
    kept = [name for name in names if not any(_oracle(p, name) for p in exclude)]
    assert report.excluded == len(names) - len(kept) and report.files == len(kept), (seed, exclude)
    expected = set()
    for name in kept:
        dropped = tuple(code for glob, codes in ignores.items() if _oracle(glob, name) for code in codes)
        expected |= {(name, code) for code in ("MP101", "MP105") if not code.startswith(dropped or ("-",))}
    assert {(str(Path(f.path).relative_to(tmp_path)), f.code) for f in report.findings} == expected, (seed, ignores)


def test_per_file_ignores_never_hide_an_unreadable_script(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.py").write_text('revision = "b"\ndown_revision = None\ndef upgrade(:\n')
    settings = Settings()
    settings.update({"per-file-ignores": "*.py: MP1"}, "setup.cfg")
    assert [f.code for f in run([tmp_path / "bad.py"], settings=settings).findings] == ["MP000"]


@pytest.mark.parametrize("value, says", [
    ("*.py: MP999", "unknown rule code 'MP999'"),
    ("*.py: MP000", "cannot be ignored"),
    ("*.py: E501", "is not a rule code"),
    ("a[b: MP101", "unclosed '['"),
    ("MP101", "expected GLOB: CODE"),
])
def test_bad_per_file_ignores_is_one_line_exit_2(tmp_path, value, says):
    (tmp_path / "r.py").write_text(script("pass"))
    (tmp_path / "setup.cfg").write_text(f"[migrations_policy]\nper-file-ignores = {value}\n")
    proc = _cli(tmp_path, "lint", "r.py")
    assert proc.returncode == 2 and says in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("migrations-policy: error: setup.cfg") and "Traceback" not in proc.stderr


def test_rule_codes_are_read_without_importing_the_rules():
    assert rule_codes() == rules.codes()


def test_text_and_json_say_how_many_were_skipped(tmp_path):
    versions = tmp_path / "versions"
    versions.mkdir()
    (versions / "a.py").write_text(script(DROP.format(n="a"), revision="a"))
    (versions / "b.py").write_text(script(DROP.format(n="b"), revision="b", down="a"))
    (versions / "c_old.py").write_text(script(DROP.format(n="c"), revision="c", down="b"))
    (tmp_path / "setup.cfg").write_text("[migrations_policy]\nbaseline = a\nexclude = *_old.py\n")
    text = _cli(tmp_path, "lint", "versions")
    assert text.returncode == 1
    assert "1 file(s) checked: 1 error(s), 0 warning(s); 1 at or before the baseline not checked" in text.stdout
    assert "1 excluded" in text.stdout
    import json

    data = json.loads(_cli(tmp_path, "lint", "--format", "json", "versions").stdout)
    assert data["files"] == 1 and data["skipped"] == {"baseline": 1, "excluded": 1}
    every = json.loads(_cli(tmp_path, "lint", "--format", "json", "--include-baseline", "versions").stdout)
    assert every["files"] == 2 and every["skipped"] == {"baseline": 0, "excluded": 1}


def test_settings_changes_between_warm_runs_give_fresh_answers(tmp_path, monkeypatch):
    """Baseline / exclude / per-file-ignores act outside the per-file cache: a warm run after a change
    answers as a cold one."""
    monkeypatch.chdir(tmp_path)
    versions = tmp_path / "versions"
    versions.mkdir()
    for i, down in enumerate([None, "r0", "r1"]):
        (versions / f"r{i}.py").write_text(script(DROP.format(n=i) + "\n" + NOT_NULL.format(n=i),
                                                  revision=f"r{i}", down=down))
    variants = [{}, {"baseline": "r1"}, {"per-file-ignores": "r2.py: MP101"}, {"exclude": "r0.py"}, {}]

    def answer(values: dict, cache: str) -> list:
        monkeypatch.setenv("MIGRATIONS_POLICY_CACHE_DIR", cache)
        settings = Settings()
        settings.update(values, "setup.cfg")
        report = run([versions], settings=settings, dialects=["sqlite"])
        return sorted((Path(f.path).name, f.code) for f in report.findings) + [report.baseline, report.excluded]

    for values in variants:
        assert answer(values, str(tmp_path / "cache")) == answer(values, "off"), values


def test_config_error_for_bad_exclude_and_memory_limit():
    for values in ({"exclude": "a**"}, {"lint_memory_limit": "-5"}, {"per-file-ignores": ": MP101"}):
        with pytest.raises(ConfigError) as info:
            Settings().update(values, "pyproject.toml")
        assert str(info.value).startswith("pyproject.toml: ") and "\n" not in str(info.value)


def test_toml_tables_are_read(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.migrations_policy]\nbaseline = ["a", "b"]\nexclude = ["legacy/**"]\n'
        '[tool.migrations_policy.per-file-ignores]\n"versions/old/*.py" = ["MP101", "MP1"]\n')
    from migrations_policy.core.config import load_settings

    settings = load_settings(tmp_path)
    assert settings.baseline == ["a", "b"] and settings.exclude == ["legacy/**"]
    assert settings.per_file_ignores == {"versions/old/*.py": ["MP101", "MP1"]}


def _alembic(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "alembic", *args], cwd=cwd, capture_output=True, text=True,
                          env=_env(cwd))


def test_init_adopt_records_the_head_as_baseline_and_lint_skips_the_old_history(tmp_path):
    assert _alembic(tmp_path, "init", "migrations").returncode == 0
    versions = tmp_path / "migrations" / "versions"
    for i, down in enumerate([None, "old0", "old1"]):  # years of history that drop columns in place
        (versions / f"old{i}.py").write_text(script(DROP.format(n=i), revision=f"old{i}", down=down))
    adopted = _cli(tmp_path, "init", "--adopt")
    assert adopted.returncode == 0, adopted.stderr
    assert f"wrote baseline = old2 in {tmp_path.resolve() / 'setup.cfg'}" in adopted.stdout
    assert (tmp_path / "setup.cfg").read_text() == "[migrations_policy]\nbaseline = old2\n"
    # not in alembic.ini: there a [migrations_policy] section makes plain alembic refuse an unwired env.py
    assert "migrations_policy" not in (tmp_path / "alembic.ini").read_text()
    lint = _cli(tmp_path, "lint", "--format", "json", "migrations/versions")
    import json

    report = json.loads(lint.stdout)
    assert lint.returncode == 0 and report["findings"] == [], lint.stdout + lint.stderr
    assert report["files"] == 2 and report["skipped"]["baseline"] == 3  # the two roots are checked
    every = _cli(tmp_path, "lint", "--include-baseline", "migrations/versions")
    assert every.returncode == 1 and every.stdout.count(": MP101 [error]") == 3
    dbsync = subprocess.run([sys.executable, "-c", "from migrations_policy.cli import dbsync_main; "
                             "raise SystemExit(dbsync_main())", "lint"], cwd=tmp_path, capture_output=True, text=True,
                            env=_env(tmp_path))
    assert dbsync.returncode == 0 and "3 at or before the baseline not checked" in dbsync.stdout, dbsync.stdout


def test_init_adopt_with_alembics_pyproject_template_writes_the_toml_table(tmp_path):
    assert _alembic(tmp_path, "init", "-t", "pyproject", "migrations").returncode == 0
    (tmp_path / "migrations" / "versions" / "first.py").write_text(script(DROP.format(n=1), revision="first"))
    assert _cli(tmp_path, "init", "--adopt").returncode == 0
    from migrations_policy.core.config import load_settings

    assert load_settings(tmp_path).baseline == ["first"]
    lint = _cli(tmp_path, "lint", "migrations/versions")
    assert lint.returncode == 0 and "1 at or before the baseline not checked" in lint.stdout, lint.stdout


def test_replay_runs_the_baseline_history_but_reports_only_after_it(tmp_path, monkeypatch):
    """--replay needs every script from base (the baseline builds the schema the others run on)."""
    from migrations_policy.lint.scratch.database import Target

    monkeypatch.chdir(tmp_path)
    versions = tmp_path / "versions"
    versions.mkdir()
    (versions / "a.py").write_text(script('op.create_table("t", sa.Column("id", sa.Integer, primary_key=True),\n'
                                          '                sa.Column("c_a", sa.Integer))', revision="a"))
    (versions / "b.py").write_text(script(DROP.format(n="a"), revision="b", down="a"))
    (versions / "c.py").write_text(script('op.add_column("t", sa.Column("x", sa.Integer))\n' + DROP.format(n="a2"),
                                          revision="c", down="b"))
    settings = Settings()
    settings.update({"baseline": "b"}, "setup.cfg")
    report = run([versions], settings=settings, dialects=["sqlite"], replay=Target(url=f"sqlite:///{tmp_path}/s.db"))
    assert report.baseline == 2 and report.files == 1
    # c runs on the schema a and b built: its add_column succeeds, its drop of a missing column is refused
    found = {(Path(f.path).name, f.code) for f in report.findings}
    assert {name for name, _ in found} == {"c.py"} and ("c.py", "MP004") in found, found
    assert ("c.py", "MP000") not in found  # was "not replayed": its parent b was left out of the replay
