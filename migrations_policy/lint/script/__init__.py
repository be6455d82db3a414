"""A revision script as text: its headers, its phase, its inline ignores.

* ``headers``: revision headers read from the source, and each script's phase;
* ``header_ast``: header values that are not plain literals, read from the module's tree;
* ``ignores``: ``# migrations-policy: ignore[CODE] reason`` comments.

Nothing is imported here, so that each module costs only what it imports.
"""
