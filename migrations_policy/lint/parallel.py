"""Analyse the files a run could not answer from the cache, on several CPUs when it pays.

``analyse_all(tasks, options)`` returns ``engine.analyse(path, phase, options)`` for
every ``(path, phase)`` task, in order, each hit as the list the cache stores
(``Hit.to_list()``: what crosses the process boundary is plain lists and strings).
With at least ``MIN_FILES`` tasks and more than one CPU, contiguous chunks go to a
``ProcessPoolExecutor`` whose workers are forked after alembic is imported (they
share it instead of importing it again; the imported objects are ``gc.freeze()``-d
first, so the workers' collections neither scan nor copy them); otherwise, where
``fork`` is unavailable, or when this process runs other threads, they run in this
process.
``$MIGRATIONS_POLICY_LINT_JOBS`` sets the number of processes (``1``: no pool).
If a worker dies (a script that calls ``os._exit``), the run falls back to this process.
"""

from __future__ import annotations

import gc
import os
import threading
from itertools import repeat
from pathlib import Path

from .engine import Options, analyse

ENV = "MIGRATIONS_POLICY_LINT_JOBS"
MIN_FILES = 64
CHUNKS_PER_JOB = 4


def jobs() -> int:
    value = os.environ.get(ENV, "").strip()
    if value.isdigit() and int(value) > 0:
        return int(value)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _analyse_chunk(chunk: list[tuple[Path, str]], options: Options) -> list[list[list]]:
    return [[hit.to_list() for hit in analyse(path, phase, options)] for path, phase in chunk]


def _import_analysis_modules() -> None:
    """alembic, SQLAlchemy (through ``recorder``) and sqlparse's keyword tables, with the cyclic GC paused.

    Their import allocates hundreds of thousands of objects and no garbage worth collecting:
    collecting meanwhile costs ~6% of it.  Scripts find them imported.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        from ..policy.sql_lexer import _plain_word
        from . import recorder  # noqa: F401

        _plain_word("SELECT")
    finally:
        if enabled:
            gc.enable()


def _in_pool(tasks: list[tuple[Path, str]], options: Options, workers: int) -> list[list[list]]:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    _import_analysis_modules()  # once, before the fork
    gc.freeze()  # the imported modules' objects: the workers' collections skip them (and leave their pages shared)

    size = -(-len(tasks) // (workers * CHUNKS_PER_JOB))
    chunks = [tasks[i:i + size] for i in range(0, len(tasks), size)]
    try:
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            return [hits for chunk in pool.map(_analyse_chunk, chunks, repeat(options)) for hits in chunk]
    finally:
        gc.unfreeze()


def analyse_all(tasks: list[tuple[Path, str]], options: Options) -> list[list[list]]:
    workers = min(jobs(), len(tasks) // (MIN_FILES // 2) or 1) if len(tasks) >= MIN_FILES and not options.url else 1
    if workers > 1 and threading.active_count() == 1:  # forking a threaded process risks its locks
        import multiprocessing
        from concurrent.futures.process import BrokenProcessPool

        if "fork" in multiprocessing.get_all_start_methods():
            try:
                return _in_pool(tasks, options, workers)
            except (BrokenProcessPool, OSError):
                pass
    _import_analysis_modules()
    return _analyse_chunk(tasks, options)
