"""Revision headers: the fast literal reader agrees with ``ast.literal_eval`` on every form."""

from __future__ import annotations

import ast

import pytest

from migrations_policy.lint.script.headers import _literal, read_header

FORMS = ["None", "'a'", '"b"', "''", "('a',)", "('a', 'b')", "('a')", "['a']", "[]", "()", "( )", "( 'a' , 'b' , )",
         "('a''b')", "'a' 'b'", "r'a'", "b'a'", "f'a'", "'a\\'b'", "('a', None)", '("x",)', "'é'", "['a', 'b',]",
         "('a',,)", "('a' 'b',)", "[('a')]", "1", "{'a'}", "'''x'''", '"a\'"', "(,)", "[,]", "('a' , )", "'a\\nb'",
         "'a\\x'", "('a']", "['a')", "'a", "('a', 'b'", "(('a',),)", "\"it's\""]


@pytest.mark.parametrize("raw", FORMS)
def test_literal_is_literal_eval(raw):
    def outcome(fn):
        try:
            value = fn(raw)
        except (ValueError, SyntaxError) as exc:
            return type(exc).__name__
        return type(value), value

    assert outcome(_literal) == outcome(ast.literal_eval)


def test_read_header():
    header = read_header("revision = 'r2'\ndown_revision = ('r0', 'r1')  # merge\nbranch_labels = (\"expand\")\n")
    assert (header.revision, header.down_revisions, header.branch_labels) == ("r2", ("r0", "r1"), ("expand",))
    assert read_header("revision: str = \"r1\"\ndown_revision = broken(\n").down_revisions == ()
