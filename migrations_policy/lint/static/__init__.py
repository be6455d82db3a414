"""Plain scripts judged from their syntax tree, without running them or importing alembic (issue 28).

* ``reader``: ``analyse(path, phase, options)``, a script's findings read from its tree, or None (run it);
* ``ops``: what each alembic operation records, called with values read from the tree;
* ``names``: what the reader knows of alembic and SQLAlchemy, as tables (checked against both by a test);
* ``parallel``: ``read_all``, the scripts of a run read over several processes.

Nothing is imported here, so that each module costs only what it imports.
"""
