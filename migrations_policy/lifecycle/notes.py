"""``migrations-policy notes FROM TO``: release notes from acknowledged findings.

A finding ignored with a reason (``# migrations-policy: ignore[MP142] orphans are
checked by port_node_orphans``) is a decision operators must hear about (ironic
announces its unavoidable locking changes).  For every revision after FROM up to and
including TO, each ignore comment that carries a reason is matched with the findings
it silences: the linter runs on a copy of the script without that comment (through the
public ``lint.run``, with the revision's phase), and the findings on the lines it
covers with the codes it names are what was acknowledged.  Each becomes a note: the
revision, the rule, its message (which names the table and what the statement does
to it), the dialects, and the reason.

Output: Markdown (a release-note section) or the YAML that reno reads
(``upgrade:`` items; strings JSON-quoted, which YAML accepts).
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from migrations_policy.core.errors import UsageError
from migrations_policy.core.result import Result
from migrations_policy.core.revisions import phase_of


@dataclass
class Note:
    revision: str
    path: str
    line: int
    code: str
    message: str
    dialects: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def sentence(self) -> str:
        on = f" ({self.dialects})" if self.dialects else ""
        return f"Revision {self.revision}, {self.code}{on}: {self.message}. Acknowledged: {self.reason}"


def _revisions_between(script: Any, start: str, end: str) -> list[Any]:
    """Revisions after *start* up to and including *end*, oldest first."""
    from alembic.script.revision import RevisionError
    from alembic.util import CommandError

    try:
        found = list(script.iterate_revisions(end, start, implicit_base=True))
    except (CommandError, RevisionError, KeyError, ValueError) as exc:
        raise UsageError(f"notes {start} {end}: {str(exc).splitlines()[0]}") from None
    return [rev for rev in reversed(found) if rev is not None]


def acknowledged(rev: Any, settings: Any) -> list[Note]:
    """The findings *rev*'s ignore comments silence, with their reasons."""
    from migrations_policy import lint
    from migrations_policy.lint.script.ignores import _IGNORE as IGNORE_COMMENT, find_ignores

    source = Path(rev.path).read_text(encoding="utf-8")
    lines = source.splitlines(keepends=True)
    notes = []
    for ignore in find_ignores(source):
        if not ignore.reason:
            continue
        text = lines[ignore.line - 1]
        comment = IGNORE_COMMENT.search(text)
        stripped = lines[:]
        stripped[ignore.line - 1] = (text[:comment.start()].rstrip() if comment else text.rstrip("\n")) + "\n"
        covered = {ignore.line, ignore.line + 1} if ignore.own_line else {ignore.line}
        with tempfile.TemporaryDirectory() as directory:
            copy = Path(directory) / Path(rev.path).name
            copy.write_text("".join(stripped), encoding="utf-8")
            report = lint.run([copy], phase=phase_of(rev), settings=settings)
        for finding in report.findings:
            if finding.line in covered and finding.code in ignore.codes:
                notes.append(Note(rev.revision, rev.path, finding.line, finding.code, finding.message,
                                  finding.dialect, ignore.reason))
    return notes


def dropped_data(rev: Any) -> list[Note]:
    """*rev*'s recorded decisions to drop data no migration moved (``drops_data``, judged by
    ``gate.data_drops``): operators must hear that this data goes, and why."""
    from migrations_policy.gate.drops.data_drops import ATTRIBUTE, decisions

    decided, _ = decisions(rev)
    if not decided:
        return []
    lines = Path(rev.path).read_text(encoding="utf-8").splitlines()
    line = next((i for i, text in enumerate(lines, 1) if text.startswith(ATTRIBUTE)), 0)
    return [Note(rev.revision, rev.path, line, ATTRIBUTE, f"drops {what} and the data it holds (no migration moves it)",
                 "", reason) for what, reason in decided.items()]


@dataclass
class NotesResult(Result):
    start: str = ""
    end: str = ""
    notes: list[Note] | None = None
    output_format: str = "markdown"

    def to_dict(self) -> dict[str, Any]:
        return {"from": self.start, "to": self.end, "notes": [n.to_dict() for n in self.notes or []]}

    def render(self, fmt: str) -> str:
        if fmt in ("markdown", "yaml"):
            self.output_format = fmt
            fmt = "text"
        return super().render(fmt)

    def text(self) -> str:
        notes = self.notes or []
        if self.output_format == "yaml":
            items = "\n".join(f"  - {json.dumps(n.sentence())}" for n in notes)
            return "---\nupgrade:\n" + (items or "  []") if notes else "---\nupgrade: []"
        lines = [f"## Schema changes with acknowledged locking or compatibility risks ({self.start} to {self.end})",
                 ""]
        if not notes:
            return "\n".join(lines + ["None: no finding was acknowledged in these revisions."])
        for n in notes:
            on = f" ({n.dialects})" if n.dialects else ""
            lines.append(f"- **{n.revision}** `{n.code}`{on}: {n.message}  \n  *Why it is accepted:* {n.reason}")
        return "\n".join(lines)


def notes(project: Any, start: str, end: str, output_format: str = "markdown") -> NotesResult:
    """The acknowledged findings of the revisions after *start* up to *end* (``heads``, ``base`` or ids)."""
    if output_format not in ("markdown", "yaml"):
        raise UsageError(f"unknown notes format {output_format!r} (markdown or yaml)")
    found: list[Note] = []
    for rev in _revisions_between(project.script, start, end):
        found.extend(acknowledged(rev, project.settings))
        found.extend(dropped_data(rev))
    return NotesResult(start=start, end=end, notes=found, output_format=output_format)
