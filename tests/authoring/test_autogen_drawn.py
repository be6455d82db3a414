"""Generated code, generated end to end, from model changes drawn from a wide space (not the
corpus's named kinds): a table of drawn columns (type, length, nullability, server default, index,
unique), and a release N+1 model drawn from it by several changes at once (add a column nullable,
NOT NULL with or without a server default; drop; rename; widen or narrow a string, String ->
Text, Integer -> BigInteger; flip nullability; add, change or drop a server default; add or drop
an index or a unique constraint; add a table; drop the table).

``alembic revision --autogenerate``, only the documented hand edits (the value of each NOT NULL
backfill stub; a replaced column mapped under its key), then release N writes before expand,
after expand, and release N+1 writes after expand.  Then, drawn:

* **contract**: the data migrations, the contract.  Every row and value either release wrote is
  there in release N+1's form, or the run refused (a fail-closed stub, the gate naming the data at
  stake) with every value in place; dropping data needs the explicit edit (``drops_data``).
* **rollback**: the *generated downgrade* of expand (plain ``alembic downgrade`` to release N),
  after release N+1 wrote: refused with every value in place, or applied with nothing either
  release wrote lost or changed (a value only release N+1's columns held is lost: that must be a
  refusal).

``MP_AUTOGEN_DRAWN_SEEDS`` (default 3) draws per backend, each printed; ``MP_AUTOGEN_DRAWN_SEED``
replays one.
"""

from __future__ import annotations

import decimal
import random
import re
import threading

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.util import CommandError

from .conftest import CONVENTION, MODELS_HEADER, confirm_guessed_renames, drawn_seeds, let_data_go
from .test_split import lint

SEEDS = drawn_seeds("MP_AUTOGEN_DRAWN")


class Col:
    """One drawn column: *kind* int | big | str | text | bool."""

    def __init__(self, name, kind, length=None, nullable=True, default=None, index=False, unique=False):
        self.name, self.kind, self.length, self.nullable = name, kind, length, nullable
        self.default, self.index, self.unique = default, index, unique
        self.physical = name  # the column's name in the database (``x_new`` once replaced)
        self.keyed = False  # in a composite unique index or constraint: values drawn from the row's key

    def copy(self) -> "Col":
        new = Col(self.name, self.kind, self.length, self.nullable, self.default, self.index, self.unique)
        new.physical, new.keyed = self.physical, self.keyed
        return new

    def type_source(self) -> str:
        return {"int": "sa.Integer()", "big": "sa.BigInteger()", "str": f"sa.String({self.length})",
                "text": "sa.Text()", "bool": "sa.Boolean()"}[self.kind]

    def source(self, key: bool = False) -> str:
        args = [repr(self.physical if key else self.name), self.type_source()]
        if key and self.physical != self.name:
            args.append(f"key={self.name!r}")
        args.append(f"nullable={self.nullable}")
        if self.default is not None:
            args.append(f"server_default={self.default_sql()!r}")
        if self.index:
            args.append("index=True")
        if self.unique:
            args.append("unique=True")
        return f"sa.Column({', '.join(args)})"

    def default_sql(self) -> str:
        return str(self.default) if self.kind != "bool" else ("1" if self.default else "0")

    def draw(self, rng, key: int, width: int | None = None) -> object:
        """A value this column can hold (NULL sometimes when nullable); unique columns get the key."""
        if self.nullable and rng.random() < 0.25:
            return None
        unique = self.unique or self.keyed
        if self.kind in ("int", "big"):
            return key * 1000 + rng.randrange(1000) if unique else rng.randrange(-10**6, 10**6)
        if self.kind == "bool":
            return rng.random() < 0.5
        limit = min([w for w in (width, self.length) if w] or [200])  # fits this column and *width*
        text = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz ") for _ in range(rng.randint(1, limit)))
        text = text.strip() or "x"
        return f"{key}-{text}"[:limit] if unique else text


class Composite:
    """A drawn index or unique constraint over two columns (named explicitly: no convention
    token names a second column); *kind* index | unique_index | unique."""

    def __init__(self, name: str, cols: list[Col], kind: str):
        self.name, self.cols, self.kind = name, cols, kind

    def source(self) -> str:
        names = ", ".join(repr(c.name) for c in self.cols)  # by key: a replaced column keeps its key
        if self.kind == "unique":
            return f"sa.UniqueConstraint({names}, name={self.name!r})"
        return f"sa.Index({self.name!r}, {names}{', unique=True' if self.kind == 'unique_index' else ''})"


class Model:
    def __init__(self, table: str, cols: list[Col], other: str | None = None, gone: bool = False):
        self.table, self.cols, self.other, self.gone = table, cols, other, gone
        self.copied: dict[str, str] = {}
        self.composites: list[Composite] = []

    def source(self, convention: bool, key: bool = False) -> str:
        out = CONVENTION if convention else ""
        if not self.gone:
            cols = ", ".join([c.source(key) for c in self.cols] + [x.source() for x in self.composites])
            out += f'{self.table} = sa.Table({self.table!r}, metadata, sa.Column("id", sa.Integer, primary_key=True), {cols})\n'
        if self.other:
            out += (f'{self.other} = sa.Table({self.other!r}, metadata, sa.Column("id", sa.Integer, primary_key=True), '
                    'sa.Column("note", sa.String(30)))\n')
        return out

    def col(self, name):
        return next((c for c in self.cols if c.name == name), None)


def _draw_v1(rng, table: str) -> Model:
    cols = []
    for i in range(rng.randint(2, 4)):
        kind = rng.choice(["int", "big", "str", "str", "text", "bool"])
        col = Col(f"c{i}", kind, rng.choice([8, 20, 60, 200]) if kind == "str" else None,
                  nullable=rng.random() < 0.6)
        if rng.random() < 0.25:
            col.default = {"int": 7, "big": 9, "str": "dflt", "text": None, "bool": False}[kind]
        col.index = kind != "text" and rng.random() < 0.2
        col.unique = not col.index and kind in ("int", "str") and rng.random() < 0.15
        cols.append(col)
    model = Model(table, cols)
    # a composite index or unique constraint (named), over two columns other than Text
    pair = [c for c in cols if c.kind != "text"]
    if len(pair) >= 2 and rng.random() < 0.4:
        chosen = rng.sample(pair, 2)
        kind = rng.choice(["index", "index", "unique", "unique_index"])
        if kind != "index":
            if all(c.kind == "bool" for c in chosen):
                kind = "index"
            for c in chosen:
                c.keyed = kind != "index"
        model.composites.append(Composite(f"{'ix' if kind == 'index' else 'uq'}c_{table}", chosen, kind))
    return model


CHANGES = ["add_nullable", "add_default", "add_not_null", "drop", "rename", "widen", "narrow", "to_text",
           "to_big", "to_int", "nullable", "not_null", "default_add", "default_change", "default_drop", "index_add",
           "index_drop", "unique_drop", "add_table", "drop_table"]


def _composite_of(v2: Model, col: Col) -> bool:
    return any(col in x.cols for x in v2.composites)


def _draw_v2(rng, v1: Model) -> tuple[Model, list[str]]:
    cols = [c.copy() for c in v1.cols]
    v2 = Model(v1.table, cols)
    same = {id(a): b for a, b in zip(v1.cols, cols)}
    v2.composites = [Composite(x.name, [same[id(c)] for c in x.cols], x.kind) for x in v1.composites]
    done = []
    for _ in range(rng.randint(1, 4)):
        change = rng.choice(CHANGES)
        live = [c for c in v2.cols if c.name.startswith("c")]
        col = rng.choice(live) if live else None
        if change == "to_text" and col and (col.index or col.unique or _composite_of(v2, col)):
            continue  # MariaDB indexes no TEXT column without a prefix length: not a model to draw
        if change.startswith("add_") and change != "add_table":
            name = f"n{len(v2.cols)}"
            kind = rng.choice(["int", "str", "bool"])
            new = Col(name, kind, 30 if kind == "str" else None, nullable=change == "add_nullable")
            if change == "add_default":
                new.default = {"int": 5, "str": "fresh", "bool": True}[kind]
            v2.cols.append(new)
        elif change == "drop" and col and len(live) > 1:
            v2.cols.remove(col)
            v2.composites = [x for x in v2.composites if col not in x.cols]
        elif change == "rename" and col:
            col.name = col.physical = "r" + col.name[1:]
        elif change == "widen" and col and col.kind == "str":
            col.length = col.length * 3
        elif change == "narrow" and col and col.kind == "str" and col.length > 8:
            col.length = col.length // 2
        elif change == "to_text" and col and col.kind == "str":
            col.kind, col.length = "text", None
            col.default = None
        elif change == "to_big" and col and col.kind == "int":
            col.kind = "big"
        elif change == "to_int" and col and col.kind == "big":
            col.kind = "int"
        elif change == "nullable" and col and not col.nullable:
            col.nullable = True
        elif change == "not_null" and col and col.nullable:
            col.nullable = False
        elif change == "default_add" and col and col.default is None and col.kind != "text":
            col.default = {"int": 11, "big": 12, "str": "added", "bool": True}[col.kind]
        elif change == "default_change" and col and col.default is not None and col.kind in ("int", "big", "str"):
            col.default = {"int": 13, "big": 14, "str": "changed"}[col.kind]
        elif change == "default_drop" and col and col.default is not None:
            col.default = None
        elif change == "index_add" and col and not col.index and not col.unique and col.kind != "text":
            col.index = True
        elif change == "index_drop" and col and col.index:
            col.index = False
        elif change == "unique_drop" and col and col.unique:
            col.unique = False
        elif change == "add_table":
            v2.other = "extra"
        elif change == "drop_table":
            v2.gone = True
            return v2, done + [change]
        else:
            continue
        done.append(change if col is None or change.startswith("add") else f"{change}:{col.name}")
    return v2, done


def _fill_value(col: Col):
    return {"int": 42, "big": 43, "str": "filled", "text": "filled", "bool": True}[col.kind]


def _python_default(col: Col):
    if col.default is None:
        return None
    return {"int": int, "big": int, "str": str, "bool": bool}[col.kind](col.default)


def _normal(value):
    if isinstance(value, decimal.Decimal):
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return value


class Writer:
    """One release's writes through its own columns; what each row must hold afterwards."""

    def __init__(self, rng, model: Model, rows: dict, ids: list):
        self.rng, self.model, self.rows, self.ids = rng, model, rows, ids
        #: what a column this release leaves to its server default gets now (expand may change it)
        self.defaults: dict[str, object] = {}

    def table(self):
        return sa.table(self.model.table, sa.column("id", sa.Integer),
                        *[sa.column(c.physical) for c in self.model.cols])

    def write(self, conn, inserts: int, widths: dict) -> None:
        table = self.table()
        for _ in range(inserts):
            key = self.ids[0]
            self.ids[0] += 1
            values = {c.name: c.draw(self.rng, key, widths.get(c.name)) for c in self.model.cols}
            for c in self.model.cols:  # a NOT NULL column without a default: always written
                if values[c.name] is None and not c.nullable:
                    values[c.name] = _fill_value(c)
            omit = [c.name for c in self.model.cols if c.default is not None and not (c.unique or c.keyed)
                    and self.rng.random() < 0.3]
            for name in omit:
                values[name] = self.defaults.get(name, _python_default(self.model.col(name)))
            conn.execute(sa.insert(table).values(id=key, **{self.model.col(n).physical: v
                                                            for n, v in values.items() if n not in omit}))
            self.rows[key] = {"by": self, **values}
        mine = [k for k, v in self.rows.items() if v["by"] is self]
        if mine:
            key = self.rng.choice(mine)
            col = self.rng.choice(self.model.cols)
            if not col.unique:
                value = col.draw(self.rng, key, widths.get(col.name))
                if value is None and not col.nullable:
                    value = _fill_value(col)
                conn.execute(sa.update(table).where(table.c.id == key).values({col.physical: value}))
                self.rows[key][col.name] = value


def _read(engine, table: str, names: dict) -> dict:
    """{id: {logical name: value}} of *table*, the columns by their physical names."""
    with engine.connect() as conn:
        present = {c["name"] for c in sa.inspect(conn).get_columns(table)}
        cols = {k: p for k, p in names.items() if p in present}
        t = sa.table(table, sa.column("id"), *[sa.column(p) for p in cols.values()])
        out = {}
        for row in conn.execute(sa.select(t)).mappings():
            out[row["id"]] = {k: _normal(row[p]) for k, p in cols.items()}
        return out


def _same(expected, found) -> bool:
    if isinstance(expected, bool) and not isinstance(found, bool) and found is not None:
        return bool(found) == expected
    return expected == found


def _fill_not_null_stubs(files: dict, v2: Model) -> list[str]:
    """The documented edit: the value for the NULL rows of each column that becomes NOT NULL."""
    if "data" not in files:
        return []
    text = files["data"].read_text()
    filled = []
    for match in re.finditer(r"(FILL_IN_(\w+?)_NOT_NULL) = FILL_IN\([^\n]*\)", text):
        column = match.group(2).lower().split(f"{v2.table}_", 1)[-1]
        col = next((c for c in v2.cols if c.physical == column or c.name == column), None)
        assert col is not None, (match.group(0), [c.name for c in v2.cols])
        text = text.replace(match.group(0), f"{match.group(1)} = {_fill_value(col)!r}")
        filled.append(col.name)
    files["data"].write_text(text)
    return filled


def _index_diffs(engine, source: str, table: str) -> list:
    """What alembic's comparison finds between *table*'s indexes and unique constraints in the
    database and in the models *source* (empty: every index and constraint of the model is there,
    on the columns it names, and nothing else)."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    namespace: dict = {}
    exec(MODELS_HEADER + source, namespace)
    with engine.connect() as conn:
        diffs = compare_metadata(MigrationContext.configure(conn), namespace["metadata"])
    out = []
    for diff in diffs:
        if isinstance(diff, tuple) and diff[0] in ("add_index", "remove_index", "add_constraint", "remove_constraint"):
            if getattr(diff[1], "table", None) is not None and diff[1].table.name == table:
                out.append((diff[0], diff[1].name, [c.name for c in diff[1].columns]))
    return out


@pytest.mark.parametrize("seed", SEEDS)
def test_drawn_model_changes_lose_nothing_by_default(workspace, backend, seed):
    print(f"seed {seed} (MP_AUTOGEN_DRAWN_SEED={seed} replays it)")
    try:
        _drawn(workspace, seed)
    except (AssertionError, pytest.fail.Exception) as exc:
        raise AssertionError(f"{backend} seed {seed} (MP_AUTOGEN_DRAWN_SEED={seed} replays it): {exc}") from exc
    except Exception as exc:
        raise AssertionError(f"{backend} seed {seed} (MP_AUTOGEN_DRAWN_SEED={seed} replays it): "
                             f"{type(exc).__name__}: {exc}") from exc


def _drawn(workspace, seed) -> None:
    rng = random.Random(seed)
    table = "t_" + "".join(rng.choice("abcdefgh") for _ in range(5))
    v1 = _draw_v1(rng, table)
    v2, changes = _draw_v2(rng, v1)
    if not changes:
        changes = ["add_nullable"]
        v2.cols.append(Col("n9", "int", nullable=True))
    convention = rng.random() < 0.5
    route = rng.choice(["contract", "rollback"])
    print("v1:", v1.source(False), "changes:", changes, "v2:", v2.source(False), "convention:", convention, "route:", route)

    workspace.upgrade()
    workspace.models(v1.source(convention))
    base = workspace.revision("release n")
    workspace.upgrade()
    release_n_expand = re.search(r"^revision = ['\"](\w+)['\"]", base["expand"].read_text(), re.M).group(1)
    engine = sa.create_engine(workspace.url)
    rows: dict[int, dict] = {}
    ids = [1]
    n = Writer(random.Random(rng.random()), v1, rows, ids)
    narrow = {c.name: c.length for c in v2.cols if c.kind == "str" and v1.col(c.name) is not None
              and (v1.col(c.name).kind == "str" and c.length < v1.col(c.name).length)}
    with engine.begin() as conn:
        n.write(conn, rng.randint(3, 10), narrow)

    workspace.models(v2.source(convention))
    try:
        files = workspace.revision("release n plus 1")
    except CommandError as exc:  # a refusal at generation: one paragraph, nothing written
        print("refused at generation:", exc)
        assert "Traceback" not in str(exc)
        return
    for kind, path in sorted(files.items()):
        print(f"----- generated {kind}:\n{path.read_text()}")
    if "expand" in files and "GuessedRename(" in files["expand"].read_text():
        # a GUESSED rename refuses to run, nothing applied, until confirmed (the documented edit)
        with pytest.raises(CommandError, match="GUESSED rename"):
            workspace.upgrade("expand@head")
        assert confirm_guessed_renames(files["expand"]) >= 1
    for kind in ("expand", "contract"):  # generated code lints clean on every dialect
        if kind in files:
            assert lint(files[kind], kind) == [], (f"the generated {kind} script does not lint clean",
                                                   lint(files[kind], kind))
    filled = _fill_not_null_stubs(files, v2)
    expand_text = files.get("expand").read_text() if "expand" in files else ""
    for col in v2.cols:  # the documented edit: a replaced column is mapped under its key
        if re.search(rf"['\"]{col.name}_new['\"]", expand_text):
            col.physical = f"{col.name}_new"
    # what the generated sync triggers carry: {new column: the old one} (a rename, guessed or not)
    v2.copied = {new: old for old, new in re.findall(r"create_sync_trigger\('\w+', old='(\w+)', new='(\w+)'[,)]",
                                                     expand_text) if not new.endswith("_new")}
    workspace.models(v2.source(convention, key=True))

    workspace.upgrade("expand@head")  # release N goes on writing; release N+1 starts
    # a default set or changed in expand serves release N's inserts from now on (one dropped: contract)
    n.defaults = {c.name: _python_default(c) for c in v2.cols if c.default is not None and v1.col(c.name) is not None}
    n1 = Writer(random.Random(rng.random()), v2, rows, ids)
    with engine.begin() as conn:
        n.write(conn, rng.randint(1, 4), narrow)
    if not v2.gone:
        # a column replaced by a copy: the old column holds release N+1's values too, until contract
        window = {c.name: v1.col(c.name).length for c in v2.cols if c.physical != c.name
                  and v1.col(c.name) is not None and v1.col(c.name).kind == "str"}
        with engine.begin() as conn:
            n1.write(conn, rng.randint(1, 4), window)
    with engine.begin() as conn:
        n.write(conn, 1, narrow)
    names_n = {c.name: c.physical for c in v1.cols}
    before = _read(engine, table, names_n)

    if route == "rollback":
        if _rollback(workspace, engine, v1, v2, rows, n, n1, before, release_n_expand):
            diffs = _index_diffs(engine, v1.source(convention), table)
            assert not diffs, f"after the generated downgrade, indexes differ from release N's models: {diffs}"
    else:
        if _contract(workspace, engine, v1, v2, rows, n, n1, files, filled, before, narrow) and not v2.gone:
            diffs = _index_diffs(engine, v2.source(convention, key=True), table)
            assert not diffs, f"after contract, indexes and unique constraints differ from the models: {diffs}"
    engine.dispose()


def _rollback(workspace, engine, v1, v2, rows, n, n1, before, target) -> None:
    """The generated downgrade of expand, after release N+1 wrote."""
    names_n1 = {c.name: c.physical for c in v2.cols}
    n1_before = _read(engine, v2.table, names_n1) if not v2.gone else {}
    try:
        command.downgrade(workspace.config, target)
    except Exception as exc:
        print("downgrade refused:", type(exc).__name__, exc)
        assert _read(engine, v1.table, {c.name: c.physical for c in v1.cols}) == before, \
            "a refused downgrade changed release N's values"
        if not v2.gone:
            assert _read(engine, v2.table, names_n1) == n1_before, "a refused downgrade changed release N+1's values"
        return False
    after = _read(engine, v1.table, {c.name: c.name for c in v1.cols})
    assert set(after) == set(before), f"rows lost by the generated downgrade: {sorted(set(before) - set(after))}"
    for key, values in before.items():
        for name, value in values.items():
            assert _same(value, after[key][name]), (key, name, value, after[key][name])
    # What release N+1 wrote in columns release N does not have is gone now: each such value
    # must have been derivable (a rename's or a replaced column's copy), never dropped silently.
    v1_names = {c.name for c in v1.cols}
    for key, values in n1_before.items():
        for name, value in values.items():
            if name in v1_names or value is None:
                continue
            renamed_from = v2.copied.get(name)
            if renamed_from in v1_names:
                assert _same(value, after[key][renamed_from]), ("renamed value lost", key, name, value)
                continue
            new = v2.col(name)
            if new is not None and new.default is not None and _same(_python_default(new), value):
                continue  # the column's default, not something release N+1 wrote
            pytest.fail(f"the generated downgrade dropped {v2.table}.{name} = {value!r} (row {key}), "
                        "which release N+1 wrote, without a refusal")
    return True


def _run_while_release_n_writes(workspace, engine, n: Writer, widths: dict) -> int:
    """The data migrations run while release N goes on writing (an insert and an update of one of
    its rows a round, each committed); then release N stops (contract waits for that) and they run
    once more.  No write of release N may fail.  The last run's exit code."""
    stop, failed = threading.Event(), []

    def release_n() -> None:
        while not stop.is_set():
            try:
                with engine.begin() as conn:
                    n.write(conn, 1, widths)
            except Exception as exc:  # noqa: BLE001  (reported below, in the test's thread)
                failed.append(f"{type(exc).__name__}: {exc}")
                return
            stop.wait(0.02)

    thread = threading.Thread(target=release_n, daemon=True)
    thread.start()
    try:
        workspace.run_data_migrations()
    finally:
        stop.set()
        thread.join(120)
    assert not failed, f"release N's write failed while the data migrations ran: {failed[0]}"
    return workspace.run_data_migrations()


def _release_n_kept(engine, v1, v2, rows, n, before, filled) -> None:
    """Release N's values after the data migrations ran and contract was refused: what release N
    wrote last (*rows*; the others as read *before*), but for a NULL of a column copied into one
    that a backfill fills (rename or type change): the backfill's value reaches it through the sync
    trigger (the pair is one logical column)."""
    after = _read(engine, v1.table, {c.name: c.physical for c in v1.cols})
    assert set(after) == set(rows), f"rows lost: {sorted(set(rows) - set(after))}"
    backfilled = {}
    for col in v2.cols:
        source = v2.copied.get(col.name) or (col.name if col.physical.endswith("_new") else None)
        if col.name in filled and source:
            backfilled[source] = _fill_value(col)
    for key, found_values in after.items():
        for name, found in found_values.items():
            value = rows[key][name] if rows[key]["by"] is n else before[key][name]
            if value is None and name in backfilled and _same(backfilled[name], found):
                continue
            assert _same(value, found), ("release N's value changed", key, name, value, found)


def _contract(workspace, engine, v1, v2, rows, n, n1, files, filled, before, narrow) -> None:
    from migrations_policy.core.errors import ConfigError

    if "data" in files:
        workspace.use_data_migrations(files["data"])
    data_text = files["data"].read_text() if "data" in files else ""
    moved = re.findall(r"@data_migration\('(\w+_moved)'", data_text)
    if moved:  # drops of data: the stubs fail closed until the author decides
        with pytest.raises(ConfigError):
            workspace.run_data_migrations()
        with pytest.raises(Exception):
            workspace.upgrade("heads")
        assert _read(engine, v1.table, {c.name: c.physical for c in v1.cols}) == before
        let_data_go(files)
        refused = None
        try:
            workspace.upgrade("heads")
        except Exception as exc:
            refused = str(exc)
        assert refused and "which holds data" in refused, ("contract dropped data without drops_data", refused)
        at_stake = re.findall(r"drops ([\w.]+), which holds data", refused)
        text = files["contract"].read_text()
        decided = ", ".join(f"{w!r}: 'release N+1 does not need it'" for w in at_stake)
        files["contract"].write_text(text.replace("# drops_data = {}", f"drops_data = {{{decided}}}"))
    elif "data" in files:
        code = _run_while_release_n_writes(workspace, engine, n, narrow)
        if code != 0:  # a narrowed value too long for the new width: stuck, reported
            with pytest.raises(Exception):
                workspace.upgrade("heads")
            _release_n_kept(engine, v1, v2, rows, n, before, filled)
            return False
    if "data" in files and moved:
        code = _run_while_release_n_writes(workspace, engine, n, narrow)
        if code != 0:
            with pytest.raises(Exception):
                workspace.upgrade("heads")
            _release_n_kept(engine, v1, v2, rows, n, before, filled)
            return False
    workspace.upgrade("heads")
    if v2.gone:
        return True  # dropped with the recorded decision
    after = _read(engine, v2.table, {c.name: c.physical for c in v2.cols})
    assert set(after) == set(rows), f"rows lost: {sorted(set(rows) - set(after))}"
    for key, values in rows.items():
        for col in v2.cols:
            source = col.name
            if source not in values and col.name in v2.copied:
                source = v2.copied[col.name]
            if source in values:
                expected = values[source]
            else:  # a column release N+1 added: its default, its backfill, or NULL
                expected = _python_default(col)
            paired = v1.col(v2.copied.get(col.name, col.name)) if col.physical != col.name or col.name in v2.copied \
                else None
            if expected is None and values["by"] is n1 and paired is not None and paired.default is not None:
                # documented: an explicit NULL release N+1 inserts into a pair's new column, while the old
                # column takes its server default, cannot be told from release N's insert: the default wins
                expected = n.defaults.get(paired.name, _python_default(paired))
            if expected is None and col.name in filled:
                expected = _fill_value(col)
            assert _same(expected, after[key][col.name]), (key, col.name, expected, after[key][col.name])
    return True
