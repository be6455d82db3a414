"""Scripts analysed apart from the linter and from each other: processes, limits, and the channel back.

* ``parallel``: the linter's side: starts worker processes, hands them scripts, reads their answers;
* ``worker``: the process (``python -m migrations_policy.lint.sandbox.worker``) that forks a child per script;
* ``prefork``: what the worker does itself, before or instead of forking (imports, batches of plain scripts);
* ``channel``: the worker -> linter frames, read by a party that does not trust them;
* ``limits``: a child's CPU, wall-clock and memory limits.

Nothing is imported here, so that each module costs only what it imports.
"""
