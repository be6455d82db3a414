"""Findings and the report of one lint run (what reporters render and the exit code)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

ERROR, WARNING = "error", "warning"
#: The rules' documentation; ``rule_url(code)`` is a rule's page.
RULES_URL = "https://github.com/migrations-policy/migrations-policy/blob/main/docs/rules"


def rule_url(code: str) -> str:
    """The page of rule *code* in the documentation (text, JSON, GitHub and SARIF output link to it)."""
    return f"{RULES_URL}/{code}.rst"


#: Escaped by ``printable``: C0 controls but tab, DEL and C1, lone surrogates, and U+FFFE / U+FFFF -- with the
#: controls and surrogates, every character XML 1.0 forbids (JUnit), none left for a terminal to interpret.
_UNPRINTABLE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def printable(text: str) -> str:
    """*text* with control characters, lone surrogates (a file name's undecodable bytes), U+FFFE / U+FFFF and line
    breaks written as Python escapes (``\\x1b``, ``\\udcff``, ``\\n``): a path or message from a script is then one
    line that every output can encode (UTF-8 stdout, XML 1.0, JSON) and no terminal escape sequence reaches a CI log."""
    if text.isprintable():
        return text
    return _UNPRINTABLE.sub(lambda match: ascii(match.group())[1:-1], text)


def printable_path(path: str) -> str:
    """``printable(path)`` with every backslash doubled, so that a backslash in the result always starts an escape:
    two files never get the same name in a report (``a\\x1b.py`` named so and a name with a real ESC differ), so
    each keeps its own findings and JUnit testcase."""
    if "\\" not in path and path.isprintable():
        return path
    return printable(path.replace("\\", "\\\\"))


#: The exit code of a run in which the linter itself failed (a bug; never the findings' 1).
INTERNAL_ERROR = 3


@dataclass(frozen=True, init=False)
class Finding:
    path: str
    line: int
    code: str
    severity: str
    message: str
    phase: str
    dialect: str  # comma-separated when the same problem exists on several dialects; "" if none applies

    def __init__(self, path: str, line: int, code: str, severity: str, message: str, phase: str, dialect: str):
        # Set once, through __dict__: a frozen dataclass's own __init__ is ~3x slower (a run builds thousands).
        # Path and message come from the scripts: printable() makes them safe in every output format.
        self.__dict__.update(path=printable_path(path), line=line, code=code, severity=severity,
                             message=printable(message), phase=phase, dialect=dialect)

    def to_dict(self) -> dict:
        """The seven fields in order, and the rule's page (dataclasses.asdict deep-copies: ~12x slower)."""
        return {**self.__dict__, "url": rule_url(self.code)}


@dataclass
class LintReport:
    findings: list[Finding] = field(default_factory=list)
    files: int = 0
    #: Every file checked, in order (JUnit has a testcase for each, clean ones included).
    paths: list[str] = field(default_factory=list)
    #: (path, one-line message, traceback) of the linter's own errors (each file also has its MP000).
    internal: list[tuple[str, str, str]] = field(default_factory=list)
    #: Collected scripts not checked: at or before the ``baseline`` setting, matched by ``exclude``.
    baseline: int = 0
    excluded: int = 0

    @property
    def errors(self) -> int:
        return sum(f.severity == ERROR for f in self.findings)

    @property
    def warnings(self) -> int:
        return sum(f.severity == WARNING for f in self.findings)

    @property
    def unreadable(self) -> int:
        return sum(f.code == "MP000" for f in self.findings)

    @property
    def exit_code(self) -> int:
        """0: no error findings; 1: error findings; 2: an input could not be read or loaded;
        3: an internal error of the linter (``INTERNAL_ERROR``)."""
        if self.internal:
            return INTERNAL_ERROR
        if self.unreadable:
            return 2
        return 1 if self.errors else 0

    def select(self, select: list[str] | None = None, ignore: list[str] | None = None) -> None:
        """Keep the findings whose code starts with one of *select* (all when empty) and none of *ignore*
        (``MP1`` selects every ``MP1xx``).  ``MP000`` (a file not analysed) is always kept."""
        def keep(code: str) -> bool:
            if code == "MP000":
                return True
            return (not select or code.startswith(tuple(select))) and not (ignore and code.startswith(tuple(ignore)))

        self.findings = [f for f in self.findings if keep(f.code)]

    def to_dict(self) -> dict:
        return {"findings": [f.to_dict() for f in self.findings], "files": self.files, **self.skipped()}

    def skipped(self) -> dict:
        """``{"skipped": {"baseline": N, "excluded": M}}`` when the settings skipped collected scripts, else {}."""
        if not (self.baseline or self.excluded):
            return {}
        return {"skipped": {"baseline": self.baseline, "excluded": self.excluded}}
