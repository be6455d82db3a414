"""``dbsync online_data_migrations`` for a ``Project``: arguments in, a ``RunReport`` out."""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterable, Iterator, TypedDict

from migrations_policy.core.errors import ConfigError, UsageError
from migrations_policy.core.project import Project
from migrations_policy.data.declare import Registry
from migrations_policy.data.discovery import load_registry
from migrations_policy.data.walk.report import EXIT_USAGE, RunReport
from migrations_policy.data.walk.runner import RunOptions, run

if TYPE_CHECKING:
    from typing_extensions import Unpack


class BatchOptions(TypedDict, total=False):
    """The keyword arguments of ``online_data_migrations`` and ``prune`` (the command line's options).

    ``batch_size``: rows per batch (default: the ``batch_size`` setting); ``batch_seconds``: grow or
    shrink batches to about this long (default: the ``batch_seconds`` setting, 0 = fixed size);
    ``max_count``: stop after this many rows; ``sleep``: seconds between batches; ``workers``:
    threads; ``migrations``: run only these names; ``options``: ``"NAME.key=value"`` strings (data
    migrations only); ``progress``: a ``core.progress`` reporter; ``exact``: count exactly instead
    of estimating.
    """

    batch_size: int | None
    batch_seconds: float | None
    max_count: int | None
    sleep: float
    workers: int
    migrations: Iterable[str]
    options: Iterable[str]
    progress: Any
    exact: bool


def _run_options(project: Project, options: BatchOptions) -> RunOptions:
    batch_seconds = options.get("batch_seconds")
    if batch_seconds is None:
        batch_seconds = project.settings.batch_seconds
    return RunOptions(
        batch_size=options.get("batch_size") or project.settings.batch_size, batch_seconds=batch_seconds or None,
        max_count=options.get("max_count"), sleep=options.get("sleep", 0.0), workers=options.get("workers", 1),
        names=list(options.get("migrations", ())), options=parse_option_args(options.get("options", ())),
        exact=options.get("exact", False),
    )


def project_registry(project: Project) -> Registry:
    """The project's data migrations (settings modules, entry points, release mapping)."""
    return load_registry(project.settings, project.alembic_config.get_prepend_sys_paths_list())


def parse_option_args(pairs: Iterable[str]) -> dict[str, dict[str, str]]:
    """``["name.key=value", ...]`` -> ``{name: {key: value}}``; a malformed one is a usage error (2)."""
    options: dict[str, dict[str, str]] = {}
    for pair in pairs:
        target, sep, value = pair.partition("=")
        name, dot, key = target.partition(".")
        if not sep or not dot or not name.strip() or not key.strip():
            raise UsageError(f"--option {pair!r}: expected NAME.key=value", exit_code=EXIT_USAGE)
        options.setdefault(name.strip(), {})[key.strip()] = value
    return options


def run_for_project(project: Project, **options: Unpack[BatchOptions]) -> RunReport:
    run_options = _run_options(project, options)
    registry = project_registry(project)
    with project.connect() as connection:  # one-line error now if the database cannot be reached
        missing = undeclared_requirements(project, registry, connection)
    if missing:  # the gate would refuse contract however often this runs: say what to declare
        raise ConfigError(f"pending contract revisions require data migrations that no listed module declares: "
                          f"{'; '.join(missing)} ({project.alembic_config.config_file_name})")
    progress = options.get("progress")
    if progress is not None and hasattr(progress, "estimator"):
        progress.estimator = pending_now(project, registry)
    with sigterm_interrupts():
        return run(project.engine, registry, run_options, progress=progress)


def pending_now(project: Project, registry: Registry) -> Any:
    """For the progress: a migration's rows pending now (estimated; SQLite counts), read when
    the work done has passed the total the run began with."""
    from migrations_policy.data.remaining.pending import count_pending, estimate

    def pending(name: str) -> int | None:
        with project.engine.connect() as conn:
            guess = estimate(conn, registry[name])
            return count_pending(conn, registry[name]) if guess is None else guess

    return pending


def undeclared_requirements(project: Project, registry: Registry, connection: Any) -> list[str]:
    """``name (required by rev, ...)`` for each data migration a pending contract revision
    requires (``requires_data_migrations``) that the project does not declare."""
    from migrations_policy.gate.requirements import requirements_of
    from migrations_policy.policy.model import CONTRACT
    from migrations_policy.core.revisions import branch_statuses, current_heads

    try:
        script = project.script
    except ConfigError:  # no revision scripts (a project that only runs data migrations): none requires any
        return []
    missing: dict[str, list[str]] = {}
    for revision in branch_statuses(script, current_heads(connection))[CONTRACT].pending:
        for name in requirements_of(script.get_revision(revision)).names:
            if name not in registry:
                missing.setdefault(name, []).append(revision)
    from migrations_policy.gate.verdict import NOT_DECLARED, PendingMigration, declaring_module

    return [PendingMigration(name, None, NOT_DECLARED, revisions,
                             declared_in=declaring_module(registry, name, script.dir)).describe()
            for name, revisions in missing.items()]


def _project_prunes(project: Project, wanted: list[str]) -> list[Any]:
    """The project's ``Prune`` declarations (in its data_migrations modules); *wanted* selects by name."""
    from migrations_policy.data.discovery import _import
    from migrations_policy.data.prune.deletion import prunes_in

    prunes = prunes_in(_import(module, "data_migrations") for module in project.settings.data_migrations)
    unknown = set(wanted) - {p.name for p in prunes}
    if unknown:
        known = ", ".join(p.name for p in prunes) or "none declared"
        raise UsageError(f"unknown prune(s): {', '.join(sorted(unknown))} (known: {known})", exit_code=EXIT_USAGE)
    return [p for p in prunes if p.name in wanted] if wanted else prunes


def prune_dry_run_for_project(project: Project, migrations: Iterable[str] = (), max_count: int | None = None
                              ) -> list[Any]:
    """``dbsync prune --dry-run``: per prune, what a run would delete now (``data.prune.dry_run``),
    and with *max_count* what a run of that ``--max-count`` would."""
    from migrations_policy.data.prune.deletion import dry_run

    prunes = _project_prunes(project, list(migrations))
    if not prunes:
        return []
    with project.connect():
        pass  # one-line error now if the database cannot be reached
    return dry_run(project.engine, prunes, max_count)


def prune_for_project(project: Project, **options: Unpack[BatchOptions]) -> tuple[RunReport, dict[str, int]]:
    """``dbsync prune``: the project's ``Prune`` declarations (in its data_migrations modules),
    children first, on the data-migration runner.  *migrations* selects prunes by name."""
    from migrations_policy.data.prune.deletion import run_prunes

    if list(options.get("options", ())):
        raise UsageError("--option does not apply to prune", exit_code=EXIT_USAGE)
    prunes = _project_prunes(project, list(options.get("migrations", ())))
    run_options = _run_options(project, {**options, "migrations": ()})
    if not prunes:
        return RunReport(max_count=run_options.max_count), {}
    with project.connect():
        pass  # one-line error now if the database cannot be reached
    with sigterm_interrupts():
        return run_prunes(project.engine, prunes, run_options, progress=options.get("progress"))


@contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """SIGTERM (a service manager stopping us) behaves like Ctrl-C: the runner rolls the batch
    in progress back and records ``interrupted``, instead of dying mid-batch with the ledger
    ``running``.  Only from the main thread, where Python runs signal handlers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
