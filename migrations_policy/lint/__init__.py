"""The linter: expand / contract policy for alembic revision scripts, with no database.

``run(paths, phase=None, dialects=..., settings=...) -> LintReport`` lints files and
directories (a directory contributes the ``*.py`` files that declare ``revision =``).
For each script, its ``upgrade()`` is recorded per dialect offline (``offline.recorder``), or
read from source when it needs a database (``offline.astscan``; ``--url`` runs it for real
on a scratch database instead, ``scratch.url``; ``--replay`` upgrades the whole history from
base on a scratch database and records what each script really executed, ``replay``), every operation is judged by the policy
knowledge base (``migrations_policy.policy``), and the rules (``lint.rules``, one per
module) turn verdicts into findings (``judge`` memoizes them per operation signature).
Results are cached per file content behind a stat index (``lint.cache``: a warm run
is one ``stat`` per script and imports neither alembic nor the engine, the rules or
the policy knowledge base); files the cache cannot answer
are analysed on several CPUs when there are many (``sandbox.parallel``); ``lint.output.reporters``
renders the report.

Modules: ``linter`` (``run``: many files), ``engine`` (one file), ``options`` (what besides
the file changes its findings), ``judge``, ``cache``, ``analysis``, ``adoption`` (the
``baseline``, ``exclude`` and ``per_file_ignores`` settings: which scripts are reported and
which codes per file), ``hook`` / ``alembic_plugin`` (alembic post_write_hook).  Folders:
``offline`` (``upgrade()`` recorded without a database, or read from its source), ``script``
(headers, phase, inline ignores), ``sandbox`` (worker processes, limits, the channel),
``static`` (plain scripts read from their tree), ``replay``, ``scratch`` (scratch databases),
``output`` (report, reporters), ``rules`` (one rule per module).

``lint.run`` and ``lint.collect`` live in ``linter`` and are imported on first use: alembic
imports ``lint.alembic_plugin`` on every ``import alembic``, which must not load the linter.
"""

from __future__ import annotations

from migrations_policy.core.lazy import lazy_getattr

_NAMES = {"run": ".linter", "collect": ".linter", "LintReport": ".output.report", "Finding": ".output.report"}

__all__ = sorted(_NAMES)


__getattr__ = lazy_getattr(__name__, _NAMES)
