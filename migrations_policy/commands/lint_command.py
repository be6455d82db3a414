"""``migrations-policy lint`` / ``dbsync lint`` as a plain function returning a ``Result``.

Kept apart from ``migrations_policy.commands`` so that the lint path imports no
alembic or SQLAlchemy unless a script has to be run (a warm cache needs neither).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sys
import traceback

from migrations_policy.core.config import EXPAND
from migrations_policy.core.errors import PolicyError, UsageError
from migrations_policy.core.result import Result
from migrations_policy.lint.output.report import INTERNAL_ERROR, printable, printable_path

if TYPE_CHECKING:
    from migrations_policy.core.project import Project


@dataclass
class LintResult(Result):
    """Findings of ``lint``; renders as text, json, github, sarif or junit."""

    report: Any = None
    show_statistics: bool = False

    def to_dict(self) -> dict[str, Any]:
        return self.report.to_dict()

    def text(self) -> str:
        return self.render("text")

    def render(self, fmt: str) -> str:
        from migrations_policy.lint.output.reporters import render, statistics

        if self.show_statistics:
            return statistics(self.report)
        return render(self.report, fmt)


class InternalError(PolicyError):
    """The linter itself failed (a bug): one line, exit code ``INTERNAL_ERROR``."""

    exit_code = INTERNAL_ERROR


def lint(paths: list[str], *, phase: str | None = None, dialects: list[str] | None = None,
         config_file: str | None = None, url: str | None = None, project: Project | None = None,
         debug: bool = False, select: list[str] | None = None, ignore: list[str] | None = None,
         exit_zero: bool = False, statistics: bool = False, include_baseline: bool = False, replay: bool = False,
         scratch_server: str | None = None, jobs: int | None = None) -> LintResult:
    """Lint migration scripts (files or version directories); no database needed.

    Settings come from pyproject.toml / setup.cfg in the current directory (or the
    *project*'s alembic ini) and *config_file*.  With a *project* and no *paths*, its
    version locations are linted, each script with its branch's phase.
    *replay* (implied by *scratch_server*): upgrade the history from base on *url* (an empty database),
    on a throwaway database created on *scratch_server*, or on a temporary SQLite file (``lint.replay``).
    """
    from migrations_policy import lint as linter
    from migrations_policy.core.config import load_settings

    selected, ignored = _codes(select, "select"), _codes(ignore, "ignore")  # a usage error before any work

    settings = project.settings if project else load_settings(".", extra_file=config_file)
    phases = None
    if project is not None and not paths:
        from migrations_policy.core.revisions import phase_of  # alembic: only dbsync lint, which reads the project's scripts

        revs = list(project.script.walk_revisions())
        phases = {Path(rev.path): phase_of(rev) or EXPAND for rev in revs}
        paths = sorted(str(p) for p in phases)
    paths = paths or settings.paths
    if not paths:
        raise UsageError("lint: no PATH given and no 'paths' setting")
    target = None
    if replay or scratch_server:
        from migrations_policy.lint.scratch.database import Target

        target, url = Target(url=url, server=scratch_server), None
    try:
        report = linter.run(paths, phase=phase, dialects=dialects or None, settings=settings, url=url, phases=phases,
                            include_baseline=include_baseline, replay=target, jobs=jobs,
                            ini=str(project.alembic_ini) if project is not None else None)
    except PolicyError:
        raise
    except Exception as exc:  # noqa: BLE001 - a bug of the linter: one line, the traceback on request
        if debug:
            traceback.print_exc()
        from migrations_policy.lint.offline.loader import one_line

        raise InternalError(f"internal error of the linter: {one_line(exc)} (please report it; "
                            f"{'the traceback is above' if debug else '--debug prints the traceback'})") from None
    for path, message, trace in report.internal:
        print(f"lint: internal error while analysing {printable_path(path)}: {printable(message)}", file=sys.stderr)
        if debug:
            print(trace, file=sys.stderr)
    report.select(selected, ignored)
    exit_code = report.exit_code
    if exit_zero and exit_code != INTERNAL_ERROR:
        exit_code = 0
    return LintResult(exit_code=exit_code, report=report, show_statistics=statistics)


def _codes(values: list[str] | None, option: str) -> list[str]:
    """``--select MP101,MP1 --select MP2`` -> ["MP101", "MP1", "MP2"] (upper-cased, empty parts dropped);
    a code or prefix that names no rule is a ``UsageError`` (a typo would silently select nothing)."""
    from migrations_policy.lint.adoption import rule_codes

    codes = [code.strip().upper() for value in values or () for code in value.split(",") if code.strip()]
    known = rule_codes() if codes else []
    for code in codes:
        if not (code.startswith("MP") and len(code) > 2 and any(rule.startswith(code) for rule in known)):
            raise UsageError(f"lint --{option}: unknown rule code {printable(code)!r} (known: {', '.join(known)}; "
                             "a prefix such as MP1 selects every MP1xx)")
    return codes


@dataclass
class RuleResult(Result):
    """``migrations-policy rule CODE``: the rule's page (the text docs/rules/CODE.rst is generated from)."""

    code: str = ""
    name: str = ""
    severity: str = ""
    phases: tuple = ()
    doc: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "name": self.name, "severity": self.severity, "phases": list(self.phases),
                "doc": self.doc}

    def text(self) -> str:
        summary, _, body = self.doc.partition("\n")
        import textwrap

        return "\n".join([f"{self.code} {self.name}", summary.strip(), "",
                          f"Default severity: {self.severity}", f"Phases: {', '.join(self.phases)}", "",
                          textwrap.dedent(body).strip()])


def rule(code: str) -> RuleResult:
    """The page of rule *code* (case-insensitive); an unknown code is a ``UsageError``."""
    from migrations_policy.lint import rules

    wanted = code.strip().upper()
    try:
        found = rules.get(wanted)
    except KeyError:
        raise UsageError(f"rule: unknown rule code {printable(wanted)!r} (known: {', '.join(rules.codes())})") from None
    return RuleResult(code=found.code, name=found.name, severity=found.severity, phases=tuple(found.phases),
                      doc=found.doc)
