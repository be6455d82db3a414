"""``read_all``: the scripts of a run read by ``lint.static``, over several processes when there are many.

Reading a script is pure computation on its text (nothing of the script runs), so the linter's own process
forks ``--jobs`` - 1 children, each reading a share of the scripts and sending back the findings
(``marshal``); this process reads its own share meanwhile.  A child that fails, dies or sends anything but
one answer per script of its share leaves those scripts unread: they are run in the worker, as any
script ``lint.static`` declines.  The answers do not depend on the number of processes.
"""

from __future__ import annotations

import gc
import marshal
import os
from pathlib import Path

#: Fewer scripts than this per process: read them all here (a fork costs more than it saves).
MIN_SHARE = 64


def _read(tasks: list[tuple[int, Path, str]], options) -> dict[int, list]:
    from migrations_policy.lint.static.reader import analyse

    found = {}
    for index, path, phase in tasks:
        hits = analyse(path, phase, options)
        if hits is not None:
            found[index] = [hit.to_list() for hit in hits]
    return found


def _warm(share: list[tuple[int, Path, str]], options) -> dict[int, list]:
    """Import here, before forking, what reading imports when first used -- the reader, the engine's judging, the
    rules' registry, the SQL lexer and sqlparse's keyword table -- so that each process does not import it again
    (~0.1 CPU-s each), and read the first script of *share* (whatever else its reading loads, once)."""
    from migrations_policy.lint.engine import judged  # noqa: F401
    from migrations_policy.lint.rules import all_rules
    from migrations_policy.lint.static import reader  # noqa: F401
    from migrations_policy.policy import sql, sql_lexer  # noqa: F401

    all_rules()
    sql_lexer.plain("SELECT 1")
    return _read(share[:1], options)


def read_all(missing: list[tuple[Path, str]], options, jobs: int | None = None) -> dict[int, list]:
    """index -> the findings of each ``(path, phase)`` of *missing* that ``lint.static`` reads (the cached lists)."""
    tasks = [(index, path, phase) for index, (path, phase) in enumerate(missing)]
    if len(tasks) < 2 * MIN_SHARE or not hasattr(os, "fork"):
        return _read(tasks, options)  # (a pre-commit run: not even lint.sandbox.parallel is imported)
    from migrations_policy.lint.analysis import jobs as job_count

    processes = min(job_count(jobs), len(tasks) // MIN_SHARE)
    if processes <= 1:
        return _read(tasks, options)
    shares = [tasks[i::processes] for i in range(processes)]
    found = _warm(shares[0], options)
    children = []
    gc.freeze()  # (the objects so far are never collected: a child's collections neither scan nor copy them)
    try:
        for share in shares[1:]:
            read_end, write_end = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: read its share, send it, end without running this process's exit code
                os.close(read_end)
                code = 1
                try:
                    data = marshal.dumps(_read(share, options))
                    with os.fdopen(write_end, "wb") as out:
                        out.write(data)
                    code = 0
                finally:
                    os._exit(code)
            os.close(write_end)
            children.append((pid, read_end, share))
        gc.unfreeze()
        found.update(_read(shares[0][1:], options))
        for pid, read_end, share in children:
            with os.fdopen(read_end, "rb") as channel:
                data = channel.read()
            _, status = os.waitpid(pid, 0)
            found.update(_answers(data, status, share))
        children = []
        return found
    finally:
        gc.unfreeze()
        for pid, read_end, _ in children:  # an error here: the children are not waited for in vain
            try:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
            except OSError:
                pass


def _answers(data: bytes, status: int, share: list) -> dict[int, list]:
    """A child's answers, when it ended well and answered only for its own scripts; else none (run them)."""
    if status != 0:
        return {}
    try:
        answers = marshal.loads(data)
    except (EOFError, ValueError, TypeError):
        return {}
    indexes = {index for index, _, _ in share}
    if not isinstance(answers, dict) or not set(answers) <= indexes:
        return {}
    return answers
