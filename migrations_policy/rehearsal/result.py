"""What a rehearsal saw: per phase, the operations each release's code ran and every error it got."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from migrations_policy.commands import Result
from migrations_policy.rehearsal.workload import Observed

#: Exit codes of ``migrations-policy rehearse``.
EXIT_CLEAN, EXIT_ERRORS = 0, 1

_WHO = {"old": "release-N code", "new": "release-N+1 code"}


@dataclass
class PhaseReport:
    """One phase: which code ran, what the tool did (steps), what failed (tool errors, workload errors)."""

    name: str
    running: tuple[str, ...]
    seconds: float = 0.0
    observed: Observed = field(default_factory=Observed)
    steps: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    #: Said, not failed: e.g. a data-migration run that reported stuck rows while code was writing.
    warnings: list[str] = field(default_factory=list)

    def operations(self, code: str | None = None) -> Counter:
        found: Counter = Counter()
        for (who, operation), count in self.observed.operations.items():
            if code is None or who == code:
                found[operation] += count
        return found

    def errors(self, code: str | None = None) -> list[dict[str, Any]]:
        return [{"phase": self.name, "code": who, "operation": operation, "table": table, "error": text,
                 "count": count}
                for (who, operation, table, text), count in sorted(self.observed.errors.items())
                if code is None or who == code]

    def retries(self) -> list[dict[str, Any]]:
        return [{"phase": self.name, "code": who, "operation": operation, "table": table, "kind": kind,
                 "count": count}
                for (who, operation, table, kind), count in sorted(self.observed.retries.items())]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "running": list(self.running), "seconds": round(self.seconds, 2),
                "operations": {code: dict(self.operations(code)) for code in self.running},
                "errors": self.errors(), "retried": self.retries(), "steps": self.steps,
                "failures": self.failures, "warnings": self.warnings}

    def text(self) -> list[str]:
        counts = "; ".join(f"{_WHO[code]}: {sum(self.operations(code).values())} operations "
                           f"({', '.join(f'{k} {v}' for k, v in sorted(self.operations(code).items())) or 'none'})"
                           for code in self.running)
        lines = [f"phase {self.name} ({self.seconds:.1f} s): {counts}"]
        lines += [f"  {step}" for step in self.steps]
        lines += [f"  FAILED: {failure}" for failure in self.failures]
        lines += [f"  warning: {warning}" for warning in self.warnings]
        lines += [f"  ERROR {_WHO[e['code']]} {e['operation']} {e['table']} ({e['count']}x): {e['error']}"
                  for e in self.errors()]
        lines += [f"  retried {_WHO[r['code']]} {r['operation']} {r['table']} after {r['kind']} ({r['count']}x)"
                  for r in self.retries()]
        return lines


@dataclass
class RehearsalResult(Result):
    """The whole rehearsal; exit code 1 when any code saw an error, the tool failed, or the static check did."""

    old_models: str = ""
    new_models: str = ""
    phases: list[PhaseReport] = field(default_factory=list)
    #: Static check: what the upgrade made incompatible (one line each).
    incompatible: list[str] = field(default_factory=list)
    #: Already wrong on the release-N schema, workload limitations: said, not failed.
    notes: list[str] = field(default_factory=list)

    def errors(self, code: str | None = None, phase: str | None = None) -> list[dict[str, Any]]:
        """Every distinct error (with its count) the workload saw, optionally of one code / phase."""
        return [e for p in self.phases if phase is None or p.name == phase for e in p.errors(code)]

    @property
    def failures(self) -> list[str]:
        return [f"{p.name}: {f}" for p in self.phases for f in p.failures]

    def finish(self) -> "RehearsalResult":
        self.exit_code = EXIT_ERRORS if (self.errors() or self.failures or self.incompatible) else EXIT_CLEAN
        return self

    def to_dict(self) -> dict[str, Any]:
        return {"exit_code": self.exit_code, "old_models": self.old_models, "new_models": self.new_models,
                "phases": [p.to_dict() for p in self.phases], "incompatible": self.incompatible,
                "notes": self.notes, "errors": self.errors(), "failures": self.failures}

    def text(self) -> str:
        lines = [f"rehearsal: release N ({self.old_models}) -> release N+1 ({self.new_models})"]
        for phase in self.phases:
            lines += phase.text()
        lines += [f"INCOMPATIBLE: {problem}" for problem in self.incompatible]
        lines += [f"note: {note}" for note in self.notes]
        old, new = len(self.errors("old")), len(self.errors("new"))
        if self.exit_code == EXIT_CLEAN:
            lines.append("no errors: release-N code kept working through expand and data migrations, "
                         "release-N+1 code through the rolling phase and contract")
        else:
            lines.append(f"FAILED: {old} distinct error(s) seen by release-N code, {new} by release-N+1 code, "
                         f"{len(self.failures)} tool failure(s), {len(self.incompatible)} incompatibility(ies)")
        return "\n".join(lines)
