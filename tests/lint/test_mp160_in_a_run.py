"""MP160 is decided across files in every lint run, cold and warm alike: a contract that drops a
column while the expand's sync trigger still uses it is reported at the drop."""

from __future__ import annotations

import pytest

from migrations_policy import lint

from ..helpers import copy_example

DROPS = {"name": '    op.drop_sync_trigger("nodes", old="name", new="display_name")\n',
         "extra": '    op.drop_sync_trigger("nodes", old="extra", new="meta")  # before the columns they use go\n'}


@pytest.mark.parametrize("forgotten", [(), ("name",), ("extra",), ("name", "extra")])
def test_mp160_cold_and_warm(tmp_path, monkeypatch, forgotten):
    monkeypatch.setenv("MIGRATIONS_POLICY_CACHE_DIR", str(tmp_path / "cache"))
    versions = copy_example(tmp_path).parent / "migrations" / "versions"
    contract = versions / "contract" / "0003_r3_drop_extra_name.py"
    text = contract.read_text()
    for column in forgotten:
        assert DROPS[column] in text
        text = text.replace(DROPS[column], "")
    contract.write_text(text)
    runs = [lint.run([versions]) for _ in range(2)]  # cold, then answered by the cache
    for report in runs:
        found = [f for f in report.findings if f.code == "MP160"]
        assert sorted(f.message.split()[1] for f in found) == sorted(f"nodes.{c}" for c in forgotten)
        assert all(f.path == str(contract) for f in found)


def test_mp161_in_a_run(tmp_path, monkeypatch):
    """A release-3 expand re-creating nodes (SQLite batch) while release 2's sync triggers are live is
    reported at the block; the example as shipped (its contract drops the triggers first) is not."""
    monkeypatch.setenv("MIGRATIONS_POLICY_CACHE_DIR", str(tmp_path / "cache"))
    versions = copy_example(tmp_path).parent / "migrations" / "versions"
    assert not [f for f in lint.run([versions]).findings if f.code == "MP161"]
    script = versions / "expand" / "0003_r3_widen_state.py"
    script.write_text('"""widen"""\nfrom alembic import op\nimport sqlalchemy as sa\n\n'
                      'revision = "r3_widen"\ndown_revision = "r2_meta_display_name_version"\n'
                      "branch_labels = None\ndepends_on = None\n\n\ndef upgrade() -> None:\n"
                      '    with op.batch_alter_table("nodes") as batch_op:\n'
                      '        batch_op.alter_column("provision_state", type_=sa.String(32))\n\n\n'
                      "def downgrade() -> None:\n    pass\n")
    for report in (lint.run([versions]), lint.run([versions])):  # cold, then warm
        (found,) = [f for f in report.findings if f.code == "MP161"]
        assert (found.path, found.line, found.severity) == (str(script), 12, "warning")
        assert "mp_sync" not in found.message and "nodes.extra -> meta" in found.message
