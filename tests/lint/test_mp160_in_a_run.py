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
