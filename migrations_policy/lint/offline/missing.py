"""Scripts whose module cannot be imported whole: a module with what could be imported, and a note of the rest.

A real project's scripts import its own packages and their dependencies; in CI most are
installed, but not always all of them (optional backends, plugins), and ``pre-commit``
runs in an environment of its own.  ``load_partially(code_tree, module, filename)`` runs
a script's top-level statements one at a time, after a first whole run failed:

* an ``import`` of a module that is nowhere to be found binds a ``Missing`` object (and the
  modules those modules import, through ``MissingFinder``, last on ``sys.meta_path``: only
  what no other finder finds);
* any other top-level statement that raises binds the names it would have bound to a
  ``Missing`` object naming that statement's error.

A ``Missing`` object lets the module be defined (attributes, calls, subclassing, decorators
answer with another ``Missing``) but, once ``strict()`` (while ``upgrade()`` runs), any use of
it raises ``MissingError``: what ``upgrade()`` did with it is not known, so the engine reads
the source instead (``astscan``, which treats a ``Missing`` value as unknown) and says, in
``MP001``, what could not be imported.  An ``upgrade()`` that never touches one ran as it
would with everything present: its verdict is exact.
"""

from __future__ import annotations

import ast
import importlib.abc
import importlib.machinery
import sys
import types
from contextlib import contextmanager
from typing import Iterator


class MissingError(RuntimeError):
    """``upgrade()`` used something its module could not import (an offline limit, not the script's bug)."""


class Notes:
    """What could not be imported or run when the module was loaded, and whether ``upgrade()`` touched it."""

    def __init__(self) -> None:
        self.failed: list[tuple[int, str]] = []  # (line, what failed)
        self.touched: list[str] = []  # the Missing objects upgrade() used (their expression)
        self.strict = False

    def describe(self) -> str:
        return "; ".join(f"line {line}: {what}" for line, what in self.failed[:3]) + (
            f" and {len(self.failed) - 3} more" if len(self.failed) > 3 else "")


#: Special names Python itself looks up (``inspect``, ``copy``, ``typing``...): not a use by the script.
_PROTOCOL = frozenset({"__signature__", "__wrapped__", "__func__", "__self__", "__code__", "__defaults__",
                       "__kwdefaults__", "__annotations__", "__text_signature__", "__mro_entries__", "__origin__",
                       "__enter__", "__exit__", "__aenter__", "__aexit__", "__await__", "__iter__", "__next__",
                       "__fspath__", "__index__", "__length_hint__", "__deepcopy__", "__copy__", "__reduce_ex__",
                       "__getstate__", "__class_getitem__", "__set_name__", "__get__", "__set__", "__delete__",
                       "__clause_element__", "__html__", "__float__", "__int__", "__complex__"})


class Missing:
    """Stands for what could not be imported (see the module docstring)."""

    __slots__ = ("_expression", "_notes")

    def __init__(self, expression: str, notes: Notes):
        object.__setattr__(self, "_expression", expression)
        object.__setattr__(self, "_notes", notes)

    def _use(self, what: str) -> "Missing":
        notes = object.__getattribute__(self, "_notes")
        expression = object.__getattribute__(self, "_expression")
        if notes.strict:
            notes.touched.append(expression)
            raise MissingError(f"{expression} could not be imported ({what})")
        return Missing(f"{expression}{what}", notes)

    def __getattr__(self, name: str) -> "Missing":
        if name.startswith("__") and name.endswith("__"):
            notes = object.__getattribute__(self, "_notes")
            if notes.strict and name not in _PROTOCOL:  # Model.__table__ of a model that could not be imported
                notes.touched.append(f"{object.__getattribute__(self, '_expression')}.{name}")
            raise AttributeError(name)  # hasattr() and the interpreter's protocols expect this one
        return self._use(f".{name}")

    def __setattr__(self, name: str, value) -> None:
        self._use(f".{name} = ...")

    def __call__(self, *args, **kwargs) -> "Missing":
        if len(args) == 1 and not kwargs and callable(args[0]) and not self._notes_strict():
            return args[0]  # a decorator that could not be imported leaves the function as it is
        return self._use("(...)")

    def _notes_strict(self) -> bool:
        return object.__getattribute__(self, "_notes").strict

    def __getitem__(self, key) -> "Missing":
        return self._use("[...]")

    def __iter__(self):
        self._use(" (iterated)")
        return iter(())

    def __bool__(self) -> bool:
        self._use(" (truth value)")
        return False

    def __len__(self) -> int:
        self._use(" (len)")
        return 0

    def __eq__(self, other) -> bool:
        self._use(" == ...")
        return False

    __hash__ = object.__hash__

    def __mro_entries__(self, bases) -> tuple:
        return (object,)  # class Model(Base) where Base could not be imported: a plain class

    def __repr__(self) -> str:
        return f"<not imported: {object.__getattribute__(self, '_expression')}>"

    __str__ = __repr__


def is_missing(value) -> bool:
    return type(value) is Missing


class _MissingLoader(importlib.abc.Loader):
    def __init__(self, notes: Notes):
        self.notes = notes

    def create_module(self, spec):
        return _MissingModule(spec.name, self.notes)

    def exec_module(self, module) -> None:
        pass


class _MissingModule(types.ModuleType):
    """A module that could not be found: each attribute a ``Missing`` object."""

    def __init__(self, name: str, notes: Notes):
        super().__init__(name)
        self.__path__ = []  # a package: its submodules are missing too
        self._mp_notes = notes

    def __getattr__(self, name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return Missing(f"{self.__name__}.{name}", self._mp_notes)


class MissingFinder(importlib.abc.MetaPathFinder):
    """Last on ``sys.meta_path``: a module no other finder finds is a ``_MissingModule`` (noted)."""

    def __init__(self, notes: Notes, line: int):
        self.notes, self.line = notes, line

    def find_spec(self, fullname, path=None, target=None):
        self.notes.failed.append((self.line, f"No module named {fullname!r}"))
        return importlib.machinery.ModuleSpec(fullname, _MissingLoader(self.notes), is_package=True)


@contextmanager
def _finder(notes: Notes, line: int) -> Iterator[list[str]]:
    finder = MissingFinder(notes, line)
    before = set(sys.modules)
    sys.meta_path.append(finder)
    try:
        yield []
    finally:
        sys.meta_path.remove(finder)
        for name in set(sys.modules) - before:  # no stand-in outlives the script (nor a module that imported one)
            module = sys.modules.get(name)
            if isinstance(module, _MissingModule) or _uses_missing(module):
                sys.modules.pop(name, None)


def _uses_missing(module) -> bool:
    try:
        return any(isinstance(v, (_MissingModule, Missing)) for v in vars(module).values())
    except TypeError:
        return False


def _bound_names(node: ast.stmt) -> list[str]:
    """The names a top-level statement binds."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [alias.asname or alias.name.split(".")[0] for alias in node.names if alias.name != "*"]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
    names = []
    for target in targets:
        if target is not None:
            names.extend(n.id for n in ast.walk(target) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    return names


def load_partially(tree: ast.Module, module: types.ModuleType, filename: str, notes: Notes, one_line) -> None:
    """Run *tree*'s top-level statements in *module* one by one (see the module docstring); raises only what a
    statement raises that is not an ``Exception`` (``SystemExit``, ``KeyboardInterrupt``: the script's choice).
    *one_line* describes an exception (``loader.one_line``)."""
    for node in tree.body:
        code = compile(ast.Module(body=[node], type_ignores=[]), filename, "exec", dont_inherit=True)
        with _finder(notes, node.lineno):
            try:
                exec(code, module.__dict__)  # noqa: S102 - linting a migration means running its module
                continue
            except MemoryError:
                raise
            except Exception as exc:  # noqa: BLE001 - this statement's names stand for what failed
                failure = one_line(exc)
        notes.failed.append((node.lineno, failure))
        for name in _bound_names(node):
            module.__dict__[name] = Missing(name, notes)
