"""What a revision's ``upgrade()`` does, found without a database.

* ``loader``: a script imported safely; ``missing``: a module with what could be imported, when not all of it;
* ``recorder`` / ``recording`` / ``fakes``: ``upgrade()`` run offline, its operations recorded;
* ``plain``: scripts whose running can do nothing but call alembic operations with literal arguments;
* ``plugins``: the modules that register a project's custom operations;
* ``reads``: the files a script reads (its cached verdict depends on them);
* ``astscan`` / ``unimported``: ``upgrade()`` read from its source when it cannot run offline.

Nothing is imported here, so that each module costs only what it imports.
"""
