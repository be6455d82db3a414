"""``dbsync prune``: the rows a project declares prunable, deleted in batches (``deletion``),
never while a foreign key still points at them (``references``)."""
