"""Findings and the report of one lint run (what reporters render and the exit code)."""

from __future__ import annotations

from dataclasses import dataclass, field

ERROR, WARNING = "error", "warning"
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
        self.__dict__.update(path=path, line=line, code=code, severity=severity, message=message, phase=phase,
                             dialect=dialect)

    def to_dict(self) -> dict:
        return dict(self.__dict__)  # the seven fields, in order (dataclasses.asdict deep-copies: ~12x slower)


@dataclass
class LintReport:
    findings: list[Finding] = field(default_factory=list)
    files: int = 0
    #: (path, one-line message, traceback) of the linter's own errors (each file also has its MP000).
    internal: list[tuple[str, str, str]] = field(default_factory=list)

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

    def to_dict(self) -> dict:
        return {"findings": [f.to_dict() for f in self.findings], "files": self.files}
