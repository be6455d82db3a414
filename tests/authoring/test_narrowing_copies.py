"""A copy into a column that cannot hold every value of the old one fails closed, whatever made
the pair: a type change (``String(3w)`` -> ``String(w)``, ``BigInteger`` -> ``Integer``) or a
GUESSED rename (a dropped ``Text`` / ``String(3w)`` / ``BigInteger`` column and an added
``String(w)`` / ``Integer`` one).

Release N goes on writing the old column after expand, drawn values at, under and over the new
width (or the new type's bounds): none of its writes may fail; a value that fits reaches the new
column exactly; one that does not leaves it NULL, the data migration reports the row as stuck
(``EXIT_FAILED``), the gate refuses contract, and nothing release N wrote changes.  Once release N shortens
those values, the data migration completes and contract runs with every value in the new column.

``MP_NARROWING_COPY_SEEDS`` (default 3) draws per backend; ``MP_NARROWING_COPY_SEED`` replays one.
"""

from __future__ import annotations

import random
import re

import pytest
import sqlalchemy as sa

from migrations_policy.data.walk.report import EXIT_FAILED

from .conftest import confirm_guessed_renames, drawn_seeds

SEEDS = drawn_seeds("MP_NARROWING_COPY")
CASES = ["guessed_text", "guessed_str", "type_str", "type_int", "guessed_int"]
BOUND = 2 ** 31


def _models(case: str, width: int) -> tuple[str, str, str, str]:
    """(release N's models, release N+1's, the old column, the new column in the database)."""
    old_type = {"guessed_text": "sa.Text()", "guessed_str": f"sa.String({3 * width})",
                "type_str": f"sa.String({3 * width})", "type_int": "sa.BigInteger()",
                "guessed_int": "sa.BigInteger()"}[case]
    new_type = "sa.Integer()" if case.endswith("_int") else f"sa.String({width})"
    new = "dst" if case.startswith("guessed") else "src"
    table = 'nar = sa.Table("nar", metadata, sa.Column("id", sa.Integer, primary_key=True), {}, sa.Column("other", sa.Integer))\n'
    return (table.format(f'sa.Column("src", {old_type})'), table.format(f'sa.Column("{new}", {new_type})'),
            "src", "dst" if new == "dst" else "src_new")


def _draw(rng, case: str, width: int):
    if rng.random() < 0.15:
        return None
    if case.endswith("_int"):
        return rng.choice([BOUND - 1, BOUND, -BOUND, -BOUND - 1, rng.randrange(-2 ** 40, 2 ** 40),
                           rng.randrange(-1000, 1000)])
    limit = 3 * width
    length = rng.choice([width - 1, width, width + 1, rng.randint(1, limit)])
    return "".join(rng.choice("abcdefghij") for _ in range(max(1, min(length, limit))))


def _fits(case: str, width: int, value) -> bool:
    if value is None:
        return True
    if case.endswith("_int"):
        return -BOUND <= value < BOUND
    return len(value) <= width


def _shortened(case: str, width: int, value):
    if case.endswith("_int"):
        return max(-BOUND, min(BOUND - 1, value))
    return value[:width]


def _read(engine, columns: list[str]) -> dict:
    t = sa.table("nar", sa.column("id"), *[sa.column(c) for c in columns])
    with engine.connect() as conn:
        return {row[0]: tuple(row[1:]) for row in conn.execute(sa.select(t).order_by(t.c.id))}


@pytest.mark.parametrize("seed", SEEDS)
def test_a_copy_into_a_narrower_column_never_fails_release_n_nor_cuts_a_value(workspace, backend, seed):
    print(f"seed {seed} (MP_NARROWING_COPY_SEED={seed} replays it)")
    try:
        _attack(workspace, seed)
    except (AssertionError, pytest.fail.Exception) as exc:
        raise AssertionError(f"{backend} seed {seed} (MP_NARROWING_COPY_SEED={seed} replays it): {exc}") from exc
    except Exception as exc:
        raise AssertionError(f"{backend} seed {seed} (MP_NARROWING_COPY_SEED={seed} replays it): "
                             f"{type(exc).__name__}: {exc}") from exc


def _attack(workspace, seed) -> None:
    rng = random.Random(seed)
    case, width = rng.choice(CASES), rng.randint(4, 30)
    v1, v2, old, new = _models(case, width)
    print("case:", case, "width:", width)
    workspace.upgrade()
    workspace.models(v1)
    workspace.revision("release n")
    workspace.upgrade()
    engine = sa.create_engine(workspace.url)
    t = sa.table("nar", sa.column("id"), sa.column("src"), sa.column("other"))
    written: dict[int, object] = {}

    def release_n_writes(count: int) -> None:
        with engine.begin() as conn:
            for _ in range(count):
                key = len(written) + 1
                written[key] = _draw(rng, case, width)
                conn.execute(sa.insert(t).values(id=key, src=written[key], other=key))
            for key in rng.sample(sorted(written), min(2, len(written))):
                written[key] = _draw(rng, case, width)
                conn.execute(sa.update(t).where(t.c.id == key).values(src=written[key]))

    release_n_writes(rng.randint(3, 8))
    workspace.models(v2)
    files = workspace.revision("release n plus 1")
    expand, data = files["expand"].read_text(), files["data"].read_text()
    print(expand, data, sep="\n-----\n")
    if case.startswith("guessed"):  # the documented edit: the guess is right (it refuses to run until then)
        assert confirm_guessed_renames(files["expand"]) == 1
    workspace.upgrade("expand@head")
    release_n_writes(rng.randint(4, 10))  # release N's writes after expand: none may fail
    workspace.use_data_migrations(files["data"])
    code = workspace.run_data_migrations()

    over = {k for k, v in written.items() if not _fits(case, width, v)}
    print("rows over the new width or range:", sorted(over))
    found = _read(engine, [old, new])
    for key, value in written.items():
        assert found[key][0] == value, f"release N's value of row {key} changed: {value!r} -> {found[key][0]!r}"
        expected = None if key in over else value
        assert found[key][1] == expected, (f"row {key}: {value!r} copied as {found[key][1]!r}, expected "
                                           f"{expected!r} (new width or type: {case} {width})")
    if over:
        assert code == EXIT_FAILED, f"rows that do not fit ({sorted(over)}) are not reported as stuck: exit {code}"
        with pytest.raises(Exception, match="not complete|pending|refus"):
            workspace.upgrade("heads")
        assert _read(engine, [old])  == {k: (v,) for k, v in written.items()}, "a refused contract changed data"
        with engine.begin() as conn:  # release N's operators shorten the values reported
            for key in sorted(over):
                written[key] = _shortened(case, width, written[key])
                conn.execute(sa.update(t).where(t.c.id == key).values(src=written[key]))
        code = workspace.run_data_migrations()
    assert code == 0, f"the data migration does not complete once every value fits: exit {code}"
    workspace.upgrade("heads")
    final = _read(engine, [new])
    assert final == {k: (v,) for k, v in written.items()}, "contract lost or changed a value"
    assert re.search(r"NARROWING|CONVERSION", expand), "the expand script does not say that values may not fit"
    engine.dispose()
