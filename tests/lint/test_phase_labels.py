"""The branch label a revision inherits (``PhaseResolver._label``): deep merge histories, random DAGs (red-team F7).

500 successive merge revisions once ended the run with a RecursionError (exit 3): the label is now found
iteratively.  Random histories (chains, merges, labels, cycles, parents outside the files) are compared with the
definition, written recursively here: own label, else the first parent (in ``down_revision`` order) with one.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from migrations_policy.lint.script.headers import Header, PhaseResolver

SEED = int(os.environ.get("MP_FUZZ_SEED", random.randrange(1 << 30)))


def _resolver(headers: list[Header]) -> PhaseResolver:
    known = {Path(f"/v/{h.revision}.py"): h for h in headers}
    return PhaseResolver(list(known), known, read=lambda path: None, listings={Path("/v"): list(known)})


def _definition(by_revision, header, path=()):
    if header.revision in path:
        return None  # a cycle
    own = next((p for p in ("expand", "contract") if p in header.branch_labels), None)
    if own:
        return own
    for down in header.down_revisions:
        if down in by_revision:
            found = _definition(by_revision, by_revision[down], path + (header.revision,))
            if found:
                return found
    return None


def test_deep_merge_history():
    headers = [Header("m0", (), ("expand",))]
    for i in range(1, 3000):
        headers += [Header(f"x{i}", (), ()), Header(f"m{i}", (f"x{i}", f"m{i - 1}"), ())]
    resolver = _resolver(headers)
    assert resolver.phase(Path("/v/m2999.py"), headers[-1]) == "expand"


@pytest.mark.parametrize("case", range(30))
def test_random_histories_match_the_definition(case):
    r = random.Random(SEED * 100 + case)
    count = r.randrange(2, 40)
    headers = []
    cyclic = case % 3 == 0  # alembic refuses a cycle: then only no crash, no hang
    for i in range(count):
        parents = count + 3 if cyclic else i + 2  # r{i} and r{i+1} may be outside the files or later: none
        downs = tuple(f"r{r.randrange(parents) if cyclic else r.randrange(parents) - 2 if r.random() < 0.9 else count + 1}"
                      for _ in range(r.choice([0, 1, 1, 1, 2, 3])))
        labels = (r.choice(["expand", "contract", "other"]),) if r.random() < 0.15 else ()
        headers.append(Header(f"r{i}", downs, labels))
    by_revision = {h.revision: h for h in headers}
    resolver = _resolver(headers)
    for header in r.sample(headers, len(headers)):  # any order: the memo must not depend on it
        found = resolver._label(header)
        if not cyclic:
            assert found == _definition(by_revision, header), (SEED, case, header)
