"""A script's cached verdict depends on the files it reads (red-team F5), generated.

Each script executes SQL read from a sibling file (``open``, ``pathlib``, ``os.open``, ``io.open``, through a
helper module, a file absent at first -- opened, not merely tested with ``os.path.exists``, which no audit
event reports); the file then changes from harmless to a column drop, or appears:
the warm run must give what a cold run gives.
"""

from __future__ import annotations

import random

import pytest

from migrations_policy.lint import run

from .conftest import script

HARMLESS = "CREATE TABLE audit_{n} (id int);"
DROP = "ALTER TABLE users DROP COLUMN c{n};"
READERS = [
    'op.execute(open(os.path.join(os.path.dirname(__file__), "{data}")).read())',
    'op.execute(pathlib.Path(__file__).with_name("{data}").read_text())',
    'fd = os.open(os.path.join(os.path.dirname(__file__), "{data}"), os.O_RDONLY)\n'
    'op.execute(os.read(fd, 1 << 16).decode())',
    'op.execute(io.open(os.path.join(os.path.dirname(__file__), "{data}"), encoding="utf-8").read())',
    'import sys\nsys.path.insert(0, os.path.dirname(__file__))\nimport sql_helper_{n}\n'
    'op.execute(sql_helper_{n}.load("{data}"))',
    'try:\n    op.execute(open(os.path.join(os.path.dirname(__file__), "{data}")).read())\n'
    'except FileNotFoundError:\n    pass',
]
PRELUDE = "import io, os, pathlib\n"


def _codes(paths) -> set[tuple[str, str]]:
    return {(f.path.rsplit("/", 1)[-1], f.code) for f in run(paths, phase="expand", dialects=["postgresql"]).findings}


@pytest.mark.parametrize("seed", range(2))
def test_a_changed_data_file_is_linted_again(seed, tmp_path, monkeypatch):
    rng = random.Random(seed)
    tree = tmp_path / "versions"
    tree.mkdir()
    datas = []
    for n, reader in enumerate(READERS):
        data = tree / f"d{n}_{rng.randrange(10 ** 6)}.sql"
        if "FileNotFoundError" not in reader:
            data.write_text(HARMLESS.format(n=n))
        (tree / f"sql_helper_{n}.py").write_text(
            "import os\n\ndef load(name):\n    with open(os.path.join(os.path.dirname(__file__), name)) as fh:\n"
            "        return fh.read()\n")
        (tree / f"s{n}.py").write_text(PRELUDE + script(reader.format(data=data.name, n=n), revision=f"s{n}"))
        datas.append((n, data))
    scripts = [tree / f"s{n}.py" for n in range(len(READERS))]
    first = _codes(scripts)
    assert not {code for _, code in first} & {"MP101", "MP000"}, first
    for n, data in rng.sample(datas, len(datas)):
        data.write_text(DROP.format(n=n))
    warm = _codes(scripts)
    monkeypatch.setenv("MIGRATIONS_POLICY_CACHE_DIR", "off")
    cold = _codes(scripts)
    assert warm == cold
    assert {name for name, code in cold if code == "MP101"} == {f"s{n}.py" for n in range(len(READERS))}
