"""Load a revision script from a path, safely.

``read_source(path)`` rejects what cannot be a migration script (unreadable, binary,
not UTF-8, larger than ``MAX_BYTES``); ``compile_script(source, path)`` returns the code
object (no AST: only the source fallback needs one); ``load_module(code, path)``
executes it as a fresh module that is *not*
left in ``sys.modules``, with ``sys.path`` restored afterwards (the current directory
is prepended while the script runs, like alembic's ``prepend_sys_path = .``) and the
script's prints swallowed.  (The time limit is the worker's: ``lint.sandbox.worker`` kills a
script that runs too long.)  Every failure is a ``LoadError`` with one line of text and a line number.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import os
import re
import sys
import types
import warnings
from pathlib import Path
from typing import Iterator

MAX_BYTES = 5_000_000
_LIBRARIES = ("sqlalchemy", "alembic")


class LoadError(Exception):
    """The script cannot be loaded or run; ``str(exc)`` is one line."""

    def __init__(self, message: str, line: int = 1):
        super().__init__(message)
        self.line = line or 1


def _text(exc: BaseException) -> str:
    try:
        text = str(exc)
        return text if isinstance(text, str) else ""
    except BaseException:  # noqa: BLE001 - a script's exception whose __str__ raises
        return "(its message cannot be printed)"


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def one_line(exc: BaseException) -> str:
    """``Type: message`` on one line, at most ~300 characters, whatever the exception does in ``__str__``."""
    text = _ADDRESS.sub("", " ".join(_text(exc).split()))  # "<X object at 0x7f..>": a run's addresses -> "<X object>"
    if len(text) > 300:
        text = text[:297] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def read_source(path: Path) -> str:
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise LoadError(f"file is too large to be a migration script ({size} bytes > {MAX_BYTES})")
        data = path.read_bytes()
    except OSError as exc:
        raise LoadError(f"cannot read: {exc.strerror or one_line(exc)}") from None
    if b"\0" in data:
        raise LoadError("binary file, not a Python script")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise LoadError(f"not UTF-8 text (byte {exc.start})", line) from None


def compile_script(source: str, path: Path) -> types.CodeType:
    try:
        return compile(source, str(path), "exec", dont_inherit=True)  # not this module's __future__ imports
    except SyntaxError as exc:
        raise LoadError(f"syntax error: {exc.msg}", exc.lineno or 1) from None
    except (ValueError, RecursionError, MemoryError, OverflowError) as exc:
        raise LoadError(f"cannot compile: {one_line(exc)}") from None


@functools.lru_cache(maxsize=1)
def _installed_prefixes() -> tuple[str, ...]:
    import sysconfig

    paths = sysconfig.get_paths()
    installed = {os.path.realpath(paths[name]) + os.sep for name in ("stdlib", "platstdlib", "purelib", "platlib")}
    installed.add(os.path.realpath(os.path.dirname(os.path.dirname(__file__))) + os.sep)  # migrations_policy
    return tuple(installed)


def is_local_file(filename: str) -> bool:
    """Whether *filename* is a project's own source: not the standard library, not an installed package,
    not migrations_policy (a script's helper modules, which its cache entry and source scan follow)."""
    if not filename.endswith(".py") or not os.path.isfile(filename):
        return False
    return not os.path.realpath(filename).startswith(_installed_prefixes())


def line_in(exc: BaseException, filename: str) -> int:
    """The innermost line of *filename* in *exc*'s traceback (0 when absent)."""
    line, tb = 0, exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def refuses(exc: BaseException | None, filename: str) -> bool:
    """Whether *exc* is the script refusing to run (on the dialect at hand): a ``NotImplementedError`` raised by a
    ``raise`` statement of *filename* itself -- its innermost frame, not alembic's, SQLAlchemy's, a helper module's
    or a builtin's (zenml: ``raise NotImplementedError(f"Unsupported engine: {engine_name}")``)."""
    if not isinstance(exc, NotImplementedError) or exc.__traceback__ is None:
        return False
    tb = exc.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    code = tb.tb_frame.f_code
    if code.co_filename != filename:
        return False
    from opcode import opmap

    return code.co_code[tb.tb_lasti] == opmap["RAISE_VARARGS"]


def needs_database(exc: BaseException) -> bool:
    """Whether *exc* comes from offline mode's limits rather than from the script's own bug."""
    if str(getattr(type(exc), "__module__", "")).split(".")[0] in _LIBRARIES or type(exc).__name__ == "OfflineResultError":
        return True
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    dirs = tuple(os.path.dirname(sys.modules[n].__file__) + os.sep for n in _LIBRARIES if n in sys.modules)
    return tb is not None and tb.tb_frame.f_code.co_filename.startswith(dirs)


@contextlib.contextmanager
def sandbox() -> Iterator[None]:
    """Prepend the cwd to sys.path, swallow output and warnings; restore everything after."""
    saved_path = list(sys.path)
    sys.path.insert(0, os.getcwd())
    sink = io.StringIO()
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        sys.path[:] = saved_path


def load_module(code: types.CodeType, path: Path, source: str | None = None, notes=None) -> types.ModuleType:
    """The script's module.  With *notes* (a ``missing.Notes``) and *source*, a module whose top level raised
    (an import that is not installed, a project module that fails) is loaded again statement by statement
    (``missing.load_partially``): what failed is noted, the rest is defined; else the failure is a ``LoadError``."""
    # hash() of a str differs per process (PYTHONHASHSEED): a message naming the module would differ per run
    name = f"_migrations_policy_lint_{hashlib.sha256(os.fsencode(path)).hexdigest()[:16]}"
    module = types.ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module  # dataclasses and pickling look their module up while it runs
    try:
        exec(code, module.__dict__)  # noqa: S102 - linting a migration means running its module
    except MemoryError:
        raise  # the engine reports the memory limit
    except Exception as exc:  # noqa: BLE001 - loaded again, statement by statement
        if notes is None or source is None:
            raise LoadError(f"cannot import: {one_line(exc)}", line_in(exc, str(path))) from None
        failure = (line_in(exc, str(path)), one_line(exc))
        module = _partially(source, path, name, notes)
        if not notes.failed:
            notes.failed.append(failure)  # it raised whole, not statement by statement: still say so
    except BaseException as exc:  # noqa: BLE001 - any import-time failure is one line (KeyboardInterrupt too)
        raise LoadError(f"cannot import: {one_line(exc)}", line_in(exc, str(path))) from None
    finally:
        sys.modules.pop(name, None)
    return module


def _partially(source: str, path: Path, name: str, notes) -> types.ModuleType:
    import ast

    from migrations_policy.lint.offline.missing import load_partially

    module = types.ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module
    try:
        load_partially(ast.parse(source, str(path)), module, str(path), notes, one_line)
    except MemoryError:
        raise
    except BaseException as exc:  # noqa: BLE001 - SystemExit / KeyboardInterrupt of a statement: the script's choice
        raise LoadError(f"cannot import: {one_line(exc)}", line_in(exc, str(path))) from None
    return module
