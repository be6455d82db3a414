"""Record what a revision's ``upgrade()`` does, without a database.

``record(upgrade, dialect, filename)`` runs ``upgrade`` against an offline alembic
``MigrationContext`` (``as_sql=True``) whose ``Operations`` and batch operations
*record* each op object instead of compiling it, so no SQL is emitted unless a
verdict needs it.  What the script sends through ``op.get_bind().execute(...)``
is captured from the offline mock connection.  Each recorded operation carries
the line of the innermost frame in the script (helpers and loops included).

``record_online(upgrade, connection, filename)`` does the same against a real
connection (``lint --url``): every op is recorded *and* executed, so scripts that
reflect the live schema work; the caller rolls the transaction back.

Custom operations (``Operations.register_operation``) run the implementation the
project registered (``Operations.implementation_for``), whose own ops are recorded at
the script's line; an op that is not registered (``op.my_op(...)`` whose module the
linter did not import, see ``lint.offline.plugins``) or has no implementation is noted in
``Recording.unknown`` (``MP005``) and answers with a harmless value, so the rest of
``upgrade()`` is still recorded.

``run_online(upgrade, ctx, filename)`` is its core for a caller that owns the
``MigrationContext`` and its transaction (``lint --replay``): it returns what was
recorded up to an error together with the error.
"""

from __future__ import annotations

import io
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from alembic.migration import MigrationContext
from alembic.operations import BatchOperations, Operations
from alembic.operations import ops as aops

from migrations_policy.policy.alembic_ops import from_statement
from migrations_policy.policy.sql import reading_for
from migrations_policy.lint.offline.recording import Recording  # noqa: F401 - re-exported
from migrations_policy.lint.offline.fakes import OFFLINE_RESULT, Harmless, OfflineBind, OfflineResultError, call_upgrade  # noqa: F401 - re-exported


class _BatchTarget:
    """Stands in for alembic's BatchOperationsImpl: batch ops only read the table name."""

    def __init__(self, table_name: str, schema: str | None):
        self.table_name, self.schema = table_name, schema


def _recording_operations(ctx: MigrationContext, rec: Recording, execute: bool) -> Operations:
    ops = Operations(ctx)
    real_invoke = ops.invoke
    real_batch = ops.batch_alter_table

    def invoke(operation):
        if type(operation).__module__.split(".")[0] not in _KNOWN_PACKAGES:
            return _invoke_custom(ops, ctx, rec, operation, real_invoke if execute else None)
        rec.add_alembic(operation)
        if execute:
            with rec.running_alembic():
                return real_invoke(operation)
        if isinstance(operation, aops.CreateTableOp):
            return operation.to_table(ctx)
        return None

    @contextmanager
    def batch_alter_table(table_name, schema=None, recreate="auto", **kw):
        line = rec.line()
        with rec.batch(table_name, recreate, line):
            if execute:
                with rec.running_alembic(), real_batch(table_name, schema=schema, recreate=recreate, **kw) as batch_op:
                    batch_invoke = batch_op.invoke
                    batch_op.invoke = lambda o: (rec.add_alembic(o), batch_invoke(o))[1]
                    yield batch_op
            else:
                batch_op = BatchOperations(ctx, impl=_BatchTarget(table_name, schema))
                batch_op.invoke = lambda o: rec.add_alembic(o)
                yield batch_op

    ops.invoke = invoke
    ops.batch_alter_table = batch_alter_table
    for name in ("get_bind", "get_context"):
        ops.__dict__[name] = _asking(rec, getattr(ops, name))
    real_autocommit = ctx.autocommit_block

    @contextmanager
    def autocommit_block():
        with rec.autocommit_block():
            if execute:
                with real_autocommit():
                    yield
            else:
                yield

    ctx.autocommit_block = autocommit_block
    return ops


#: Operations of these packages are judged as they are (``policy.alembic_ops``); others run their implementation.
_KNOWN_PACKAGES = ("alembic", "migrations_policy")


def _invoke_custom(ops: Operations, ctx: MigrationContext, rec: Recording, operation: Any, real_invoke) -> Any:
    """A project's own operation: its registered implementation runs (its ops are recorded through *ops*);
    one that subclasses an alembic operation and has no implementation of its own is recorded as that one."""
    try:
        implementation = ops._to_impl.dispatch(operation, ctx.impl.__dialect__)
    except ValueError:
        rec.unknown.append((f"{type(operation).__name__} (registered without Operations.implementation_for)",
                            rec.line()))
        return None
    if str(getattr(implementation, "__module__", "")).split(".")[0] in _KNOWN_PACKAGES:
        rec.add_alembic(operation)
        return real_invoke(operation) if real_invoke is not None else None
    return implementation(ops, operation)


class _UnknownOperation:
    """``op.NAME`` that no registration provides: calling it is noted (``Recording.unknown``), answers harmlessly."""

    def __init__(self, rec: Recording, name: str):
        self._rec, self._name = rec, name

    def __call__(self, *args, **kwargs):
        self._rec.unknown.append((f"op.{self._name}()", self._rec.line()))
        return Harmless(f"op.{self._name}(...)")

    def __repr__(self) -> str:
        return f"op.{self._name}"


def _asking(rec: Recording, function):
    """*function*, noting in *rec* that the dialect may have been asked (``Recording.dialect_asked``)."""
    def asked(*args, **kwargs):
        rec.dialect_asked = True
        return function(*args, **kwargs)

    return asked


@contextmanager
def _unknown_operations(rec: Recording) -> Iterator[None]:
    """``alembic.op.NAME`` for a NAME no operation is registered as: an ``_UnknownOperation`` (PEP 562)."""
    from alembic import op as module

    def missing(name: str):
        if name.startswith("_"):
            raise AttributeError(f"module 'alembic.op' has no attribute {name!r}")
        return _UnknownOperation(rec, name)

    module.__getattr__ = missing
    try:
        yield
    finally:
        module.__dict__.pop("__getattr__", None)


_CONTEXTS: dict[str, MigrationContext] = {}


def _offline_context(dialect: str, rec: Recording, strict: bool) -> MigrationContext:
    ctx = _CONTEXTS.get(dialect)
    if ctx is None:
        ctx = MigrationContext.configure(
            dialect_name=dialect, opts={"as_sql": True, "output_buffer": io.StringIO(), "literal_binds": True}
        )
        _CONTEXTS[dialect] = ctx
    ctx.__dict__.pop("autocommit_block", None)

    def dump(construct, *multiparams, **params):
        rec.add(from_statement(construct))
        return OFFLINE_RESULT

    def inspected():
        if not strict:  # (read from the source: the inspector's answers raise, its dialect is known)
            rec.inspected = rec.inspected or rec.line() or 1

    mock = OfflineBind(ctx.dialect, dump, inspected, strict)
    ctx.connection = mock
    ctx.impl.connection = mock
    ctx.impl._exec = _impl_exec(ctx, rec)
    return ctx


def _impl_exec(ctx: MigrationContext, rec: Recording):
    """``ctx.impl._exec`` offline: what reaches alembic's impl (``op.get_context().impl.drop_column(...)``,
    ``.impl.execute(sql)``, ``get_context().execute(sql)``) is recorded like ``op.execute`` (the recording
    ``Operations`` never call the impl offline: all of it comes from the script)."""
    from sqlalchemy.schema import DDLElement

    def exec_(construct, *args, **kwargs):
        if isinstance(construct, DDLElement):
            try:
                construct = str(construct.compile(dialect=ctx.dialect))
            except Exception:  # noqa: BLE001 - from_statement names what it cannot read
                pass
        rec.add(from_statement(construct))
        return None

    return exec_


@contextmanager
def _proxy(ops: Operations) -> Iterator[None]:
    ops._install_proxy()
    try:
        yield
    finally:
        ops._remove_proxy()


_CONFIGS: dict[str, object] = {}


def offline_config(ini: str = ""):
    """``context.config`` offline: alembic's ``Config`` of the project's ini (*ini*; its main options, as
    ``alembic upgrade --sql`` gives them), with the password of ``sqlalchemy.url`` masked (a script's message
    must never carry it); an empty ``Config`` without an ini (``get_main_option`` answers None)."""
    from alembic.config import Config

    config = _CONFIGS.get(ini)
    if config is None:
        config = Config(ini or None)
        if ini:
            try:
                url = config.get_main_option("sqlalchemy.url")
            except Exception:  # noqa: BLE001 - an ini alembic cannot read: no main options at all
                config, url = Config(), None
            if url:
                config.set_main_option("sqlalchemy.url", _masked(url).replace("%", "%%"))
        _CONFIGS[ini] = config
    return config


def _masked(url: str) -> str:
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - not a URL SQLAlchemy reads: no credentials may be shown
        return ""


@contextmanager
def _environment(ctx: MigrationContext, rec: Recording | None = None, strict: bool = False, ini: str = "",
                 **options: Any) -> Iterator[None]:
    """``alembic.context`` as in ``alembic upgrade`` (``as_sql=True``: ``--sql``, ``is_offline_mode()`` is true),
    ``get_context()`` being *ctx*, ``context.config`` / ``get_context().config`` the project's ini (*ini*,
    ``offline_config``); with *rec*, ``is_offline_mode()`` notes where it was asked (``mode_asked``):
    the script's online path did not run, the engine reads its source instead (*strict*: there, the mode is
    unknown -- ``OfflineResultError`` -- so both branches are read)."""
    from alembic.runtime.environment import EnvironmentContext

    environment = EnvironmentContext(offline_config(ini), None, **options)
    environment._migration_context = ctx
    saved = ctx.environment_context
    ctx.environment_context = environment
    if rec is not None:
        def is_offline_mode() -> bool:
            rec.mode_asked = rec.mode_asked or rec.line() or 1
            if strict:
                raise OfflineResultError("the mode is not known when upgrade() is read from its source")
            return True

        environment.is_offline_mode = is_offline_mode
        for name in ("get_bind", "get_context"):
            setattr(environment, name, _asking(rec, getattr(environment, name)))
    environment._install_proxy()
    try:
        yield
    finally:
        environment._remove_proxy()
        ctx.environment_context = saved


@contextmanager
def recording(dialect: str, filename: str, strict: bool = False, ini: str = "") -> Iterator[Recording]:
    """A context in which ``alembic.op`` records into the yielded ``Recording`` (offline).

    *strict*: inspecting the bind raises ``OfflineResultError`` (the source fallback treats
    what it would answer as unknown) instead of answering as an empty database."""
    rec = Recording(filename)
    ctx = _offline_context(dialect, rec, strict)
    with _environment(ctx, rec, strict, ini, as_sql=True, dialect_name=dialect), _proxy(_recording_operations(ctx, rec, execute=False)), \
            _unknown_operations(rec), reading_for(dialect):
        yield rec


def record(upgrade: Callable[..., Any], dialect: str, filename: str, ini: str = "") -> Recording:
    """Run *upgrade* offline for *dialect*; its exceptions propagate."""
    rec, error = run_offline(upgrade, dialect, filename, ini)
    if error is not None:
        raise error
    return rec


def run_offline(upgrade: Callable[..., Any], dialect: str, filename: str,
                ini: str = "") -> tuple[Recording, BaseException | None]:
    """Run *upgrade* offline for *dialect*: what it recorded, and what it raised (None when it returned)."""
    from alembic import op

    error = None
    with recording(dialect, filename, ini=ini) as rec:
        try:
            call_upgrade(upgrade, op)
        except BaseException as exc:  # noqa: BLE001 - the caller sorts it out (KeyboardInterrupt from a script too)
            error = exc
    return rec, error


def record_online(upgrade: Callable[[], Any], connection, filename: str) -> Recording:
    """Run *upgrade* for real on *connection* (the caller rolls back), recording every op."""
    rec, error = run_online(upgrade, MigrationContext.configure(connection=connection), filename)
    if error is not None:
        raise error
    return rec


def run_online(upgrade: Callable[..., Any], ctx: MigrationContext, filename: str) -> tuple[Recording, BaseException | None]:
    """Run *upgrade* for real through *ctx* (configured on a connection), recording every op and every
    statement the script sends itself; ``alembic.context`` answers as in ``alembic upgrade``.
    What it recorded, and what it raised (None when it returned)."""
    from alembic import op
    from sqlalchemy import event

    rec = Recording(filename)
    ops = _recording_operations(ctx, rec, execute=True)
    connection = ctx.connection

    def before_execute(conn, cursor, statement, parameters, context, executemany):
        if not rec.executing:
            rec.add(from_statement(statement))

    event.listen(connection, "before_cursor_execute", before_execute)
    error = None
    try:
        with _environment(ctx), _proxy(ops), reading_for(connection.dialect.name):
            call_upgrade(upgrade, op)
    except BaseException as exc:  # noqa: BLE001 - the caller sorts it out
        error = exc
    finally:
        event.remove(connection, "before_cursor_execute", before_execute)
    return rec, error

