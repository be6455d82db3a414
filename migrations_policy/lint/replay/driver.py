"""``lint --replay``: upgrade the linted history from base on a scratch database and judge what really ran.

``replay_all(tasks, resolver, options, target) -> Analysis`` (the same answer as
``parallel.analyse_all``) orders the ``(path, phase)`` tasks as ``alembic upgrade heads``
would from an empty database (alembic's own ``RevisionMap`` built from the scripts'
headers, which are read, not imported: every branch, expand and contract, merges,
``depends_on``), then runs them one by one in ``lint.replay.worker`` on the database
``scratch_db.scratch_database(target)`` gives, so that each script runs at its own
``down_revision``.  Every file gets a verdict:

* replayed: the findings of what it executed (``MP004`` when the database refused it);
* not replayable (no revision, a revision declared twice, a down revision or dependency
  that is not among the linted files, an ancestor of those, a history alembic cannot
  order): ``MP000`` saying why, before anything runs;
* a descendant of a script that failed on the database: ``MP000`` naming that script.

Histories of different directories that declare the same revision id (mlflow's two trees) are replayed each
on its own database (``replay_all``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from migrations_policy.lint.script.headers import PhaseResolver
from migrations_policy.lint.options import Options
from migrations_policy.lint.sandbox.parallel import Analysis, _run_worker
from migrations_policy.lint.scratch.database import Target, scratch_database

_DEPENDS_ON = re.compile(r"^depends_on\s*(?::[^=\n]+)?=\s*(.+?)\s*(?:#.*)?$", re.MULTILINE)


def _depends_on(path: Path) -> tuple[str, ...]:
    """The literal ``depends_on`` of a script (alembic orders by it too); () when absent or not a literal."""
    try:
        found = _DEPENDS_ON.search(path.read_text(encoding="utf-8", errors="replace"))
        value = ast.literal_eval(found.group(1)) if found else None
    except (OSError, ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return ()
    if isinstance(value, str):
        return (value,)
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, (tuple, list)) else ()


def _verdict(message: str) -> list:
    return [[1, "MP000", f"not replayed: {message}", "", "error"]]


class _Plan:
    """Which tasks can be replayed, in alembic's order, each with its parents; a verdict for the others."""

    def __init__(self, tasks: list[tuple[Path, str]], resolver: PhaseResolver):
        self.paths = [path for path, _ in tasks]
        self.verdicts: dict[int, list] = {}
        #: index -> (revision, down revisions, depends_on) of each script with a revision.
        self.headers: dict[int, tuple[str, tuple[str, ...], tuple[str, ...]]] = {}
        declared: dict[str, list[int]] = {}
        labels: dict[str, str] = {}  # branch label -> the revision declaring it (a depends_on may name a label)
        for index, path in enumerate(self.paths):
            header = resolver.header(path)
            if header is None or not header.revision:
                self.verdicts[index] = _verdict("no revision = '...' found in the script's header")
                continue
            declared.setdefault(header.revision, []).append(index)
            labels.update(dict.fromkeys(header.branch_labels, header.revision))
            self.headers[index] = (header.revision, header.down_revisions, _depends_on(path))
        for index, (revision, down, depends) in self.headers.items():
            depends = tuple(dep if dep in declared else labels.get(dep, dep) for dep in depends)
            self.headers[index] = (revision, down, tuple(dep for dep in depends if dep not in down))
        for revision, indexes in declared.items():
            if len(indexes) > 1:
                paths = ", ".join(str(self.paths[i]) for i in indexes)
                for index in indexes:
                    self.verdicts[index] = _verdict(f"revision {revision} is declared by several files ({paths})")
        self.by_revision = {revision: indexes[0] for revision, indexes in declared.items() if len(indexes) == 1}
        self._block_missing()
        #: The replayed tasks in alembic's upgrade order, and each one's (revision, down revisions, parent tasks).
        self.order: list[int] = []
        self.graph: dict[int, tuple[str, tuple[str, ...], tuple[int, ...]]] = {}
        self._order()

    def _block_missing(self) -> None:
        """A parent that is missing (or not replayed) blocks a script and, through it, its descendants."""
        changed = True
        while changed:
            changed = False
            for index, (_, down, depends) in self.headers.items():
                if index in self.verdicts:
                    continue
                for parent in (*down, *depends):
                    if parent not in self.by_revision:
                        why = f"its down revision (or dependency) {parent} is not among the linted files"
                    elif self.by_revision[parent] in self.verdicts:
                        why = f"its ancestor {parent} ({self.paths[self.by_revision[parent]]}) is not replayed either"
                    else:
                        continue
                    self.verdicts[index] = _verdict(f"{why}; lint the whole version directory")
                    changed = True
                    break

    def _order(self) -> None:
        from alembic.script.revision import Revision, RevisionError, RevisionMap

        replayable = [index for index in self.headers if index not in self.verdicts]
        revisions = [Revision(revision, down or None, dependencies=depends or None)
                     for revision, down, depends in (self.headers[index] for index in replayable)]
        try:
            history = RevisionMap(lambda: revisions)
            ordered = list(reversed(list(history.iterate_revisions("heads", (), implicit_base=True))))
        except RevisionError as exc:
            for index in replayable:
                self.verdicts[index] = _verdict(f"alembic cannot order the history: {exc}")
            return
        for step in ordered:
            index = self.by_revision[step.revision]
            revision, down, depends = self.headers[index]
            self.order.append(index)
            self.graph[index] = (revision, down, tuple(self.by_revision[p] for p in (*down, *depends)))
        for index in set(replayable) - set(self.order):  # never reached by alembic's walk from the heads
            self.verdicts[index] = _verdict("alembic's upgrade from base does not reach it")


def _history_of(path: Path) -> Path:
    """The directory of the history *path* belongs to: its nearest ``versions`` directory (``versions/expand`` and
    ``versions/contract`` are one history), else its own directory."""
    for parent in path.parents:
        if parent.name == "versions":
            return parent
    return path.parent.parent if path.parent.name in ("expand", "contract") else path.parent


def _histories(tasks: list[tuple[Path, str]], resolver: PhaseResolver) -> list[list[int]]:
    """The task indexes per history: one group, unless histories of different directories declare the same
    revision id (mlflow's two trees): then one group per directory, each replayed on its own database."""
    groups: dict[Path, list[int]] = {}
    for index, (path, _) in enumerate(tasks):
        groups.setdefault(_history_of(path), []).append(index)
    owners: dict[str, set[Path]] = {}
    for directory, indexes in groups.items():
        for index in indexes:
            header = resolver.header(tasks[index][0])
            if header is not None and header.revision:
                owners.setdefault(header.revision, set()).add(directory)
    if len(groups) < 2 or all(len(found) < 2 for found in owners.values()):
        return [list(range(len(tasks)))]
    return list(groups.values())


def replay_all(tasks: list[tuple[Path, str]], resolver: PhaseResolver, options: Options, target: Target) -> Analysis:
    """Replay *tasks* (see the module docstring); the hits of each, in the order of *tasks*.  Histories of
    different directories that share a revision id are replayed each on its own database: with ``--url``, the
    first on that database and each other on a throwaway one on the same server (``_other_database``)."""
    groups = _histories(tasks, resolver)
    if len(groups) == 1:
        return _replay_history(tasks, resolver, options, target)
    merged = Analysis([None] * len(tasks))
    for number, group in enumerate(groups):
        subset = [tasks[i] for i in group]
        if number and target.url:
            part = _replay_elsewhere(subset, resolver, options, target.url)
        else:
            part = _replay_history(subset, resolver, options, target)
        merged.place(part, group)
    return merged


def _replay_elsewhere(tasks: list[tuple[Path, str]], resolver: PhaseResolver, options: Options, url: str) -> Analysis:
    """A history replayed beside the one on the given *url* (they share a revision id, and one database holds
    one ``alembic_version``): on a throwaway database the linter creates on *url*'s server and drops at the end
    (SQLite: a temporary file).  When the server refuses to create one: ``MP000`` for each script, saying so."""
    from migrations_policy.core.errors import DatabaseError
    from migrations_policy.core.urls import parse_url

    other = Target() if parse_url(url).get_backend_name() == "sqlite" else Target(server=url)
    try:
        return _replay_history(tasks, resolver, options, other)
    except DatabaseError as exc:
        why = _verdict(f"it shares a revision id with another history linted with it, which --url's database "
                       f"holds, and no second database could be created for it ({exc}); lint this history "
                       "alone, or give --scratch-server SERVER_URL")
        return Analysis([list(why) for _ in tasks])


def _replay_history(tasks: list[tuple[Path, str]], resolver: PhaseResolver, options: Options,
                    target: Target) -> Analysis:
    plan = _Plan(tasks, resolver)
    hits: list = [plan.verdicts.get(index) for index in range(len(tasks))]
    analysis = Analysis(hits)
    if not plan.order:
        return analysis
    blocked: dict[int, tuple[str, str]] = {}

    def done(index: int, found: list, internal, modules=(), committed=False, blocker=None) -> None:
        hits[index] = found
        if internal:
            analysis.internal[index] = tuple(internal)
        if not committed:  # its descendants are not replayed (by a restarted worker either), naming the failure
            blocked[index] = tuple(blocker) if blocker else (plan.graph[index][0], str(tasks[index][0]))

    with scratch_database(target) as url:
        todo = list(plan.order)
        while todo:
            job = {"url": url, "graph": {i: plan.graph[i] for i in todo}, "blocked": blocked}
            suspects, how = _run_worker([(i, *tasks[i]) for i in todo], options, 1, done,
                                        "migrations_policy.lint.replay.worker", job)
            for index in suspects:  # the script running when the worker died
                hits[index] = [[1, "MP000", f"the script ended the linter's replay process (it {how})", "", "error"]]
                blocked[index] = (plan.graph[index][0], str(tasks[index][0]))
            left = [i for i in todo if hits[i] is None]
            if len(left) == len(todo):
                from migrations_policy.lint.sandbox.parallel import WorkerError

                raise WorkerError(f"the replay worker process {how} without judging {len(left)} file(s)")
            todo = left
    return analysis
