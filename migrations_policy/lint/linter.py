"""``run``: lint files and directories, the engine behind ``migrations-policy lint`` (see the package's docstring)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Iterable

from migrations_policy.core.config import DIALECTS, Settings
from migrations_policy.core.errors import UsageError
from migrations_policy.lint.adoption import Selection, baseline_revisions, check_codes, select
from migrations_policy.lint.cache import Cache, cache_dir
from migrations_policy.lint.script.headers import PHASES, UNKNOWN, Header, PhaseResolver, header_of_bytes
from migrations_policy.lint.options import Options
from migrations_policy.lint.offline.plugins import Plugins, plugins
from migrations_policy.lint.output.report import Finding, LintReport, printable_path

__all__ = ["run", "collect", "LintReport", "Finding"]


def _read_head(path: Path) -> Header | None:
    try:
        return header_of_bytes(path.read_bytes())
    except OSError:
        return None


def _is_file(entry: os.DirEntry) -> bool:
    try:
        return entry.is_file()  # follows a symlink; False for FIFOs, sockets, devices, directories
    except OSError:
        return False


def _walk(directory: Path, listings: dict[Path, list[Path]]) -> Iterable[Path]:
    """``sorted(directory.rglob("*.py"), key=parts)`` without pathlib's per-entry overhead.

    Like ``rglob``, but only regular files (or symlinks to one) are yielded: a FIFO, a socket or a device
    named ``*.py`` is not a script (opening a FIFO blocks forever); no descent into symlinked
    directories, unreadable directories skipped.  Each directory's ``*.py`` files are stored in *listings*.
    """
    try:
        with os.scandir(directory) as scan:
            entries = sorted(scan, key=lambda e: e.name)
    except OSError:
        return
    listed = listings[directory] = []
    for entry in entries:
        try:
            is_dir = entry.is_dir() and not entry.is_symlink()
        except OSError:
            is_dir = False
        child = None
        if entry.name.endswith(".py") and _is_file(entry):
            child = directory / entry.name
            listed.append(child)
            yield child
        if is_dir and entry.name != "__pycache__":
            yield from _walk(child or directory / entry.name, listings)


def collect(paths: Iterable[str | Path], headers: dict | None = None,
            header_of: Callable[[Path], Header | None] = _read_head,
            listings: dict[Path, list[Path]] | None = None, unreadable: set[Path] | None = None) -> list[Path]:
    """Files to lint: given files as they are; in directories, ``*.py`` files declaring a revision (``Header.declared``:
    whether or not its value can be read without running the script).

    The headers read on the way (with *header_of*) are stored in *headers* (path -> ``Header``) when given;
    each walked directory's ``*.py`` entries in *listings*; the files found in a directory that alembic would load
    but whose revision id cannot be read statically in *unreadable* (``run`` reports them as MP000).
    """
    files: list[Path] = []
    listings = {} if listings is None else listings
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            if "__pycache__" in path.parts:
                continue
            for found in _walk(path, listings):
                header = header_of(found)
                if header is None:
                    continue
                if headers is not None:
                    headers[found] = header
                if header.declared:  # also a revision whose value is not readable statically: never skipped
                    files.append(found)
                    if header.revision is None and unreadable is not None and _alembic_loads(found):
                        unreadable.add(found)
        elif path.is_file():
            files.append(path)
        elif path.exists():
            raise UsageError(f"{raw}: not a regular file (a script is a file; a FIFO would block the run)")
        else:
            raise UsageError(f"{raw}: no such file or directory")
    return list(dict.fromkeys(files))


def _alembic_loads(path: Path) -> bool:
    """Whether alembic loads *path* from a versions directory (it skips ``__init__.py`` and editor locks ``.#*``)."""
    return path.name != "__init__.py" and not path.name.startswith(".#")


#: MP000 of a script in a linted directory whose revision id cannot be read without running it.
UNREADABLE_HEADER = ("its revision id cannot be read without running the script (alembic loads every .py file "
                     "of a versions directory; its phase and history are unknown): assign it as a literal, "
                     "revision = \"<id>\", at the top level")


def _phase_disagreements(files: list[Path], resolver: PhaseResolver) -> dict[Path, list]:
    """MP121 (as a cached hit list) for each file whose label, directory and declared data migrations disagree.

    Depends on the other files' headers (the branch is inherited), so it is decided each run, not cached.
    Only files in an ``expand``/``contract`` directory or declaring data migrations can disagree: the policy
    (``policy.phases``) is imported only for them, so a warm run of a project without that layout imports none."""
    found = {}
    for path in files:
        header = resolver.header(path)
        if header is None or header.revision is None or not (header.requires_data or path.parent.name in PHASES):
            continue
        branch = resolver.branch(path)
        if branch == UNKNOWN:
            continue  # its parentage is outside the linted files: alembic's branch is not known here
        from migrations_policy.policy.phases import revision_phase_disagreement

        why = revision_phase_disagreement(branch, str(path), header.requires_data)
        if why:
            found[path] = [1, "MP121", f"revision {header.revision}: {why}", "", "error"]
    return found


def _applied_order(files: list[Path], resolver: PhaseResolver) -> list[Path]:
    """*files* parents first (down revisions), expand branch before contract: the order the
    cross-file MP160 needs (a sync trigger created in expand is live for the contracts after it)."""
    by_revision = {}
    for path in files:
        header = resolver.header(path)
        if header is not None and header.revision:
            by_revision[header.revision] = path
    ordered: list[Path] = []
    seen: set[Path] = set()

    def visit(path: Path) -> None:
        if path in seen:
            return
        seen.add(path)
        header = resolver.header(path)
        for parent in header.down_revisions if header is not None else ():
            if parent in by_revision:
                visit(by_revision[parent])
        ordered.append(path)

    for path in files:
        visit(path)
    return sorted(ordered, key=lambda path: resolver.phase(path) == "contract")  # stable: parents stay first


def _sync_trigger_hits(files: list[Path], resolver: PhaseResolver, dialects: tuple[str, ...]) -> dict[Path, list]:
    """MP160 for each contract that drops a column a live sync trigger uses, MP161 for each batch block
    re-creating a table whose sync triggers are live (decided across files, each run: only the scripts
    that mention sync triggers, drop columns or batch operations are read closely)."""
    sources = {}
    for path in files:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if "sync_trigger" in text or "drop_column" in text or "batch_alter_table" in text:
            sources[path] = text
    if not any("create_sync_trigger" in text for text in sources.values()):
        return {}
    from migrations_policy.lint.rules import get
    from migrations_policy.lint.rules.mp160_sync_trigger_outlives_column import findings
    from migrations_policy.lint.rules.mp161_sync_trigger_table_rebuilt import findings as rebuilds

    found: dict[Path, list] = {}
    ordered = [(str(path), sources[path]) for path in _applied_order(files, resolver) if path in sources]
    hits = [(finding, "") for finding in findings(ordered)] + [  # a SQLite-only rebuild: when SQLite is linted
        (finding, dialect) for finding, dialect in rebuilds(ordered) if not dialect or dialect in dialects]
    for finding, dialect in hits:
        code = finding.message.split()[0]
        found.setdefault(Path(finding.path), []).append(
            [finding.line, code, finding.message.removeprefix(code + " "), dialect, get(code).severity])
    return found


def _select(files: list[Path], resolver: PhaseResolver, settings: Settings, include_baseline: bool,
            cache: Cache) -> Selection:
    """The files this run lints (``adoption``: baseline, exclude) and the codes dropped per file."""
    check_codes(settings.per_file_ignores, settings.source_of("per_file_ignores"))
    baseline: set[str] = set()
    if settings.baseline and not include_baseline:
        def more() -> dict:  # the split layout: versions/expand and versions/contract are one history
            extra: dict = {}
            collect(sorted({path.parent.parent for path in files if path.parent.name in PHASES}), extra, cache.header)
            return {header.revision: header for header in extra.values() if header and header.revision}

        baseline = baseline_revisions(settings.baseline, dict(resolver.by_revision), more,
                                      settings.source_of("baseline"))
    return select(files, resolver.header, baseline, settings.exclude, settings.per_file_ignores)


def _replay_all(files: list[Path], missing: list[tuple[Path, str]], resolver: PhaseResolver, options: Options,
                replay, phase_of: Callable[[Path], str]):
    """``replay.replay_all`` of every collected script -- those at or before the baseline and the excluded ones
    build the schema the others run on -- answered for *missing* (the reported ones) only."""
    from migrations_policy.lint.sandbox.parallel import Analysis
    from migrations_policy.lint.replay.driver import replay_all

    wanted = {path for path, _ in missing}
    everything = [(path, phase_of(path)) for path in files if path not in wanted] + missing
    full = replay_all(everything, resolver, options, replay)
    offset = len(everything) - len(missing)
    return Analysis(full.hits[offset:], {i - offset: v for i, v in full.internal.items() if i >= offset},
                    {i - offset: v for i, v in full.modules.items() if i >= offset})


#: ``MIGRATIONS_POLICY_LINT_STATIC=0``: every script is run in the worker, none read by ``lint.static``
#: (a diagnostic switch: the findings are the same).
STATIC_ENV = "MIGRATIONS_POLICY_LINT_STATIC"


def _static_verdicts(missing: list[tuple[Path, str]], options: Options, jobs: int | None = None) -> dict[int, list]:
    """index -> the findings (cached lists) of each task ``lint.static`` reads without running it (over
    ``--jobs`` processes when there are many: ``lint.static.parallel``)."""
    if not missing or os.environ.get(STATIC_ENV, "").strip() == "0":
        return {}
    from migrations_policy.lint.static.parallel import read_all

    return read_all(missing, options, jobs)


def _with_statics(count: int, statics: dict[int, list], analysis):
    """One ``parallel.Analysis`` of *count* tasks: *statics* (index -> findings, each the script's own verdict)
    and *analysis*, the worker's of the others in order (None when there were none)."""
    from migrations_policy.lint.analysis import Analysis

    rest = [index for index in range(count) if index not in statics]
    merged = Analysis([None] * count, judged=set(statics))  # type: ignore[list-item]
    for index, hits in statics.items():
        merged.hits[index] = hits
    if analysis is not None:
        merged.place(analysis, rest)
    return merged


def run(
    paths: Iterable[str | Path],
    *,
    phase: str | None = None,
    dialects: Iterable[str] | None = None,
    settings: Settings | None = None,
    url: str | None = None,
    phases: dict[Path, str] | None = None,
    include_baseline: bool = False,
    replay=None,
    jobs: int | None = None,
    ini: str | None = None,
) -> LintReport:
    """Lint *paths*; *phases* may pin the phase of given files (``dbsync lint`` knows them).

    The settings' ``baseline`` (unless *include_baseline*), ``exclude`` and ``per_file_ignores``
    choose what is reported (``adoption``).  *replay* (a ``scratch_db.Target``): upgrade the history
    from base on that database and judge what ran (``lint.replay``) instead of analysing each script alone."""
    settings = settings or Settings()
    if phase is not None and phase not in PHASES:
        raise UsageError(f"unknown phase {phase!r} (expected one of {', '.join(PHASES)})")
    dialects = tuple(dialects or settings.dialects)
    unknown = [d for d in dialects if d not in DIALECTS]
    if unknown:
        raise UsageError(f"unknown dialect(s) {', '.join(unknown)} (known: {', '.join(DIALECTS)})")
    cache = Cache(cache_dir() if not (url or replay) else None)
    headers: dict = {}
    listings: dict = {}
    unreadable: set[Path] = set()
    files = collect(paths, headers, cache.header, listings, unreadable)
    if replay is not None:
        from migrations_policy.lint.scratch.database import target_dialect

        url_dialect = target_dialect(replay)
        if url_dialect not in dialects:
            raise UsageError(f"--replay is on a {url_dialect} database but the dialects linted are {', '.join(dialects)}")
        dialects = (url_dialect,)
    elif url:
        from migrations_policy.lint.scratch.url import check_scratch_database

        url_dialect = check_scratch_database(url)
        if url_dialect not in dialects:
            raise UsageError(f"--url is a {url_dialect} database but the dialects linted are {', '.join(dialects)}")
        dialects = (url_dialect,)
    resolver = PhaseResolver(files, headers, cache.header, listings)
    selection = _select(files, resolver, settings, include_baseline, cache)
    from migrations_policy.lint.options import alembic_ini

    ini_path, ini_sha = alembic_ini(ini)
    options = Options(dialects=dialects, postgresql_version=settings.postgresql_version,
                      alembic_ini=ini_path, alembic_ini_sha=ini_sha,
                      timeout=getattr(settings, "lint_timeout", 10.0), url=url,
                      memory_limit=settings.lint_memory_limit,
                      plugins=plugins(settings.lint_plugins, selection.files, settings.source_of("lint_plugins"))
                      if selection.files else Plugins())
    options_key = options.key()
    planned = []  # (path, phase, cache key, cached [line, code, message, dialect, default severity] lists or None)
    for path in selection.files:
        file_phase = phase or (phases or {}).get(path) or resolver.phase(path)
        digest = cache.digest(path)
        key = cache.key(digest, file_phase, options_key) if digest is not None else None
        planned.append((path, file_phase, key, cache.get(key) if key else None))
    missing = [(path, file_phase) for path, file_phase, _, hits in planned if hits is None]
    report = LintReport(files=len(selection.files), paths=[printable_path(str(path)) for path in selection.files],
                        baseline=selection.baseline, excluded=selection.excluded)  # paths printable as Finding.path
    # plain scripts read here, without running them nor importing alembic (``lint.static``); the rest is run
    statics = _static_verdicts(missing, options, jobs) if replay is None else {}
    rest = [task for index, task in enumerate(missing) if index not in statics]
    spawned = None
    if rest and replay is None:  # the worker imports and analyses while this process does the rest below
        from migrations_policy.lint.sandbox.parallel import analyse_all, spawn

        spawned = spawn(rest, options, jobs)
    overrides = settings.severity

    def findings(path: Path, file_phase: str, hits: list) -> list[Finding]:
        name = str(path)
        if path in unreadable:
            hits = [[1, "MP000", UNREADABLE_HEADER, "", "error"]]  # fails closed: never a silent skip
        if path in disagreements:
            hits = [disagreements[path], *hits]
        if path in sync_trigger_hits:
            hits = [*sync_trigger_hits[path], *hits]
        dropped = selection.ignored.get(path, ())
        found = []
        for line, code, message, dialect, default in hits:
            severity = default if code == "MP000" else overrides.get(code, default)
            if severity != "off" and not (dropped and code != "MP000" and code.startswith(dropped)):
                found.append(Finding(name, line, code, severity, message, file_phase, dialect))
        return found

    try:  # what needs no analysis, while the worker runs: the cached files' findings too
        disagreements = _phase_disagreements(files, resolver)
        sync_trigger_hits = _sync_trigger_hits(files, resolver, options.dialects)
        per_file = [None if hits is None else findings(path, file_phase, hits)
                    for path, file_phase, _, hits in planned]
        if missing:
            if replay is not None:
                analysis = _replay_all(files, missing, resolver, options, replay,
                                       lambda path: phase or (phases or {}).get(path) or resolver.phase(path))
            else:
                analysis = _with_statics(len(missing), statics, analyse_all(rest, options, jobs, spawned) if rest
                                         else None)
    except BaseException:
        if spawned is not None:  # (a no-op once analyse_all has read it)
            spawned.cancel()
        raise
    if missing:
        analysed = iter(enumerate(analysis.hits))
        for index, (message, trace) in sorted(analysis.internal.items()):
            report.internal.append((str(missing[index][0]), message, trace))
    for position, (path, file_phase, key, hits) in enumerate(planned):
        if hits is None:
            index, hits = next(analysed)
            if index in analysis.internal:
                hits = [[1, "MP000", f"internal error of the linter while analysing this script: "
                         f"{analysis.internal[index][0]} (please report it; --debug prints the traceback)", "", "error"]]
            elif key and (index in analysis.judged or not any(hit[1] == "MP000" for hit in hits)):
                cache.put(key, hits, analysis.modules.get(index, ()))
            per_file[position] = findings(path, file_phase, hits)
        report.findings.extend(per_file[position])
    cache.save()
    return report
