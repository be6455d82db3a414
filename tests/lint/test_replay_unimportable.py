"""``--replay`` when a script cannot be imported whole (issue 28): a package that is not installed does not turn
the script and every later one into MP000.  The script that uses it is linted from its source, and the scripts
after it -- which the database cannot reach -- get their offline verdict, each with a MP001 warning saying why it
was not replayed; no MP000 anywhere."""

from __future__ import annotations

import os
import random
from pathlib import Path

from .conftest import script

SEED = int(os.environ.get("MP_REPLAY_IMPORT_SEED") or random.randrange(10 ** 9))
print(f"test_replay_unimportable: MP_REPLAY_IMPORT_SEED={SEED}")
#: Operations the scratch database accepts ({n} unique per use): a refusal would block the rest with MP000.
OPS = ['op.add_column("{t}", sa.Column("c{n}", sa.Integer(), nullable=True))',
       'op.create_index("ix{n}", "{t}", ["id"])',
       'op.add_column("{t}", sa.Column("d{n}", sa.String(5), nullable=False, server_default="x"))',
       'op.execute("UPDATE {t} SET id = id")']


def test_an_unimportable_script_does_not_make_the_rest_mp000(tmp_path, run_lint):
    rng = random.Random(SEED)
    versions = tmp_path / "versions"
    versions.mkdir()
    missing = "mpnotinstalled_" + "".join(rng.choice("abcdef") for _ in range(6))
    broken_at = rng.randrange(0, 3)
    down, paths = None, []
    for i in range(5):
        rid = f"r{i}{rng.randrange(10 ** 4)}"
        table = f"t{i}"
        body = [f'op.create_table("{table}", sa.Column("id", sa.Integer, primary_key=True))']
        if i > 0:
            body += [rng.choice(OPS).format(t=f"t{i - 1}", n=f"{i}_{k}") for k in range(rng.randint(1, 2))]
        extra = ""
        if i == broken_at:
            extra = f"import {missing}\n"
            body.insert(0, f"{missing}.setup(op)")
        path = versions / f"{i:02d}_{rid}.py"
        path.write_text(script("\n".join(body), revision=rid, down=down, labels=("expand",) if down is None else None,
                               extra=extra))
        paths.append(path)
        down = rid
    run = run_lint("--format", "json", "--phase", "expand", "--dialect", "sqlite", "--replay", versions)
    assert not run.findings("MP000"), (SEED, run.json)
    warned = {Path(f["path"]).name for f in run.findings("MP001")}
    assert {p.name for p in paths[broken_at:]} <= warned, (SEED, run.json)
    assert missing in " ".join(f["message"] for f in run.findings("MP001")), SEED
    # the scripts after it: their offline verdict, besides the warning
    offline = run_lint("--format", "json", "--phase", "expand", "--dialect", "sqlite", *paths[broken_at + 1:])
    def rules(report):
        return sorted((Path(f["path"]).name, f["line"], f["code"]) for f in report["findings"]
                      if f["code"] not in ("MP001", "MP004"))
    later = {p.name for p in paths[broken_at + 1:]}
    assert [r for r in rules(run.json) if r[0] in later] == rules(offline.json), SEED


def test_two_histories_sharing_a_revision_id_are_replayed_each_on_its_own(tmp_path, run_lint):
    rng = random.Random(SEED)
    shared = f"shared{rng.randrange(10 ** 6)}"
    trees = []
    for name in ("main", "auth"):
        versions = tmp_path / name / "versions"
        versions.mkdir(parents=True)
        down = None
        for i, rid in enumerate([shared, f"{name}{rng.randrange(10 ** 6)}"]):
            body = f'op.create_table("{name}_{i}", sa.Column("id", sa.Integer, primary_key=True))'
            if i:
                body += "\n" + rng.choice(OPS).format(t=f"{name}_0", n=f"{name}{i}")
            (versions / f"{i}_{rid}.py").write_text(script(body, revision=rid, down=down,
                                                          labels=("expand",) if down is None else None))
            down = rid
        trees.append(versions)
    run = run_lint("--format", "json", "--phase", "expand", "--dialect", "sqlite", "--replay", *trees)
    assert run.json["files"] == 4 and not run.findings("MP000"), (SEED, run.json)
    alone = [run_lint("--format", "json", "--phase", "expand", "--dialect", "sqlite", "--replay", tree).json
             for tree in trees]
    assert sorted(run.json["findings"], key=str) == sorted([f for r in alone for f in r["findings"]], key=str), SEED
