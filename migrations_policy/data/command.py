"""``dbsync online_data_migrations`` for a ``Project``: arguments in, a ``RunReport`` out."""

from __future__ import annotations

from typing import Any, Iterable

from ..errors import UsageError
from ..project import Project
from .declare import Registry
from .discovery import load_registry
from .report import EXIT_USAGE, RunReport
from .runner import RunOptions, run


def project_registry(project: Project) -> Registry:
    """The project's data migrations (settings modules, entry points, release mapping)."""
    return load_registry(project.settings, project.alembic_config.get_prepend_sys_paths_list())


def parse_option_args(pairs: Iterable[str]) -> dict[str, dict[str, str]]:
    """``["name.key=value", ...]`` -> ``{name: {key: value}}``; a malformed one is a usage error (127)."""
    options: dict[str, dict[str, str]] = {}
    for pair in pairs:
        target, sep, value = pair.partition("=")
        name, dot, key = target.partition(".")
        if not sep or not dot or not name.strip() or not key.strip():
            raise UsageError(f"--option {pair!r}: expected NAME.key=value", exit_code=EXIT_USAGE)
        options.setdefault(name.strip(), {})[key.strip()] = value
    return options


def run_for_project(
    project: Project, *, batch_size: int | None = None, batch_seconds: float | None = None,
    max_count: int | None = None, sleep: float = 0.0, workers: int = 1, migrations: Iterable[str] = (),
    options: Iterable[str] = (), progress: Any = None,
) -> RunReport:
    if batch_seconds is None:
        batch_seconds = project.settings.batch_seconds
    run_options = RunOptions(
        batch_size=batch_size or project.settings.batch_size, batch_seconds=batch_seconds or None,
        max_count=max_count, sleep=sleep, workers=workers,
        names=list(migrations), options=parse_option_args(options),
    )
    registry = project_registry(project)
    with project.connect():
        pass  # one-line error now if the database cannot be reached
    return run(project.engine, registry, run_options, progress=progress)


def prune_for_project(project: Project, *, batch_size: int | None = None, batch_seconds: float | None = None,
                      max_count: int | None = None, sleep: float = 0.0, workers: int = 1,
                      migrations: Iterable[str] = (), options: Iterable[str] = (),
                      progress: Any = None) -> tuple[RunReport, dict[str, int]]:
    """``dbsync prune``: the project's ``Prune`` declarations (in its data_migrations modules),
    children first, on the data-migration runner.  *migrations* selects prunes by name."""
    from .discovery import _import
    from .prune import prunes_in, run_prunes

    if options:
        raise UsageError("--option does not apply to prune", exit_code=EXIT_USAGE)
    prunes = prunes_in(_import(module, "data_migrations") for module in project.settings.data_migrations)
    wanted = list(migrations)
    unknown = set(wanted) - {p.name for p in prunes}
    if unknown:
        known = ", ".join(p.name for p in prunes) or "none declared"
        raise UsageError(f"unknown prune(s): {', '.join(sorted(unknown))} (known: {known})", exit_code=EXIT_USAGE)
    if wanted:
        prunes = [p for p in prunes if p.name in wanted]
    run_options = RunOptions(batch_size=batch_size or project.settings.batch_size,
                             batch_seconds=(batch_seconds if batch_seconds is not None
                                            else project.settings.batch_seconds) or None,
                             max_count=max_count, sleep=sleep, workers=workers)
    if not prunes:
        return RunReport(max_count=max_count), {}
    with project.connect():
        pass  # one-line error now if the database cannot be reached
    return run_prunes(project.engine, prunes, run_options, progress=progress)
