"""The inventory example's history, regenerated with the autogenerate split from the
release models, puts every change in the same phase as the hand-written scripts."""

from __future__ import annotations

import runpy
from migrations_policy.lint.offline.recorder import record

from ..helpers import EXAMPLE

HAND_WRITTEN = EXAMPLE / "migrations" / "versions"
RELEASE_MODELS = '''
import sys
sys.path.insert(0, {path!r})
from inventory.models.{release} import metadata
'''


def phase_ops(paths, dialect="postgresql") -> dict[str, set[tuple]]:
    """(kind, table, column or name) of every op each phase's scripts run on *dialect*."""
    found: dict[str, set[tuple]] = {"expand": set(), "contract": set()}
    for path in paths:
        recording = record(runpy.run_path(str(path))["upgrade"], dialect, str(path))
        found[path.parent.name].update((op.kind, op.table, op.column or op.name) for op, _ in recording.ops)
    return found


def test_regenerated_history_has_the_same_phases(sqlite_workspace):
    """Autogenerate runs on SQLite here (all backends: test_split); the comparison is offline,
    per dialect."""
    workspace = sqlite_workspace
    workspace.upgrade()
    generated = []
    for release in ("release1", "release2", "release3"):
        workspace.models(RELEASE_MODELS.format(path=str(EXAMPLE), release=release))
        files = workspace.revision(release)
        generated += [files[phase] for phase in ("expand", "contract") if phase in files]
        workspace.upgrade("expand@head")
        if "contract" in files:
            workspace.alembic_cli("-x", "migrations_policy_force=regenerating the example", "upgrade", "heads")
    # release 1: expand only; release 2: expand (+ contract validating the FK); release 3: contract only
    assert [(p.parent.name, p.stem.split("_", 1)[1]) for p in generated] == [
        ("expand", "release1"), ("expand", "release2"), ("contract", "release2"), ("contract", "release3")]
    hand = [p for p in sorted(HAND_WRITTEN.glob("*/0*.py")) if not p.name.startswith("0000_")]
    # The hand-written history adds sync triggers (extra/meta, name/display_name): autogenerate
    # sees an added column in release 2 and a dropped one in release 3, and cannot pair them.
    sync = {("other", "nodes", "CreateSyncTriggerOp"), ("other", "nodes", "DropSyncTriggerOp")}
    for dialect in ("postgresql", "mysql"):
        hand_ops = phase_ops(hand, dialect)
        assert sync <= hand_ops["expand"] | hand_ops["contract"]
        assert phase_ops(generated, dialect) == {phase: found - sync for phase, found in hand_ops.items()}, dialect
    assert ("drop_column", "nodes", "extra") in phase_ops(hand)["contract"]
    assert ("validate_constraint", "ports", "fk_ports_node_id_nodes") in phase_ops(hand)["contract"]
    assert ("create_index", "nodes", "ix_nodes_version") in phase_ops(hand)["expand"]
