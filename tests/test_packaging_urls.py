"""The project's address is written in three places that must agree: the packaging
metadata (``url`` and ``project_urls`` in setup.cfg), the rule links in lint output,
and the pre-commit example in docs/ci.rst.  Changing it means changing all three;
this test fails until they agree again."""

from __future__ import annotations

import configparser
import re
from pathlib import Path

from migrations_policy.lint.output.report import RULES_URL, rule_url

ROOT = Path(__file__).resolve().parents[1]


def _metadata() -> configparser.SectionProxy:
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    return parser["metadata"]


def test_project_urls_rule_links_and_pre_commit_example_share_one_address():
    metadata = _metadata()
    home = metadata["url"].strip()
    assert re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", home), home
    urls = dict(line.split(" = ", 1) for line in metadata["project_urls"].strip().splitlines())
    assert set(urls) == {"Source", "Documentation", "Changelog", "Issues"}
    assert all(url.startswith(home + "/") or url == home for url in urls.values()), urls
    assert RULES_URL.startswith(home + "/blob/main/docs/rules")
    pre_commit = re.findall(r"repo: (\S+)", (ROOT / "docs" / "ci.rst").read_text())
    assert pre_commit and set(pre_commit) == {home}


def test_every_link_points_at_a_file_in_this_checkout():
    """The rule pages, the docs folder and the changelog the links name exist here (as they will at the address)."""
    home = _metadata()["url"].strip()
    for code in ("MP101", "MP103", "MP121", "MP160"):
        assert (ROOT / rule_url(code).removeprefix(home + "/blob/main/")).is_file(), code
    urls = dict(line.split(" = ", 1) for line in _metadata()["project_urls"].strip().splitlines())
    assert (ROOT / urls["Changelog"].removeprefix(home + "/blob/main/")).is_file()
    assert (ROOT / urls["Documentation"].removeprefix(home + "/tree/main/")).is_dir()
