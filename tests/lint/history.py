"""Seeded random alembic histories for the replay tests, with what a replay must find in each script.

``generate(seed, size)`` builds a revision tree -- chains, branch points, merges -- whose
scripts create tables, add and drop columns, reflect the live schema and act on what they
find (``sa.inspect(op.get_bind())``), or fail on the database (a column added to a table
that does not exist).  The generator models the schema at every revision, so each script
knows what a replay from base must report for it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

_HEADER = '''"""{kind}"""
from alembic import op
import sqlalchemy as sa

revision = "{revision}"
down_revision = {down!r}
branch_labels = None


def upgrade():
{body}


def downgrade():
    pass
'''


@dataclass
class Script:
    revision: str
    down: tuple[str, ...]
    kind: str
    body: str
    #: The table a failing script names (the database's error must name it).
    missing_table: str = ""
    #: A replay must report MP101 (a column dropped in an expand script) here.
    drops: bool = False

    def source(self) -> str:
        down = None if not self.down else self.down[0] if len(self.down) == 1 else self.down
        return _HEADER.format(kind=self.kind, revision=self.revision, down=down,
                              body="\n".join("    " + line for line in self.body.splitlines()))


@dataclass
class History:
    scripts: list[Script] = field(default_factory=list)

    def write(self, directory: Path) -> dict[str, Path]:
        directory.mkdir(parents=True, exist_ok=True)
        paths = {}
        for number, script in enumerate(self.scripts):
            paths[script.revision] = directory / f"{number:03d}_{script.revision}.py"
            paths[script.revision].write_text(script.source())
        return paths

    def failing(self) -> set[str]:
        return {s.revision for s in self.scripts if s.kind == "fails"}

    def blocked(self) -> set[str]:
        """Revisions with a failing ancestor: not replayed."""
        by_revision = {s.revision: s for s in self.scripts}
        found: set[str] = set()

        def has_failed_ancestor(revision: str) -> bool:
            return any(parent in self.failing() or has_failed_ancestor(parent) for parent in by_revision[revision].down)

        for script in self.scripts:
            if has_failed_ancestor(script.revision):
                found.add(script.revision)
        return found


def generate(seed: int, size: int = 14, fail_rate: float = 0.12) -> History:
    """A history of *size* scripts (see the module docstring), the same for the same *seed*."""
    rng = random.Random(seed)
    history = History()
    # revision -> {table: (columns, number of the change that made them)}.  One head at a time owns a table
    # (may change it): a branch point gives the new branch no table, a merge none; so a table's changes form
    # a chain and a merge takes the later of its parents' versions.
    schema: dict[str, dict[str, tuple[tuple[str, ...], int]]] = {}
    owned: dict[str, set[str]] = {}
    heads: list[str] = []
    counter = [0]

    def new_revision() -> str:
        counter[0] += 1
        return f"r{seed}x{counter[0]:02d}"

    def add(down: tuple[str, ...], tables: dict, mine: set, kind: str, body: str, **kw) -> str:
        revision = new_revision()
        history.scripts.append(Script(revision, down, kind, body, **kw))
        failed = kind == "fails"
        schema[revision], owned[revision] = tables, mine
        for parent in down:
            if parent in heads:
                heads.remove(parent)
        heads.append(revision)
        if failed:
            heads.remove(revision)  # nothing builds on a script that cannot apply... sometimes
            if rng.random() < 0.5:
                heads.append(revision)
        return revision

    def ancestry(revision: str) -> set[str]:
        parents = next(s.down for s in history.scripts if s.revision == revision)
        return set(parents).union(*(ancestry(p) for p in parents)) if parents else set()

    def create_table(down: tuple[str, ...], tables: dict, mine: set) -> str:
        name = f"t_{seed}_{counter[0] + 1}"
        body = f'op.create_table("{name}", sa.Column("id", sa.Integer, primary_key=True), sa.Column("c0", sa.Integer))'
        return add(down, {**tables, name: (("id", "c0"), counter[0])}, mine | {name}, "create table", body)

    def change(tables: dict, table: str, columns: tuple[str, ...]) -> dict:
        return {**tables, table: (columns, counter[0])}

    create_table((), {}, set())
    while len(history.scripts) < size:
        unrelated = [(a, b) for a in heads for b in heads if a < b and not (ancestry(a) & {b}) and not (ancestry(b) & {a})]
        if unrelated and rng.random() < 0.2:
            left, right = rng.choice(unrelated)
            tables = {t: max(v for v in (schema[left].get(t), schema[right].get(t)) if v is not None)
                      for t in {*schema[left], *schema[right]}}
            create_table((left, right), tables, set())  # a merge (it creates a table of its own)
            continue
        if not heads:
            create_table((), {}, set())  # a second root
            continue
        parent = rng.choice(heads)
        tables, mine = dict(schema[parent]), set(owned[parent])
        if rng.random() < 0.2:  # a branch point: the parent stays a head for a sibling
            heads.append(parent)
            mine = set()
        choice = rng.random()
        mutable = sorted(t for t in mine if t in tables)
        if choice < fail_rate:
            missing = f"missing_{seed}_{counter[0] + 1}"
            add((parent,), tables, mine, "fails", f'op.add_column("{missing}", sa.Column("x", sa.Integer))',
                missing_table=missing)
        elif choice < 0.35 or not mutable:
            create_table((parent,), tables, mine)
        else:
            table = rng.choice(mutable)
            columns = tables[table][0]
            kind = rng.choice(["add column", "drop column", "reflect"])
            if kind == "add column":
                column = f"c{len(columns)}_{counter[0] + 1}"
                add((parent,), change(tables, table, (*columns, column)), mine, kind,
                    f'op.add_column("{table}", sa.Column("{column}", sa.Integer, nullable=True))')
            elif kind == "drop column" and len(columns) > 1:
                column = rng.choice(columns[1:])
                add((parent,), change(tables, table, tuple(c for c in columns if c != column)), mine, kind,
                    f'op.drop_column("{table}", "{column}")', drops=True)
            else:  # reflect: drop c0 when it is still there (the offline linter cannot know)
                present = "c0" in columns
                body = (f'columns = [c["name"] for c in sa.inspect(op.get_bind()).get_columns("{table}")]\n'
                        f'if "c0" in columns:\n    op.drop_column("{table}", "c0")')
                add((parent,), change(tables, table, tuple(c for c in columns if c != "c0")), mine, "reflect", body,
                    drops=present)
    return history
