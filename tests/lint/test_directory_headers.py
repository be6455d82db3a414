"""Directory mode never skips a script alembic would load as a revision (red-team F2).

Alembic imports every ``.py`` file of a versions directory and needs a ``revision`` attribute.  Generated modules
bind ``revision`` in every way Python allows (tuple / list / starred targets, ``:=``, ``for``, ``import ... as``,
``globals()[...]``, ``exec``, inside ``if`` / ``try``), after preludes of random size (beyond the 20,000 characters
once read); Python itself is the oracle (the module is executed in a fresh namespace).  Each module that binds
``revision`` is collected, and its header either reads the same id or the file is reported unreadable (MP000);
a module that only mentions the word in a comment or a bare string is skipped.
"""

from __future__ import annotations

import os
import random

import pytest

from migrations_policy import lint
from migrations_policy.lint import collect

SEED = int(os.environ.get("MP_FUZZ_SEED", random.randrange(1 << 30)))
NAMES = ["a", "b", "_", "down_revision"]


def _target(r: random.Random, depth: int = 0) -> tuple[str, str]:
    """(target source containing ``revision``, a value source that unpacks into it)."""
    kind = r.choice(["name", "tuple", "list", "star"] if depth < 2 else ["name"])
    if kind == "name":
        return "revision", repr(f"id{r.randrange(1000)}")
    parts = [(n, repr(n)) for n in r.sample(NAMES, r.randrange(0, 3))]
    inner = _target(r, depth + 1)
    parts.insert(r.randrange(len(parts) + 1), inner)
    if kind == "star":
        extra = [repr("s") for _ in range(r.randrange(3))]
        where = r.randrange(len(parts) + 1)
        targets = [t for t, _ in parts]
        values = [v for _, v in parts]
        targets.insert(where, "*rest")
        values[where:where] = extra
        return f"[{', '.join(targets)}]", f"[{', '.join(values)}]"
    open_, close = ("(", ",)") if kind == "tuple" else ("[", "]")
    return open_ + ", ".join(t for t, _ in parts) + close, open_ + ", ".join(v for _, v in parts) + close


def _binding(r: random.Random) -> str:
    value = repr(f"id{r.randrange(1000)}")
    target, source = _target(r)
    forms = [
        f"{target} = {source}",
        f"revision: str = {value}",
        f"(revision := {value})",
        f"[revision := {value} for _ in [0]]",
        f"for revision in [{value}]:\n    pass",
        f"import string as revision",
        f"from os import sep as revision",
        f'globals()["revision"] = {value}',
        f"globals().update(revision={value})",
        f'exec("revision = " + repr({value}))',
        f"def revision():\n    pass",
        f"def setup():\n    global revision\n    revision = {value}\nsetup()",
    ]
    statement = r.choice(forms)
    wrap = r.choice(["", "if", "try"])
    indented = "\n".join("    " + line for line in statement.splitlines())
    if wrap == "if":
        return f"if True:\n{indented}\n"
    if wrap == "try":
        return f"try:\n{indented}\nexcept Exception:\n    pass\n"
    return statement + "\n"


def _prelude(r: random.Random) -> str:
    size = r.choice([0, 10, 19_990, 20_010, 30_000])
    kind = r.choice(["comment", "docstring", "code"])
    if kind == "comment":
        return "# " + "x" * size + "\n"
    if kind == "docstring":
        return '"""' + "doc\n" * (size // 4) + '"""\n'
    return "".join(f"v{i} = {i}\n" for i in range(size // 10))


def _mention_only(r: random.Random) -> str:
    return r.choice(["# revision = 'x'\n", '"""The revision of the schema."""\n',
                     "def f():\n    '''revision = \"x\"'''\n", "process_revision_directives = None\n"])


def _bound(source: str):
    namespace: dict = {}
    exec(compile(source, "<generated>", "exec"), namespace)  # noqa: S102 - our own generated module
    return namespace.get("revision", _bound)


@pytest.mark.parametrize("case", range(12))
def test_generated_bindings_are_collected(tmp_path, case):
    r = random.Random(SEED * 100 + case)
    expected = {}
    for i in range(20):
        if r.random() < 0.2:
            source = _prelude(r) + _mention_only(r) + "down_revision = None\n"
        else:
            source = _prelude(r) + _binding(r) + "down_revision = None\n"
        path = tmp_path / f"s{i:02}.py"
        path.write_text(source)
        expected[path] = _bound(source)
    headers, unreadable = {}, set()
    files = set(collect([tmp_path], headers, unreadable=unreadable))
    for path, bound in expected.items():
        text = path.read_text()[-400:]
        if bound is _bound:
            assert path not in files, f"seed {SEED}: mentions revision only, yet collected: {text}"
            continue
        assert path in files, f"seed {SEED}: alembic loads it, the linter skipped it: {text}"
        header = headers[path]
        if header.revision is not None:
            assert header.revision == bound, f"seed {SEED}: read {header.revision!r}, Python binds {bound!r}: {text}"
        else:
            assert path in unreadable, f"seed {SEED}: no id read and not reported: {text}"


def test_unreadable_header_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setenv("MIGRATIONS_POLICY_CACHE_DIR", "off")
    (tmp_path / "a.py").write_text('exec("revision = \'h9\'")\ndown_revision = None\ndef upgrade():\n    pass\n')
    (tmp_path / "b.py").write_text('revision, down_revision = "h1", None\ndef upgrade():\n    pass\n')
    report = lint.run([tmp_path], dialects=["postgresql"])
    assert report.files == 2
    assert [(f.path.rsplit("/", 1)[-1], f.code) for f in report.findings] == [("a.py", "MP000")]
