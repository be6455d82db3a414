"""The generic workload: one release's code reading and writing through its mapped classes.

Each thread repeats, until stopped or out of budget, one operation in its own
short transaction (a long one would hold locks the DDL under test must get):

* ``insert``: a row with generated values for every column it can fill
  (foreign keys, declared by either release's models, take keys this workload
  knows), re-read in its transaction and compared with what the ORM wrote;
* ``update``: a known row gets a new value in a non-key column, re-read;
* ``list``: the first rows of the table, loading every mapped column;
* ``custom``: the project's own ``workload(session, models, rng)`` function,
  when given (it may return the operation's name for the counts).

Every exception is recorded with its one-line text (passwords masked); nothing
stops the workload but ``stop()`` or its operation budget.  Transient errors
(deadlocks, serialization failures, lock waits) are retried up to ``RETRIES``
times, as an application with oslo.db-style retries does, and counted apart;
with ``retry_transient=False`` they are errors like any other.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

import sqlalchemy as sa
from sqlalchemy.orm import Session

from migrations_policy.core.urls import mask_text
from migrations_policy.core.project import _one_line
from migrations_policy.rehearsal.models import Models
from migrations_policy.rehearsal.values import SKIP, generate, same

#: ``fn(session, models, rng) -> operation name | None``: a project's own operation.
WorkloadFunction = Callable[[Session, Models, random.Random], "str | None"]

#: Known keys kept per class (oldest dropped first).
_KNOWN_KEYS = 5000


#: Transient errors an application retries (oslo.db's ``wrap_db_retry``): deadlocks (a DDL's metadata
#: lock in the middle of a read-then-write transaction, on MariaDB), serialization failures, lock waits.
_PG_TRANSIENT = {"40P01": "deadlock", "40001": "serialization failure", "55P03": "lock timeout"}
_MYSQL_TRANSIENT = {1213: "deadlock", 1205: "lock wait timeout"}
RETRIES = 3


def transient_kind(exc: BaseException) -> str | None:
    """``deadlock`` / ``lock wait timeout`` / ... when *exc* is worth retrying, else None."""
    orig = getattr(exc, "orig", None)
    if orig is None:
        return None
    if getattr(orig, "sqlstate", None) in _PG_TRANSIENT:
        return _PG_TRANSIENT[orig.sqlstate]
    args = getattr(orig, "args", ())
    if args and args[0] in _MYSQL_TRANSIENT:
        return _MYSQL_TRANSIENT[args[0]]
    if "database is locked" in str(orig):
        return "database is locked"
    return None


class ReadBackMismatch(Exception):
    """A value read back differs from the value written."""


@dataclass
class Observed:
    """Operation counts and distinct errors per (code, operation), shared by threads."""

    operations: Counter = field(default_factory=Counter)
    errors: Counter = field(default_factory=Counter)  # (code, operation, table, text) -> count
    retries: Counter = field(default_factory=Counter)  # (code, operation, table, kind) -> count
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def count(self, code: str, operation: str) -> None:
        with self._lock:
            self.operations[(code, operation)] += 1

    def retry(self, code: str, operation: str, table: str, exc: BaseException) -> None:
        with self._lock:
            self.retries[(code, operation, table, transient_kind(exc))] += 1

    def error(self, code: str, operation: str, table: str, exc: BaseException) -> None:
        text = str(exc) if isinstance(exc, ReadBackMismatch) else _one_line(exc)
        with self._lock:
            self.errors[(code, operation, table, mask_text(text))] += 1


@dataclass
class _Plan:
    """How the workload fills one mapped class."""

    cls: type
    table: str
    columns: list  # (attribute key, Column, unique) filled with generated values
    pinned: dict  # attribute key -> the value it always gets
    foreign: list  # (attribute key, Column, target class)
    updatable: list  # (attribute key, Column)
    insertable: bool = True


def _unique_columns(table: sa.Table) -> set:
    found = set(table.primary_key.columns)
    found.update(c for c in table.columns if c.unique)
    for constraint in table.constraints:
        if isinstance(constraint, sa.UniqueConstraint) and len(constraint.columns) == 1:
            found.update(constraint.columns)
    for index in table.indexes:
        if index.unique and len(index.columns) == 1:
            found.update(index.columns)
    return found


def foreign_keys_of(*tables_lists: list) -> dict[tuple[str, str], str]:
    """(table, column) -> referenced table, for single-column foreign keys to a primary key."""
    found = {}
    for tables in tables_lists:
        for table in tables:
            for fk in table.foreign_keys:
                if len(fk.constraint.columns) == 1 and fk.column.primary_key:
                    found[(table.name, fk.parent.name)] = fk.column.table.name
    return found


def _plan(cls: type, by_table: dict, values: dict, notes: set, code: str, references: dict) -> _Plan:
    mapper = sa.inspect(cls)
    table = mapper.local_table
    unique = _unique_columns(table)
    plan = _Plan(cls, table.name, [], {}, [], [])
    for prop in mapper.column_attrs:
        column = prop.columns[0]
        if not isinstance(column, sa.Column) or column.table is not table or column.computed is not None:
            continue
        if f"{table.name}.{column.name}" in values:
            plan.pinned[prop.key] = values[f"{table.name}.{column.name}"]
            continue
        if column is table.autoincrement_column:
            continue
        if (table.name, column.name) in references or column.foreign_keys:
            target = by_table.get(references.get((table.name, column.name)))
            if target is not None:
                plan.foreign.append((prop.key, column, target))
            elif not column.nullable:
                plan.insertable = False
                notes.add(f"{code}: {table.name}.{column.name}: foreign key the workload cannot fill; "
                                   "no inserts")
            continue
        if generate(column, random.Random(0), column in unique) is SKIP:
            if not column.nullable and column.server_default is None and column.default is None:
                plan.insertable = False
                notes.add(f"{code}: {table.name}.{column.name}: no generator for {column.type}; "
                                   "no inserts (give a workload function)")
            continue
        plan.columns.append((prop.key, column, column in unique))
        if not column.primary_key and column not in unique:
            plan.updatable.append((prop.key, column))
    return plan


def _read_back(session: Session, plan: _Plan, obj: Any, keys: list[str]) -> None:
    """Re-read the row just written, in the same transaction (our row lock keeps others out), and
    compare: what the database kept must be what the ORM sent."""
    written = {key: getattr(obj, key) for key in keys}
    session.expire(obj)
    for key, value in written.items():
        found = getattr(obj, key)
        if value is not None and not same(value, found):
            raise ReadBackMismatch(f"{plan.table}.{key}: wrote {value!r}, read back {found!r}")


class Workload:
    """*threads* threads running *models*' operations against *engine* until ``stop()``."""

    def __init__(self, engine: sa.Engine, models: Models, observed: Observed, *, threads: int = 4,
                 max_operations: int = 100_000, seed: int = 0, function: WorkloadFunction | None = None,
                 values: dict | None = None, references: dict | None = None, retry_transient: bool = True,
                 pause: float = 0.001):
        self.engine, self.models, self.observed = engine, models, observed
        self.code = models.label
        self.threads, self.seed, self.function, self.pause = threads, seed, function, pause
        self.retry_transient = retry_transient
        self._budget = max_operations
        self._budget_lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        by_table = {sa.inspect(cls).local_table.name: cls for cls in models.classes.values()}
        self.notes: set[str] = set()
        references = references if references is not None else foreign_keys_of(models.tables)
        self.plans = [_plan(cls, by_table, values or {}, self.notes, self.code, references)
                      for cls in models.classes.values()]
        self.known: dict[type, list] = {p.cls: [] for p in self.plans}

    # -- control ------------------------------------------------------------------
    def load_known_keys(self) -> None:
        """Learn up to a few thousand existing primary keys per class (rows other code wrote)."""
        for plan in self.plans:
            mapper = sa.inspect(plan.cls)
            try:
                with Session(self.engine) as session:
                    rows = session.execute(sa.select(*mapper.primary_key).limit(_KNOWN_KEYS)).all()
            except Exception as exc:
                self.observed.error(self.code, "load keys", plan.table, exc)
                continue
            self.known[plan.cls] = [tuple(r) for r in rows]

    def seed_rows(self, rows_per_class: int) -> None:
        """Insert rows one class after another (referenced tables first), in this thread."""
        rng = random.Random(self.seed)
        for plan in self._dependency_order():
            for _ in range(rows_per_class if plan.insertable else 0):
                self._attempt("insert", plan, rng, self._insert)

    def start(self) -> None:
        self._stop.clear()
        self._threads = [threading.Thread(target=self._loop, args=(i,), name=f"rehearsal-{self.code}-{i}",
                                          daemon=True) for i in range(self.threads)]
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()
        self._threads = []

    # -- the operations ---------------------------------------------------------------
    def _dependency_order(self) -> list[_Plan]:
        done: list[_Plan] = []
        remaining = list(self.plans)
        while remaining:
            ready = [p for p in remaining
                     if all(target in {d.cls for d in done} or target is p.cls for _, _, target in p.foreign)]
            ready = ready or remaining[:1]  # a cycle: go on anyway
            for plan in ready:
                remaining.remove(plan)
            done.extend(ready)
        return done

    def _take(self) -> bool:
        with self._budget_lock:
            if self._budget <= 0:
                return False
            self._budget -= 1
            return True

    def _loop(self, index: int) -> None:
        rng = random.Random(self.seed * 1000 + index + 1)
        operations = [("insert", self._insert), ("update", self._update), ("list", self._list)]
        while not self._stop.is_set() and self._take():
            plan = rng.choice(self.plans)
            if self.function is not None and rng.random() < 0.5:
                self._attempt("custom", plan, rng, self._custom)
            else:
                name, operation = rng.choice(operations)
                self._attempt(name, plan, rng, operation)
            if self.pause:
                time.sleep(self.pause)

    def _attempt(self, name: str, plan: _Plan, rng: random.Random, operation: Callable) -> None:
        for attempt in range(RETRIES + 1):
            try:
                done = operation(plan, rng)
                break
            except Exception as exc:
                if self.retry_transient and attempt < RETRIES and transient_kind(exc):
                    self.observed.retry(self.code, name, plan.table, exc)
                    time.sleep(0.02 * (attempt + 1))
                    continue
                self.observed.error(self.code, name, plan.table, exc)
                time.sleep(0.01)
                return
        if done:
            self.observed.count(self.code, done if isinstance(done, str) else name)

    def _remember(self, plan: _Plan, key: tuple) -> None:
        keys = self.known[plan.cls]
        keys.append(key)
        if len(keys) > _KNOWN_KEYS:
            del keys[: len(keys) - _KNOWN_KEYS]

    def _insert(self, plan: _Plan, rng: random.Random) -> bool:
        if not plan.insertable:
            return False
        obj = plan.cls()
        for key, column, unique in plan.columns:
            setattr(obj, key, generate(column, rng, unique))
        for key, value in plan.pinned.items():
            setattr(obj, key, value)
        for key, column, target in plan.foreign:
            keys = self.known.get(target) or []
            if keys:
                setattr(obj, key, rng.choice(keys)[0])
            elif not column.nullable:
                return False
        with Session(self.engine) as session:
            session.add(obj)
            session.flush()
            _read_back(session, plan, obj, [*(c[0] for c in plan.columns), *plan.pinned])
            primary_key = tuple(sa.inspect(plan.cls).primary_key_from_instance(obj))
            session.commit()
        self._remember(plan, primary_key)
        return True

    def _update(self, plan: _Plan, rng: random.Random) -> bool:
        keys = self.known.get(plan.cls)
        if not keys or not plan.updatable:
            return False
        primary_key = rng.choice(keys)
        key, column = rng.choice(plan.updatable)
        with Session(self.engine) as session:
            obj = session.get(plan.cls, primary_key)
            if obj is None:
                raise ReadBackMismatch(f"{plan.table} row {primary_key!r} is gone")
            loaded = getattr(obj, key)
            setattr(obj, key, generate(column, rng))
            session.flush()
            # The application's own hooks may set the column back to what was loaded: then the
            # flush did not write it (the ORM sends net changes only), and what another writer
            # committed since the load is no mismatch of ours (release 2 of the example does this).
            _read_back(session, plan, obj, [] if same(getattr(obj, key), loaded) else [key])
            session.commit()
        return True

    def _list(self, plan: _Plan, rng: random.Random) -> bool:
        with Session(self.engine) as session:
            rows = session.scalars(sa.select(plan.cls).limit(20)).all()
            for row in rows:
                for prop in sa.inspect(plan.cls).column_attrs:
                    getattr(row, prop.key)
        return True

    def _custom(self, plan: _Plan, rng: random.Random) -> Any:
        with Session(self.engine) as session:
            name = self.function(session, self.models, rng)
            session.commit()
        return name or True
