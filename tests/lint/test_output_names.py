"""File names and messages from scripts in JUnit and SARIF (red-team F8).

Generated names and table names draw on characters XML 1.0 forbids (controls, U+FFFE, U+FFFF, undecodable
bytes), URI delimiters (``#``, ``%``, ``?``, space), backslashes and pairs that read alike once escaped
(``a\\x1b.py`` and a name with a real ESC).  JUnit parses with one testcase per file; SARIF parses and each
``artifactLocation.uri`` is a relative URI reference that decodes to the finding's path.
"""

from __future__ import annotations

import json
import os
import random
import re
from urllib.parse import unquote
from xml.etree import ElementTree as ET

import pytest

from migrations_policy import cli

from .conftest import script

POOL = ["a", "b", "Z", "0", "_", "-", ".", " ", "#", "%", "%zz", "?", "\\", "\\x1b", "\x1b", "\n", "\t", "\x0b",
        "\x7f", "\x85", "\ufffe", "\uffff", "\ufdd0", "é", "☃", "\U0001f600", "\U0010fffe", os.fsdecode(b"\xff"),
        "&", "<", "]]>", '"', "'"]
#: A URI reference as RFC 3986 allows it: unreserved, reserved but '#' '?' (none here), and %HH escapes.
URI = re.compile(r"(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/]|%[0-9A-F]{2})*")


def _text(rng: random.Random) -> str:
    return "".join(rng.choice(POOL) for _ in range(rng.randint(1, 6)))


@pytest.mark.parametrize("seed", range(3))
def test_junit_and_sarif_of_hostile_names_and_messages(seed, tmp_path, capsys):
    rng = random.Random(seed)
    tree = tmp_path / "versions"
    tree.mkdir()
    names = {"a\\x1b", "a\x1b", "b\\\\n", "b\\\n"}  # alike once escaped
    while len(names) < 12:
        names.add(_text(rng))
    for number, name in enumerate(sorted(names)):
        table = _text(rng)
        (tree / f"{name}.py").write_text(script(f"op.drop_column({table!r}, 'c')", revision=f"r{number}"),
                                         encoding="utf-8", errors="surrogateescape")
    args = ["--phase", "expand", "--dialect", "postgresql", str(tree)]

    assert cli.main(["lint", "--format", "json", *args]) == 1
    found = json.loads(capsys.readouterr().out)["findings"]
    paths = {f["path"] for f in found}
    assert len(paths) == len(names)

    assert cli.main(["lint", "--format", "junit", *args]) == 1
    out = capsys.readouterr().out
    cases = [case.get("name") for case in ET.fromstring(out.encode()).iter("testcase")]
    assert sorted(cases) == sorted(paths)  # one testcase per file

    assert cli.main(["lint", "--format", "sarif", *args]) == 1
    results = json.loads(capsys.readouterr().out)["runs"][0]["results"]
    uris = [r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in results]
    for uri, finding in zip(uris, found):
        assert URI.fullmatch(uri), uri
        assert unquote(uri) == finding["path"]
