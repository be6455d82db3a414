"""What the lint worker does itself, before or instead of forking a child per script (issue 28: CI speed).

* ``plain(path, options)``: a plain script (``lint.offline.plain``) is analysed in the worker, ``in_worker``, with
  the verdict a child would send; any surprise sends it to a child after all.
* ``batch(tasks, phase, options)``: in a child the worker forks for a batch of scripts: each plain one is
  analysed there (``in_worker``), the others are handed back with the modules they import; the worker forks
  one child for each of those.  So plain scripts are read on every CPU (``--jobs``), not on the worker's alone.
* ``preimport(names, options)``: the fork server's warm-up -- the installed packages the scripts import are
  imported once, so that every child starts with them.
"""

from __future__ import annotations

import os
import sys


def plain(path: str, options):
    """``(source, code)`` when the worker analyses *path* itself (``lint.offline.plain``): no plugin is configured
    (a custom operation runs the project's code) and the script can only call alembic operations with literal
    arguments; else None."""
    if options.plugins.configured or options.plugins.found:
        return None
    from migrations_policy.lint.offline.plain import MAX_BYTES, plain_tree

    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_BYTES + 1)
        source = data.decode("utf-8-sig")
        tree = plain_tree(source, filename=path)
        return None if tree is None else (source, compile(tree, path, "exec", dont_inherit=True))
    except (OSError, UnicodeDecodeError, ValueError, SyntaxError, RecursionError, MemoryError):
        return None


#: The names of the installed modules imported before the first fork (``preimport``): none is local, so
#: none is a dependency of a script's cache entry.
PREIMPORTED: list[str] = []


def imported_names(path: str) -> list[str]:
    """The absolute module names a script imports at its top level (read, not run)."""
    import ast

    try:
        with open(path, "rb") as fh:
            tree = ast.parse(fh.read(5_000_000))
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    names = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
    return names


#: At most this many scripts per batch child (``prefork.batch``); fewer when that leaves a CPU idle.
BATCH = 128


def batches(tasks: list, workers: int) -> list[list]:
    """*tasks* in batches: about two per process that may run at once, each of at most ``BATCH`` scripts."""
    size = max(1, min(BATCH, -(-len(tasks) // (workers * 2))))
    return [tasks[i:i + size] for i in range(0, len(tasks), size)]


def batch_answers(result: tuple, batch: list) -> list | None:
    """The ``(index, verdict or ("child", names))`` answers of a batch child, or None when its result is not
    one answer per task of *batch* (it died, ran out of time, or a script surprised it): each is then forked
    alone."""
    hits, internal = result[0], result[1]
    indexes = [task[0] for task in batch]
    if internal is not None or not isinstance(hits, list) or len(hits) != len(batch):
        return None
    for answer, index in zip(hits, indexes):
        if not (isinstance(answer, tuple) and len(answer) == 2 and answer[0] == index):
            return None
    return hits


def batch(tasks, _phase, options) -> tuple:
    """In a child forked for a batch of ``(index, path, phase)`` tasks: ``([(index, verdict or names)...],)``
    -- the verdict of each plain script as ``in_worker`` builds it, else the module names the script imports
    (``imported_names``: the worker pre-imports them before forking one child for that script)."""
    answers = []
    for index, path, phase in tasks:
        found = plain(path, options)
        verdict = None if found is None else in_worker(path, phase, options, *found)
        answers.append((index, verdict if verdict is not None else ("child", imported_names(path))))
    return (answers,)


def preimport(wanted, options) -> None:
    """The fork server's warm-up: import, once, the installed packages of *wanted* (the module names the scripts
    import, ``imported_names``: a project's
    dependencies: SQLAlchemy models, its framework), so that each child starts with them instead of importing
    them again.  Only modules that resolve -- with the script's own path, the current directory first -- to an
    installed location (never the project's own modules: a script's cache entry depends on those, and their
    code is the project's, which runs in the child); within the time limit; a failure is ignored (the child
    meets it again and reports it).  Every child starts from the same state, whatever the order of the files.
    Within ``lint_timeout`` s of CPU time and the wall-clock backstop (``limits.within``)."""
    import importlib
    import importlib.util

    from migrations_policy.lint.offline.loader import is_local_file, sandbox

    wanted = sorted(set(wanted) - set(sys.modules))
    if not wanted:
        return

    from migrations_policy.lint.sandbox.limits import within

    try:
        with within(options.timeout), sandbox():
            for name in wanted:
                try:
                    spec = importlib.util.find_spec(name.split(".")[0])
                    origin = getattr(spec, "origin", None) or ""
                    locations = list(getattr(spec, "submodule_search_locations", None) or [])
                    files = [origin] if origin.endswith(".py") else [
                        os.path.join(location, "__init__.py") for location in locations]
                    if not files or any(is_local_file(file) for file in files) or not all(
                            os.path.isfile(file) for file in files):
                        continue
                    importlib.import_module(name)
                    PREIMPORTED.append(name)
                except TimeoutError:
                    raise
                except BaseException:  # noqa: BLE001 - the child meets it again and reports it
                    continue
            # the models they define: mapped once here, not on first use in every child (none was defined when the
            # ORM was not executed: in a one-script job it is bound, executed on first use, ``worker._for_children``)
            if PREIMPORTED and "sqlalchemy.orm.mapper" in sys.modules:
                from sqlalchemy.orm import configure_mappers

                try:
                    configure_mappers()
                except Exception:  # noqa: BLE001 - a child meets it again where a script uses them
                    pass
    except TimeoutError:
        pass


def in_worker(path: str, phase: str, options, source: str, code) -> tuple | None:
    """The verdict of a plain script analysed here, as a child would send it; None on any surprise (a child
    analyses it then)."""
    from pathlib import Path

    from migrations_policy.lint.engine import analyse

    try:
        hits = analyse(Path(path), phase, options, source=source, code=code)
        return [hit.to_list() for hit in hits], None, [], True
    except BaseException:  # noqa: BLE001 - isolated in a child instead
        return None
