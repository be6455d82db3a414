"""A lint run's findings and their rendering.

* ``report``: ``Finding`` and ``LintReport`` (what reporters render, and the exit code);
* ``reporters``: text, json, github, sarif and junit.

Nothing is imported here, so that each module costs only what it imports.
"""
