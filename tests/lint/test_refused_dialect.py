"""A script that refuses a dialect itself (issue 28: zenml's ``raise NotImplementedError("Unsupported engine:
postgresql")``; zenml supports MySQL and SQLite) is judged on the dialects it runs on, with one ``MP001`` line per
dialect it refuses -- not ``MP000`` for the whole file, which keeps meaning "could not be analysed".

Drawn: how the dialect is asked, which dialects are refused (some or all three), where the ``raise`` is (in
``upgrade()``, in a helper function of the script, with or without a message), which operations run before and
after it and on which dialect.  The findings of a run over all three dialects, less the ``MP001`` notes, must equal
those of a run over only the dialects the script accepts (the operations recorded before a refusal never leak into
them); a script refusing every dialect linted stays ``MP000``, and so does another exception type; a
``NotImplementedError`` raised outside the script (a helper module), or after the script inspected the (empty,
offline) database, is not taken for a refusal: its source is read, as before.
"""

from __future__ import annotations

import os
import random

from .conftest import script

SEED = int(os.environ.get("MP_REFUSED_SEED") or random.randrange(10 ** 9))
print(f"test_refused_dialect: MP_REFUSED_SEED={SEED}")
DIALECTS = ("postgresql", "mysql", "sqlite")
ASK = ["name = op.get_bind().dialect.name\n", "name = op.get_bind().engine.name\n",
       "name = op.get_context().dialect.name\n", "bind = op.get_bind()\nname = bind.dialect.name\n"]
OPS = ['op.drop_column("t{n}", "c{n}")', 'op.add_column("t{n}", sa.Column("c{n}", sa.Integer(), nullable=False))',
       'op.create_index("ix{n}", "t{n}", ["c{n}"])', 'op.rename_table("t{n}", "u{n}")',
       'op.alter_column("t{n}", "c{n}", type_=sa.BigInteger())']


def _ops(rng: random.Random, count: int) -> str:
    lines = []
    for _ in range(count):
        operation = rng.choice(OPS).format(n=rng.randrange(1000))
        if rng.random() < 0.3:  # on one dialect only
            operation = f'if name == "{rng.choice(DIALECTS)}":\n    {operation}'
        lines.append(operation + "\n")
    return "".join(lines)


def _refusing(rng: random.Random, refused: tuple[str, ...], kind: str) -> tuple[str, str]:
    """(body, extra module code) of a script refusing *refused*."""
    message = rng.choice(['f"Unsupported engine: {name}"', '"not supported"', ""])
    error = "RuntimeError" if kind == "other type" else "NotImplementedError"
    raised = f"raise {error}({message})" if message or rng.random() < 0.5 else f"raise {error}"
    condition = rng.choice([f"name in {refused!r}", " or ".join(f'name == "{d}"' for d in refused),
                            f"name not in {tuple(d for d in DIALECTS if d not in refused)!r}"])
    extra = ""
    if kind == "helper":
        extra = f"\n\ndef _check(name):\n    if {condition}:\n        {raised}\n\n"
        check = "_check(name)\n"
    elif kind == "helper module":
        extra = "\nfrom refusing_helper_mp import check as _check\n"
        check = "_check(name)\n"
    else:
        check = f"if {condition}:\n    {raised}\n"
    inspects = "names = sa.inspect(op.get_bind()).get_table_names()\n" if kind == "inspects" else ""
    body = rng.choice(ASK) + inspects + _ops(rng, rng.randint(0, 2)) + check + _ops(rng, rng.randint(1, 3))
    return body, extra


def _key(finding: dict) -> tuple:
    return finding["line"], finding["code"], finding["dialect"], finding["message"]


def test_a_script_refusing_a_dialect_is_judged_on_the_others(tmp_path, run_lint):
    rng = random.Random(SEED)
    (tmp_path / "all").mkdir()
    (tmp_path / "all" / "refusing_helper_mp.py").write_text(
        "def check(name):\n    if name == 'postgresql':\n        raise NotImplementedError('Unsupported engine')\n")
    cases = []
    for case in range(12):
        kind = rng.choice(["upgrade", "upgrade", "helper", "other type", "helper module", "inspects"])
        refused = ("postgresql",) if kind == "helper module" else tuple(
            sorted(rng.sample(DIALECTS, rng.choice([1, 1, 2, 3])), key=DIALECTS.index))
        body, extra = _refusing(rng, refused, kind)
        path = tmp_path / "all" / f"s{case}.py"
        path.write_text(script(body, revision=f"s{case}", extra=extra))
        cases.append((path, kind, refused, body + extra))
    everything = run_lint("--format", "json", "--phase", "expand",
                          *(a for d in DIALECTS for a in ("--dialect", d)), tmp_path / "all").json
    by_file: dict[str, list] = {}
    for finding in everything["findings"]:
        by_file.setdefault(os.path.basename(finding["path"]), []).append(finding)
    for path, kind, refused, source in cases:
        found = by_file.get(path.name, [])
        accepted = [d for d in DIALECTS if d not in refused]
        if kind in ("helper module", "inspects"):  # not the script's own refusal, or not known to be (after an
            # inspection of the empty offline database the error may come from its empty answers): as before, its
            # source is read (MP001 "cannot run offline"), never MP000 nor a refusal
            assert not any("refuses" in f["message"] for f in found), (SEED, kind, source, found)
            assert not any(f["code"] == "MP000" for f in found), (SEED, kind, source, found)
            continue
        if kind == "other type" or not accepted:
            assert [f["code"] for f in found] == ["MP000"], (SEED, kind, refused, source, found)
            continue
        notes = [f for f in found if f["code"] == "MP001"]
        assert sorted(f["dialect"] for f in notes) == sorted(refused), (SEED, refused, source, found)
        assert all("itself" in f["message"] and "not linted for" in f["message"] for f in notes), (SEED, notes)
        alone = run_lint("--format", "json", "--phase", "expand", *(a for d in accepted for a in ("--dialect", d)),
                         path).json["findings"]
        assert not any(f["code"] == "MP000" for f in alone), (SEED, source, alone)
        rest = sorted(_key(f) for f in found if f["code"] != "MP001")
        assert rest == sorted(_key(f) for f in alone), (SEED, refused, source, found, alone)
