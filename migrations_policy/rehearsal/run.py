"""The rolling-upgrade rehearsal, phase by phase, on a scratch database of 127.0.0.1.

1. build the release-N schema (``alembic upgrade`` to each *from_revision*) and
   let release-N code write some rows;
2. **expand** — release-N code runs (threads) while the N+1 expand revisions
   and then the online data migrations run;
3. **rolling** — release-N and release-N+1 code run side by side while data
   migrations keep running; then release-N code stops and the data migrations
   are run to completion;
4. **contract** — release-N+1 code runs while contract is applied, and after.

The static check compares each release's models with the schema: release N
after expand, release N+1 after expand and after contract.
"""

from __future__ import annotations

import random
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

import sqlalchemy as sa
from alembic import command as alembic_command

from migrations_policy import commands
from migrations_policy.core.framework_tables import is_framework_table
from migrations_policy.commands.alembic_run import run_alembic_on
from migrations_policy.data.discovery import load_release_mapping
from migrations_policy.core.errors import PolicyError, UsageError
from migrations_policy.core import progress
from migrations_policy.core.project import Project
from migrations_policy.core.revisions import CONTRACT, EXPAND
from migrations_policy.rehearsal.compatibility import schema_problems
from migrations_policy.rehearsal.models import Models, load_models
from migrations_policy.rehearsal.result import PhaseReport, RehearsalResult
from migrations_policy.rehearsal.workload import Observed, Workload, WorkloadFunction, foreign_keys_of

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


@dataclass
class RehearsalOptions:
    """How long and how hard: every phase lasts about *seconds*; *max_operations* bounds each code's work
    per phase; *values* pins columns (``{"table.column": value}``) the generic workload must not invent."""

    seconds: float = 5.0
    threads: int = 4
    max_operations: int = 20_000
    seed_rows: int = 50
    batch_size: int = 200
    seed: int | None = None
    workload: WorkloadFunction | None = None
    values: dict[str, Any] = field(default_factory=dict)
    #: Data migrations must finish within this many runs once release-N code has stopped.
    max_data_runs: int = 50
    #: Retry deadlocks / lock waits as an application with oslo.db-style retries does (counted apart).
    retry_transient: bool = True

    def check(self) -> None:
        if self.seconds <= 0 or self.threads < 1 or self.max_operations < 1 or self.seed_rows < 0 \
                or self.batch_size < 1:
            raise UsageError("rehearse: seconds, threads, max operations and batch size must be positive")
        if self.seconds > 3600 or self.threads > 64:
            raise UsageError("rehearse: at most 3600 seconds per phase and 64 threads")


def require_scratch_database(project: Project) -> None:
    """Refuse anything but an empty database on 127.0.0.1 (or a SQLite file): the rehearsal writes."""
    url = project.url
    if url.get_backend_name() == "sqlite":
        if not url.database or url.database == ":memory:" or url.query.get("mode") == "memory":
            raise UsageError("rehearse needs a SQLite file, not an in-memory database (threads share it)")
    elif url.host not in LOOPBACK_HOSTS:
        raise UsageError(f"rehearse runs only against a scratch database on 127.0.0.1, not {project.masked_url}")
    with project.connect() as conn:
        tables = sa.inspect(conn).get_table_names()
    if tables:
        raise UsageError(f"rehearse needs an empty scratch database; {project.masked_url} has {len(tables)} "
                         f"table(s) ({', '.join(sorted(tables, key=lambda t: (is_framework_table(t), t))[:5])}): it builds "
                         "the release-N schema itself")  # the application's tables first


def _pinned_values(project: Project, options: RehearsalOptions) -> dict[str, Any]:
    """Object version columns get the current release's version (a random one would be refused)."""
    pinned: dict[str, Any] = {}
    if project.settings.release_mapping:
        mapping = load_release_mapping(project.settings.release_mapping)
        for name, table in mapping.tables.items():
            if mapping.latest(name) is not None:
                pinned[f"{table}.{mapping.column}"] = mapping.latest(name)
    pinned.update(options.values)
    return pinned


class _Rehearsal:
    def __init__(self, project: Project, old: Models, new: Models, options: RehearsalOptions):
        self.project, self.old, self.new, self.options = project, old, new, options
        self.result = RehearsalResult(old_models=_describe(old), new_models=_describe(new))
        seed = options.seed if options.seed is not None else random.randrange(10**6)
        self.result.notes.append(f"workload seed {seed}")
        self.engine = sa.create_engine(project.url, pool_size=2 * options.threads + 2, max_overflow=4,
                                       **({"connect_args": {"timeout": 30}}
                                          if project.url.get_backend_name() == "sqlite" else {}))
        pinned = _pinned_values(project, options)
        # A foreign key either release declares is what the column means: both codes write valid keys.
        references = foreign_keys_of(old.tables, new.tables)
        kw = dict(threads=options.threads, max_operations=options.max_operations, function=options.workload,
                  values=pinned, references=references, retry_transient=options.retry_transient)
        self.workloads = {"old": Workload(self.engine, old, Observed(), seed=seed, **kw),
                          "new": Workload(self.engine, new, Observed(), seed=seed + 1, **kw)}
        for workload in self.workloads.values():
            self.result.notes.extend(sorted(workload.notes))
        self.baseline: dict[str, set[str]] = {}

    # -- helpers --------------------------------------------------------------------
    @contextmanager
    def phase(self, name: str, running: Sequence[str], start: bool = True) -> Iterator[PhaseReport]:
        report = PhaseReport(name, tuple(running))
        self.result.phases.append(report)
        for code in running:
            self.workloads[code].observed = report.observed
            if start:
                self.workloads[code].load_known_keys()
                self.workloads[code].start()
        started = time.monotonic()
        releases = {"old": "release-N", "new": "release-N+1"}
        progress.note(f"phase {name}: {' and '.join(releases.get(c, c) + ' code' for c in running)} running")
        try:
            yield report
        finally:
            for code in running:
                self.workloads[code].stop()
            report.seconds = time.monotonic() - started
            progress.note(f"phase {name} took {report.seconds:,.1f} s")

    def upgrade(self, report: PhaseReport, phase: str, target: str | None) -> bool:
        try:
            if target is None:
                done = commands.upgrade(self.project, phases=(phase,))
                report.steps.append(f"upgrade {phase}: {done.text()}")
            else:
                with self.project.connect() as conn:
                    run_alembic_on(self.project, conn, alembic_command.upgrade, target)
                report.steps.append(f"upgrade {phase} to {target}")
        except PolicyError as exc:
            report.failures.append(f"upgrade {phase}: {exc.message}")
            return False
        return True

    def data_migrations(self, report: PhaseReport, until: float | None = None, complete: bool = False) -> None:
        """Run ``online_data_migrations`` repeatedly: until *until* while code writes (a run that reports
        stuck rows then is a warning: the next run retries them), or to completion (*complete*)."""
        runs, migrated, code = 0, 0, None
        while True:
            try:
                run = commands.online_data_migrations(self.project, batch_size=self.options.batch_size)
            except PolicyError as exc:
                report.failures.append(f"online data migrations: {exc.message}")
                return
            runs, migrated, code = runs + 1, migrated + run.report.migrated, run.exit_code
            for m in run.report.migrations:
                if m.error:
                    _add_once(report.failures, f"data migration {m.name}: {m.error}")
                elif m.stuck:
                    _add_once(report.failures if complete else report.warnings,
                              f"data migration {m.name}: run {runs} reported {m.stuck} stuck row(s)")
            if (complete and code == 0) or any(m.error for m in run.report.migrations):
                break
            if complete and runs >= self.options.max_data_runs:
                report.failures.append(f"data migrations still incomplete after {runs} runs")
                break
            if not complete and time.monotonic() >= (until or 0):
                break
            time.sleep(0.05)
        report.steps.append(f"online data migrations: {runs} run(s), {migrated} row(s) migrated, "
                            f"last exit code {code}")

    def static(self, code: str, when: str) -> None:
        models = self.workloads[code].models
        with self.engine.connect() as conn:
            problems = schema_problems(conn, models)
        if when == "baseline":
            self.baseline[code] = set(problems)
            self.result.notes.extend(f"already on the release-N schema: {p}" for p in problems)
            return
        self.result.incompatible.extend(f"after {when}: {p}" for p in problems
                                        if p not in self.baseline.get(code, set()))

    def pause(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))

    # -- the phases ---------------------------------------------------------------------
    def run(self, from_revisions: Sequence[str], expand_to: str | None, contract_to: str | None,
            contract: bool) -> RehearsalResult:
        seconds = self.options.seconds
        with self.phase("build", ("old",), start=False) as report:
            for revision in from_revisions:
                if not self.upgrade(report, EXPAND, revision):
                    return self.result.finish()
            report.steps.append(f"release-N code wrote {self.options.seed_rows} row(s) per table")
            self.static("old", "baseline")
            self.workloads["old"].seed_rows(self.options.seed_rows)

        with self.phase("expand", ("old",)) as report:
            self.pause(min(0.5, seconds / 4))  # the old code is busy before the first DDL
            if not self.upgrade(report, EXPAND, expand_to):
                return self.result.finish()
            self.static("old", "expand")
            self.data_migrations(report, until=time.monotonic() + seconds)
        with self.phase("rolling", ("old", "new")) as report:
            self.static("new", "expand")
            self.data_migrations(report, until=time.monotonic() + seconds)
        if contract:
            with self.phase("contract", ("new",)) as report:
                self.data_migrations(report, complete=True)  # release-N code is gone: finish them
                self.pause(min(0.5, seconds / 4))
                if self.upgrade(report, CONTRACT, contract_to):
                    self.static("new", "contract")
                    self.pause(seconds)
        return self.result.finish()

    def close(self) -> None:
        self.engine.dispose()
        self.project.dispose()


def _add_once(found: list[str], text: str) -> None:
    if text not in found:
        found.append(text)


def _describe(models: Models) -> str:
    target = models.target
    return getattr(target, "__name__", None) or type(target).__name__


def rehearse(project: Project, old_models: Any, new_models: Any, from_revision: str | Sequence[str], *,
             expand_to: str | None = None, contract_to: str | None = None, contract: bool = True,
             options: RehearsalOptions | None = None) -> RehearsalResult:
    """Rehearse the upgrade from *old_models* (release N, schema at *from_revision*) to *new_models*.

    *old_models* / *new_models*: ``"pkg.module[:NAME]"``, a module, a MetaData or a declarative base.
    *expand_to* / *contract_to*: targets of the two upgrades (default: the phase's heads);
    ``contract=False`` stops after the rolling phase.  Only on an empty scratch database of 127.0.0.1.
    """
    options = options or RehearsalOptions()
    options.check()
    revisions = [from_revision] if isinstance(from_revision, str) else list(from_revision)
    if not revisions:
        raise UsageError("rehearse: give the release-N revision(s) to build (--from-revision)")
    old, new = load_models(old_models, "old"), load_models(new_models, "new")
    require_scratch_database(project)
    rehearsal = _Rehearsal(project, old, new, options)
    try:
        return rehearsal.run(revisions, expand_to, contract_to, contract)
    finally:
        rehearsal.close()
