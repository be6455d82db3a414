"""Which object versions each release of the inventory reads and writes.

Release 1 had no version column (its rows are NULL until the built-in
``object_version_*`` data migrations of release 2 fill them).  Keep the current
release and the one before it; drop older releases as the upgrade window moves.
"""

from migrations_policy.data import ReleaseMapping

RELEASE_MAPPING = ReleaseMapping(
    tables={"Node": "nodes", "Port": "ports"},
    releases={
        "2.0": {"Node": ["1.1"], "Port": ["1.1"]},
        "3.0": {"Node": ["1.1"], "Port": ["1.1"]},
    },
)
