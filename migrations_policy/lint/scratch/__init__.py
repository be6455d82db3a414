"""The linter's databases: a scratch database to run scripts on for real.

* ``url``: ``lint --url``: ``upgrade()`` run on a scratch database, then rolled back;
* ``database``: the database ``lint --replay`` upgrades the history on (given, or created and dropped).

Nothing is imported here, so that each module costs only what it imports.
"""
