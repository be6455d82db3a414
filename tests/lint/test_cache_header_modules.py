"""The cached revision header follows the modules it was resolved through.

``branch_labels = (migration.CONTRACT_BRANCH,)`` is read from ``migration.py``'s source;
the stat index used to keep the header as long as the *script* was unchanged, so
editing the constant gave a stale phase (warm: no findings; cold: MP101).  Generated
chains of constant modules, edited at a random link, must answer as a cold run.
"""

from __future__ import annotations

import random

import pytest

from migrations_policy.lint import run

SCRIPT = '''from alembic import op
from {package} import {first}
revision = "{revision}"
down_revision = None
branch_labels = ({first}.LABEL,)
def upgrade():
    op.drop_column("t", "c")
'''


def _write_chain(root, rng: random.Random, length: int, label: str) -> list:
    """pkg/m0.py: LABEL = m1.LABEL ... pkg/mN.py: LABEL = "<label>" (the chain the header resolves)."""
    package = root / "pkg"
    package.mkdir(exist_ok=True)
    (package / "__init__.py").write_text("")
    files = []
    for index in range(length):
        last = index == length - 1
        style = rng.choice(["from", "import"])
        if last:
            text = f'LABEL = "{label}"\n'
        elif style == "from":
            text = f"from pkg.m{index + 1} import LABEL as _L\nLABEL = _L\n"
        else:
            text = f"from pkg import m{index + 1}\nLABEL = m{index + 1}.LABEL\n"
        (package / f"m{index}.py").write_text(text)
        files.append(package / f"m{index}.py")
    return files


def _answer(path, monkeypatch, cache) -> list:
    monkeypatch.setenv("MIGRATIONS_POLICY_CACHE_DIR", cache)
    return sorted((f.code, f.phase) for f in run([path], dialects=["postgresql"]).findings)


@pytest.mark.parametrize("seed", [0, 5, 11])
def test_editing_a_constant_module_of_the_header_is_seen_by_a_warm_run(tmp_path, monkeypatch, seed):
    rng = random.Random(seed)
    monkeypatch.chdir(tmp_path)
    versions = tmp_path / "versions"
    versions.mkdir()
    chain = _write_chain(tmp_path, rng, rng.randint(1, 3), "contract")
    script = versions / "a.py"
    script.write_text(SCRIPT.format(package="pkg", first="m0", revision="a"))
    cache = str(tmp_path / "cache")
    assert _answer(versions, monkeypatch, cache) == []  # a drop in a contract script
    label = "contract"
    for _ in range(3):
        label = "expand" if label == "contract" else "contract"
        edited = rng.choice(chain)  # a link in the middle: the chain is cut short there
        edited.write_text(f'LABEL = "{label}"\n')
        warm = _answer(versions, monkeypatch, cache)
        assert warm == _answer(versions, monkeypatch, "off"), (seed, edited.name, label)
        resolved = next(text for text in (link.read_text() for link in chain) if text.startswith("LABEL = \""))
        assert warm == ([("MP101", "expand")] if "expand" in resolved else [])
