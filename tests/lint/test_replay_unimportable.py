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


def test_two_histories_sharing_a_revision_id_replayed_with_a_given_url(backend, db_url, server_for, tmp_path,
                                                                       run_lint):
    """``--replay --url DB``: the given (empty) database takes one history; each other history that shares a
    revision id with it gets a throwaway database of its own on the same server (SQLite: a temporary file),
    dropped at the end -- no MP000 for the shared id, and the findings of each history replayed alone."""
    rng = random.Random(SEED + 1)
    shared = [f"shared{rng.randrange(10 ** 6)}" for _ in range(rng.randint(1, 2))]
    trees = []
    for name in rng.sample(["main", "auth", "extra"], rng.randint(2, 3)):
        versions = tmp_path / name / "versions"
        versions.mkdir(parents=True)
        down = None
        revisions = shared + [f"{name}{rng.randrange(10 ** 6)}" for _ in range(rng.randint(0, 2))]
        for i, rid in enumerate(revisions):
            body = f'op.create_table("{name}_{i}", sa.Column("id", sa.Integer, primary_key=True))'
            if i:
                body += "\n" + rng.choice(OPS).format(t=f"{name}_0", n=f"{name}{i}")
            (versions / f"{i}_{rid}.py").write_text(script(body, revision=rid, down=down,
                                                          labels=("expand",) if down is None else None))
            down = rid
        trees.append(versions)
    url = db_url.render_as_string(hide_password=False)
    files = sum(len(list(t.glob("*.py"))) for t in trees)
    run = run_lint("--format", "json", "--phase", "expand", "--replay", "--url", url, *trees)
    assert run.json["files"] == files and not run.findings("MP000"), (SEED, backend, run.json)
    if backend == "sqlite":
        alone_args = ["--replay"]
    else:
        alone_args = ["--scratch-server", server_for(backend).url.render_as_string(hide_password=False)]
    alone = [run_lint("--format", "json", "--phase", "expand", *alone_args, tree).json for tree in trees]
    def key(f):
        return (f["path"], f["line"], f["code"], f["message"])
    assert sorted(map(key, run.json["findings"])) == sorted(key(f) for r in alone for f in r["findings"]), SEED
    assert db_url.password is None or db_url.password not in run.out, SEED
