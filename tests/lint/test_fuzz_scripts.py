"""Generated hostile migration trees: the lint CLI keeps its promises whatever the scripts are (issue 13).

Each tree is built from a seed by combining fragments — odd headers, odd ``upgrade`` shapes, hostile bodies,
odd encodings and odd files — and ``migrations-policy lint`` runs over it in a subprocess: every output format,
one and two workers, cold and warm cache.  Invariants checked on every run:

- the exit code is 0, 1, 2 or 3, never 0 or 1 when a file is MP000 (and 3 only with an internal error line);
- no traceback (nor a script's own output) in stdout/stderr without ``--debug``;
- JSON, SARIF and JUnit are well formed; JUnit has one testcase per file checked, and every file given on the
  command line is checked; a file has at most one MP000, and a MP000 is its only finding;
- the same findings with 1 and 2 workers, with a cold and a warm cache;
- no placeholder or object repr (``<object object at 0x…>``) in a message;
- the run ends within a generous bound.

CI runs ``MP_FUZZ_TREES`` trees (default 4, six scripts each) from ``MP_FUZZ_SEED`` (default: random, printed).
Rerun a failure with the seed printed in the assertion: ``MP_FUZZ_SEED=<seed> MP_FUZZ_TREES=1``.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from migrations_policy.lint.output.report import printable_path

ROOT = str(Path(__file__).resolve().parents[2])
RUNNER = "import sys; from migrations_policy.cli import main; sys.exit(main(sys.argv[1:]))"
TIMEOUT = 2  # lint_timeout, seconds: no fragment that ends comes near it, even on a loaded machine
RUN_BOUND = 240  # seconds for one CLI run over one tree (generous: the machine is shared)
SCRIPTS_PER_TREE = 6
OBJECT_REPR = re.compile(r"<[\w.]+ object at 0x|<object object|<function \w|<built-in|<class '")

# --- fragments -------------------------------------------------------------------------------------------------------

# Each header is a template over {rid} (this script's id) and {down} (its parent's id, or None); a callable gets the
# random generator and the ids.


def _down_literal(down):
    return repr(down)


HEADERS = [
    lambda r, rid, down: f'revision = "{rid}"\ndown_revision = {_down_literal(down)}\n',
    lambda r, rid, down: f'revision = "{rid}"; down_revision = {_down_literal(down)}; branch_labels = None\n',
    lambda r, rid, down: f'revision = ("{rid}",)\ndown_revision = {_down_literal(down)}\n',
    lambda r, rid, down: f'revision = "{rid}"\ndown_revision = [{_down_literal(down)}, "{rid}x"]\n',
    lambda r, rid, down: f"revision = None\ndown_revision = None\n",
    lambda r, rid, down: f"revision = {r.randint(0, 10 ** 30)}\ndown_revision = {r.choice(['0', '1.5', 'True'])}\n",
    lambda r, rid, down: f'revision = b"{rid}"\ndown_revision = b"{down}"\n',
    lambda r, rid, down: f'revision = f"{{\'{rid}\'}}"\ndown_revision = f"{down}"\n',
    lambda r, rid, down: f'REV = "{rid}"\nrevision = REV\ndown_revision = REV\n',  # its own parent: a cycle
    lambda r, rid, down: f'from string import digits as revision\ndown_revision = "{rid}"\n',
    lambda r, rid, down: f'from os import sep\nrevision = sep\ndown_revision = {_down_literal(down)}\n',
    lambda r, rid, down: f'revision: str = "{rid}"\ndown_revision: str | None = {_down_literal(down)}\n',
    lambda r, rid, down: f'revision = "dup"\ndown_revision = {_down_literal(down)}\n',  # duplicate ids
    lambda r, rid, down: f'revision = "{rid}"\nrevision = "{rid}-again"\ndown_revision = "{rid}-again"\n',
    lambda r, rid, down: f'revision = "{rid}"\ndown_revision = {_down_literal(down)}\nbranch_labels = ("contract",)\n'
                         f'depends_on = object()\n',
    lambda r, rid, down: f'revision = "{rid}"\ndown_revision = {_down_literal(down)}\nbranch_labels = ' +
                         r.choice(['"expand"', '42', 'object()', '["contract", None]', 'b"expand"']) + "\n",
    lambda r, rid, down: f'revision = "\\u00e9\\ud800{rid}"\ndown_revision = "\\x00"\n',
    lambda r, rid, down: f'revision = "{rid}" * 100000\ndown_revision = None\n',
    lambda r, rid, down: "",  # no header at all
    lambda r, rid, down: f'if True:\n    revision = "{rid}"\ndown_revision = {_down_literal(down)}\n',
]

# Statements an upgrade() body (or the module) runs.  {t} is a table name expression.
BODIES = [
    'op.drop_column("users", "c")',
    'op.add_column("users", sa.Column("n", sa.Integer(), nullable=False))',
    "import os\nos._exit({n})",
    "import sys\nsys.exit({n})",
    "raise SystemExit('bye')",
    "raise KeyboardInterrupt()",
    "raise GeneratorExit()",
    "class Boom(BaseException):\n    pass\nraise Boom()",
    "class E(Exception):\n    def __str__(self):\n        raise RuntimeError('no str')\n    def __repr__(self):\n"
    "        raise RuntimeError('no repr')\nraise E()",
    "class E(Exception):\n    def __str__(self):\n        return 42\n    __repr__ = __str__\nraise E()",
    "class M(type):\n    @property\n    def __name__(cls):\n        raise RuntimeError('no name')\n"
    "class E(Exception, metaclass=M):\n    pass\nraise E()",
    "while True:\n    try:\n        pass\n    except:\n        pass",
    "import signal\nfor s in (signal.SIGTERM, signal.SIGALRM, signal.SIGINT, signal.SIGUSR1):\n"
    "    signal.signal(s, signal.SIG_IGN)\nwhile True:\n    pass",
    "import os\nif os.fork() == 0:\n    import time\n    time.sleep(30)\nop.drop_column('users', 'forked')",
    "import os\nos.fork()\nop.drop_column('users', 'twice')",
    "import os\nos.write(1, b'{{\"findings\": []}}')\nos.write(2, b'Traceback (most recent call last)')",
    "print('Traceback (most recent call last):')\nimport sys\nprint('<object object at 0x1>', file=sys.stderr)",
    "import os\nos.close(1)\nos.close(2)\nop.drop_column('users', 'closed')",
    "import os\nos.dup2(os.open(os.devnull, os.O_RDONLY), 1)\nop.drop_column('users', 'nulled')",
    "import sys\nsys.stdout.write('x' * 5_000_000)\nsys.stdout.flush()",
    "import os\nos.write(2, b'y' * 3_000_000)",
    "def f(n):\n    return f(n + 1)\nf(0)",
    # a raised limit, still far from lint_timeout: at 10 ** 6 frames the RecursionError came after
    # 2.0-2.3 s, so runs of one tree differed (timed out / raised), about one run in four
    "import sys\nsys.setrecursionlimit(10 ** 5)\ndef f(n):\n    return f(n + 1)\nf(0)",
    "import alembic\nalembic.op = None\nop.drop_table('t')",
    "import alembic.op as o\no.drop_column = None\nop.drop_column('users', 'p')",
    "import sqlalchemy\nsqlalchemy.Column = None\nsqlalchemy.Integer = 5\nop.drop_table('t')",
    "import migrations_policy\nmigrations_policy.__dict__.clear()\nop.drop_table('t')",
    "import migrations_policy.lint.offline.recorder as r\nfor k in list(vars(r)):\n    if not k.startswith('__'):\n"
    "        setattr(r, k, None)\nop.drop_table('t')",
    "import sys\nfor k in list(sys.modules):\n    if k.startswith('migrations_policy'):\n        sys.modules[k] = None",
    "import builtins\nfor k in ('print', 'str', 'repr', 'isinstance', 'len', 'open', 'getattr', 'type'):\n"
    "    delattr(builtins, k)",
    "import builtins\nbuiltins.__import__ = None",
    "op.drop_column({t}, {t})",
    "op.drop_table({t})",
    "op.create_table({t}, sa.Column({t}, sa.Integer))",
    "op.alter_column({t}, 'c', nullable={t}, type_={t})",
    "op.rename_table({t}, {t})",
    "op.create_index({t}, {t}, [{t}])",
    "op.add_column({t}, {t})",
    "op.execute({sql})",
    "op.execute(sa.text({sql}))",
    "op.bulk_insert({t}, [{{'a': {t}}}])",
    "op.get_bind().execute({sql})",
    "for row in op.get_bind().execute(sa.text('select 1')):\n    op.drop_column(row[0], row[1])",
    "insp = sa.inspect(op.get_bind())\nfor t in insp.get_table_names():\n    op.drop_table(t)",
    "op.drop_column(*[None] * 7)",
    "op.execute()",
    "op.nonexistent_operation('x')",
    "import threading\nthreading.Thread(target=lambda: op.drop_table('late'), daemon=True).start()",
    "import gc\ngc.disable()\nx = [0] * 10 ** 7",
    "import os, signal\nos.kill(os.getpid(), signal.SIGSTOP)",
    "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)",
    "import os, signal\nos.killpg(0, signal.SIGTERM)",
    "import ctypes\nctypes.string_at(0)",
    "import faulthandler\nfaulthandler._sigsegv()",
    "import os\nos.setsid()\nop.drop_column('users', 'session')",
    "import os\nos.chdir('/')\nop.drop_column('users', 'moved')",
    "pass",
]

TABLE_NAMES = ["None", "object()", "42", "b'users'", "'users'", "''", "'\\x00'", "'\\ud800'", "'é' * 3",
               "['users']", "sa.Table('t', sa.MetaData())", "type('X', (), {'__str__': lambda s: 1/0})()",
               "'a' * 100000", "'`\"; drop table x; --'"]
SQL = ["'select 1'", "b'drop table users'", "'\\x00'", "'\\ud800 drop table x'", "None", "object()", "42",
       "'ALTER TABLE users DROP COLUMN c;' * 20000", "'' ", "'alter table users drop column \"\\u00e9\"'",
       "'/*'", "\"'\"", "'$$'", "'DROP TABLE \\x00 users'", "['drop table a']"]

UPGRADES = [
    "def upgrade():\n{body}\n",
    "def upgrade(op, tables=None, tester=None):\n{body}\n",
    "def upgrade(*args, **kwargs):\n{body}\n",
    "def upgrade(required, other):\n{body}\n",
    "def upgrade():\n{body}\n    yield\n",
    "async def upgrade():\n{body}\n",
    "async def upgrade():\n{body}\n    yield\n",
    "class upgrade:\n    def __init__(self):\n{body2}\n",
    "class _U:\n    @property\n    def upgrade(self):\n{body2}\nupgrade = _U().upgrade\n",
    "def _u():\n{body}\nupgrade = lambda: _u()\n",
    "upgrade = None\n",
    "upgrade = 42\n",
    "upgrade = print\n",
    "def _d(f):\n    raise RuntimeError('decorator')\n@_d\ndef upgrade():\n{body}\n",
    "def upgrade():\n{body}\ndel upgrade\n",
    "",  # no upgrade at all
    "def upgrade():\n{body}\ndef upgrade():\n    op.drop_column('users', 'second_definition')\n",
]

#: Odd bytes in file names: undecodable, line breaks, terminal escapes, separators the formats use.
NAME_TAILS = [os.fsdecode(b"\xff\xfe"), "\n", "\r", "\x1b[31m", " :1:1: MP999 ", ",title=x::", "%0A", "é日本",
              "&<>\"'", "\t", "\u2028"]

PRELUDE = "from alembic import op\nimport sqlalchemy as sa\n"


def _indent(text: str, level: int) -> str:
    return "\n".join(" " * level + line for line in text.splitlines())


def _body(r: random.Random) -> str:
    parts = []
    for _ in range(r.choice((1, 1, 2))):
        parts.append(r.choice(BODIES).format(t=r.choice(TABLE_NAMES), sql=r.choice(SQL), n=r.choice((0, 1, 2, 255))))
    return "\n".join(parts)


def _source(r: random.Random, rid: str, down) -> str:
    header = r.choice(HEADERS)(r, rid, down)
    body = _body(r)
    upgrade = r.choice(UPGRADES).format(body=_indent(body, 4), body2=_indent(body, 8))
    where = r.random()
    if where < 0.15:  # hostile at import time
        return PRELUDE + header + _body(r) + "\n" + upgrade
    if where < 0.25:  # the header last
        return PRELUDE + upgrade + header
    return f'"""fuzzed {rid}"""\n' + PRELUDE + header + "\n" + upgrade + "\ndef downgrade():\n    op.drop_table('x')\n"


def _encode(r: random.Random, source: str) -> bytes:
    how = r.random()
    if how < 0.5:
        return source.encode("utf-8", "surrogatepass")
    choice = r.choice(["bom", "latin1", "invalid", "crlf", "nul", "cr", "unknown_codec", "bom_latin1", "truncate",
                       "syntax", "empty", "tabs", "huge_line"])
    data = source.encode("utf-8", "surrogatepass")
    if choice == "bom":
        return b"\xef\xbb\xbf" + data
    if choice == "latin1":
        return b"# -*- coding: latin-1 -*-\n" + source.replace('"""fuzzed', '"""fuzzed \xe9').encode("latin-1",
                                                                                                    "replace")
    if choice == "invalid":
        return data.replace(b"\n", b"\n# \xff\xfe\xc3\x28\n", 2)
    if choice == "crlf":
        return data.replace(b"\n", b"\r\n")
    if choice == "cr":
        return data.replace(b"\n", b"\r")
    if choice == "nul":
        return data.replace(b"\n", b"\n\x00", 1)
    if choice == "unknown_codec":
        return b"# coding: no-such-codec\n" + data
    if choice == "bom_latin1":
        return b"\xef\xbb\xbf# coding: latin-1\n" + data
    if choice == "truncate":
        return data[: r.randint(0, len(data))]
    if choice == "syntax":
        position = r.randint(0, len(data))
        return data[:position] + r.choice([b"(", b"def", b"\n  ", b"'''", b"$"]) + data[position:]
    if choice == "empty":
        return b""
    if choice == "tabs":
        return data.replace(b"    ", b"\t")
    return data + b"\nx = " + b"1 + " * 20000 + b"1\n"  # RecursionError when compiled, quickly


def build_tree(seed: int, directory: Path, count: int = SCRIPTS_PER_TREE) -> list[Path]:
    """Write a generated tree of *count* entries into *directory*; return the paths to give on the command line."""
    r = random.Random(seed)
    directory.mkdir(parents=True)
    ids = [f"r{seed % 100000}_{i}" for i in range(count)]
    given = []
    for i, rid in enumerate(ids):
        down = r.choice([None, ids[i - 1] if i else None, r.choice(ids), "missing_parent"])
        path = directory / f"{i:02d}_{rid}{r.choice(NAME_TAILS) if r.random() < 0.3 else ''}.py"
        special = r.random()
        if special < 0.06 and i:
            os.symlink(given[-1].name, path)  # a symlink to another script
        elif special < 0.09:
            os.symlink(path.name, path)  # a symlink loop
        elif special < 0.12:
            os.symlink("does-not-exist.py", path)
        elif special < 0.14:
            path.mkdir()  # a directory named *.py
            (path / "inner.py").write_text(f'revision = "{rid}in"\ndown_revision = None\n{PRELUDE}'
                                           "def upgrade():\n    op.drop_table('inner')\n")
        elif special < 0.16:
            os.mkfifo(path)  # a reader that opens it blocks forever
        else:
            path.write_bytes(_encode(r, _source(r, rid, down)))
        given.append(path)
    return given


# --- running the CLI -------------------------------------------------------------------------------------------------


def _lint(cwd: Path, args: list[str], jobs: int, cache: str, seed: int) -> tuple[int, str, str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])),
               MIGRATIONS_POLICY_LINT_JOBS=str(jobs), MIGRATIONS_POLICY_CACHE_DIR=cache)
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-c", RUNNER, "lint", "--config", str(cwd / "fuzz.cfg"), *args],
                              cwd=cwd, env=env, capture_output=True, timeout=RUN_BOUND, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.fail(f"seed {seed}: lint {args} did not finish within {RUN_BOUND} s")
    assert time.monotonic() - started < RUN_BOUND
    return done.returncode, done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace")


def _common(seed: int, what: str, code: int, out: str, err: str) -> None:
    where = f"seed {seed} ({what})"
    assert code in (0, 1, 2, 3), (where, code, err[-2000:])
    assert "Traceback" not in out + err, (where, (out + err)[-3000:])
    assert not OBJECT_REPR.search(out), (where, OBJECT_REPR.search(out).group(0), out[-3000:])
    if code == 3:
        assert "internal error" in err, (where, err[-2000:])
    assert "garbage" not in out and "xxxxxxxxxx" not in out and "yyyyyyyyyy" not in err, where


def _verdicts(seed: int, what: str, code: int, out: str, given: list[Path]) -> dict:
    where = f"seed {seed} ({what})"
    try:
        document = json.loads(out)
    except ValueError:
        pytest.fail(f"{where}: not JSON (exit {code}): {out[-2000:]!r}")
    per_file: dict[str, list] = {}
    for finding in document["findings"]:
        per_file.setdefault(finding["path"], []).append((finding["line"], finding["code"], finding["message"],
                                                        finding["dialect"]))
    mp000 = {path for path, found in per_file.items() if any(f[1] == "MP000" for f in found)}
    for path in mp000:
        assert len(per_file[path]) == 1 or all(f[1] != "MP000" or f[3] for f in per_file[path]), \
            (where, path, per_file[path])
    if mp000:
        assert code in (2, 3), (where, code, sorted(mp000))
    errors = any(f["severity"] == "error" for f in document["findings"])
    assert code != 0 or not errors, (where, code)
    assert code == 0 or errors or mp000, (where, code)
    return {"findings": per_file, "files": document["files"], "code": code}


def _check_formats(seed: int, tree: Path, args: list[str], given: list[Path], json_run: dict, cache: str) -> None:
    code, out, err = _lint(tree.parent, ["--format", "junit", *args], 1, cache, seed)
    _common(seed, "junit", code, out, err)
    assert code == json_run["code"], (seed, "junit", code, json_run["code"])
    suites = ET.fromstring(out.encode())  # well-formed XML
    cases = [case.get("name") for case in suites.iter("testcase")]
    assert len(cases) == len(set(cases)) == json_run["files"], (seed, cases, json_run["files"])
    assert set(json_run["findings"]) <= set(cases), (seed, set(json_run["findings"]) - set(cases))
    if not any(a == str(tree) for a in args):  # files given one by one: each is checked
        missing = {printable_path(str(p)) for p in given if p.is_file()} - set(cases)
        assert not missing, (seed, sorted(missing), cases)
    code, out, err = _lint(tree.parent, ["--format", "sarif", *args], 2, cache, seed)
    _common(seed, "sarif", code, out, err)
    results = json.loads(out)["runs"][0]["results"]
    assert len(results) == sum(map(len, json_run["findings"].values())), seed
    for fmt in ("text", "github"):
        code, out, err = _lint(tree.parent, ["--format", fmt, *args], 2, cache, seed)
        _common(seed, fmt, code, out, err)
        assert code == json_run["code"], (seed, fmt, code, json_run["code"])


def fuzz_tree(seed: int, base: Path) -> int:
    """Lint one generated tree in every way; assert the invariants; return the number of entries."""
    r = random.Random(seed ^ 0x5EED)
    tree = base / f"tree{seed}"
    given = build_tree(seed, tree)
    (base / "fuzz.cfg").write_text(f"[migrations_policy]\nlint_timeout = {TIMEOUT}\n")
    args = ["--dialect", r.choice(["postgresql", "mysql", "sqlite"])]
    if r.random() < 0.5:
        args += ["--phase", r.choice(["expand", "contract"])]
    # files one by one: only regular files (a dangling symlink or a FIFO given is a usage error, exit 2:
    # test_a_fifo_is_no_script); in the directory, the rest stay as siblings
    targets = [str(tree)] if r.random() < 0.5 else [str(p) for p in given if p.is_file()]
    args += targets
    cache = str(base / f"cache{seed}")
    runs = []
    for jobs, cache_dir in ((1, "off"), (2, cache), (1, cache), (2, cache)):  # cold, cold filling, warm, warm
        code, out, err = _lint(base, ["--format", "json", *args], jobs, cache_dir, seed)
        _common(seed, f"json jobs={jobs} cache={cache_dir}", code, out, err)
        runs.append(_verdicts(seed, f"json jobs={jobs}", code, out, given))
    for run in runs[1:]:
        assert run == runs[0], (f"seed {seed}: results differ by worker count or cache", _diff(runs[0], run))
    _check_formats(seed, tree, args, given, runs[0], cache)
    return len(given)


def _diff(a: dict, b: dict) -> list:
    keys = set(a["findings"]) | set(b["findings"])
    return [(k, a["findings"].get(k), b["findings"].get(k)) for k in sorted(keys)
            if a["findings"].get(k) != b["findings"].get(k)] + [("code", a["code"], b["code"])]


def _seeds() -> list[int]:
    seed = os.environ.get("MP_FUZZ_SEED")
    first = int(seed) if seed else random.randrange(10 ** 9)
    trees = int(os.environ.get("MP_FUZZ_TREES", "4"))
    return [first + i for i in range(trees)]


SEEDS = _seeds()


@pytest.mark.parametrize("seed", SEEDS)
def test_generated_tree_keeps_the_run_s_promises(seed, tmp_path):
    print(f"MP_FUZZ_SEED={seed}")
    fuzz_tree(seed, tmp_path)


def test_a_fifo_is_no_script(tmp_path):
    """A FIFO named ``*.py`` (reading it blocks until a writer comes): given, a one-line usage error (exit 2); in
    a linted directory or next to a given script, skipped — the run finishes.  (Found by seed 110.)"""
    tree = tmp_path / "versions"
    tree.mkdir()
    (tree / "a.py").write_text(f'revision = "a"\ndown_revision = None\n{PRELUDE}def upgrade():\n'
                               "    op.drop_column('users', 'c')\n")
    os.mkfifo(tree / "fifo.py")
    (tmp_path / "fuzz.cfg").write_text("[migrations_policy]\nlint_timeout = 1\n")
    for args in ([str(tree)], [str(tree / "a.py")]):
        code, out, err = _lint(tmp_path, ["--format", "json", "--phase", "expand", *args], 1, "off", 110)
        assert code == 1 and [f["code"] for f in json.loads(out)["findings"]] == ["MP101"], (args, out, err)
    code, out, err = _lint(tmp_path, [str(tree / "fifo.py")], 1, "off", 110)
    assert code == 2 and out == "" and err.count("\n") == 1 and "fifo.py: not a regular file" in err, err


def test_paths_and_messages_from_scripts_are_printable_in_every_format(tmp_path):
    """A file name with undecodable bytes or a line break, a table name with NUL, ESC or a lone surrogate: every
    format is written (no UnicodeEncodeError traceback), JSON/SARIF/JUnit parse, the text output has one line per
    finding and no terminal escape.  (Found probing by hand while writing the fuzzer; NAME_TAILS now generates such names.)"""
    tree = tmp_path / "versions"
    tree.mkdir()
    names = [os.fsdecode(b"bad\xff"), "new\nline", "plain"]
    tables = ['"us\\x00ers\\x1b[31m"', '"us\\ud800ers"', '"users"']
    for i, (name, table) in enumerate(zip(names, tables)):
        (tree / f"{name}.py").write_text(f'revision = "r{i}"\ndown_revision = None\n{PRELUDE}def upgrade():\n'
                                         f"    op.drop_column({table}, 'c')\n", errors="surrogateescape")
    (tmp_path / "fuzz.cfg").write_text("[migrations_policy]\nlint_timeout = 1\n")
    args = ["--phase", "expand", "--dialect", "postgresql", str(tree)]
    for fmt in ("text", "json", "junit", "sarif", "github"):
        code, out, err = _lint(tmp_path, ["--format", fmt, *args], 1, "off", 0)
        assert code == 1 and err == "" and "\x1b" not in out and "\x00" not in out, (fmt, code, err)
        if fmt == "json":
            assert sorted(f["path"].rsplit("/", 1)[1] for f in json.loads(out)["findings"]) == \
                ["bad\\udcff.py", "new\\nline.py", "plain.py"]
        elif fmt == "sarif":
            assert len(json.loads(out)["runs"][0]["results"]) == 3
        elif fmt == "junit":
            assert len(list(ET.fromstring(out.encode()).iter("testcase"))) == 3
        elif fmt == "text":
            assert len([line for line in out.splitlines() if ": MP101 [error] " in line]) == 3


def test_every_header_shape_that_declares_a_revision_is_linted_in_a_directory(tmp_path):
    """Each generated header that assigns or imports ``revision`` (f-string, constant, imported name, in an ``if``,
    bytes, a number, a tuple...): alembic loads that file, so linting its directory gives it a verdict instead of
    skipping it silently.  (Found linting the HEADERS fragments of this fuzzer as one directory.)"""
    r = random.Random(13)
    tree = tmp_path / "versions"
    tree.mkdir()
    expected = set()
    for i, make in enumerate(HEADERS):
        header = make(r, f"h{i}", None)
        path = tree / f"h{i:02d}.py"
        path.write_text(PRELUDE + header + "def upgrade():\n    op.drop_column('users', 'c')\n")
        if header:
            expected.add(str(path))
    (tree / "helper.py").write_text("def revision_of(x):\n    return x\n")  # no revision: not a script
    (tmp_path / "fuzz.cfg").write_text("[migrations_policy]\nlint_timeout = 1\n")
    code, out, err = _lint(tmp_path, ["--format", "junit", "--phase", "expand", "--dialect", "sqlite", str(tree)], 1,
                           "off", 13)
    cases = {case.get("name") for case in ET.fromstring(out.encode()).iter("testcase")}
    assert cases == expected, (sorted(expected - cases), sorted(cases - expected))


def test_an_error_naming_a_script_s_object_reads_the_same_every_run(tmp_path):
    """SQLAlchemy's error about a script's object (``got <module.X object at 0x7f…>``): the message names the
    object without its address, and the module name does not change per process — two cold runs agree.
    (Found by seed 1026.)"""
    tree = tmp_path / "versions"
    tree.mkdir()
    # (raised by upgrade(): since issue 28 a module-level statement that raises is loaded around, not MP000)
    (tree / "a.py").write_text(f'revision = "a"\ndown_revision = None\n{PRELUDE}class X:\n    pass\n'
                               "def upgrade():\n    raise ValueError(X())\n")
    (tmp_path / "fuzz.cfg").write_text("[migrations_policy]\nlint_timeout = 2\n")
    args = ["--format", "json", "--phase", "expand", "--dialect", "postgresql", str(tree)]
    first, second = (_lint(tmp_path, args, 1, "off", 1026) for _ in range(2))
    assert first == second and first[0] == 2, (first, second)
    (finding,) = json.loads(first[1])["findings"]
    assert finding["code"] == "MP000" and " object>" in finding["message"] and " at 0x" not in finding["message"]
