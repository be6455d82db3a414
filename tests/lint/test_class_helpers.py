"""Helpers called through a class of the project's own modules (issue 28, held-out real script: superset
9ba2ce3086e5 runs ``MigratePivotTable.upgrade(session)``, a classmethod inherited from a base class in another
module, re-exported through a package's ``from .processors import *``, that loops over an ORM query and calls
``cls.upgrade_slice(row)``, which assigns the row's attributes).

When the package cannot be imported (its ``__init__`` needs a package that is not installed), the class is found
in the project's files without importing the package (through re-exports, ``*`` included), its method -- own or
inherited, static, class or instance method -- is read like a helper imported by name, and so are the methods it
calls through ``cls.``/``self.``; a row passed to such a method stays a row (assigning its attributes: MP107).
The verdict equals the one with the package importable.  Seed: MP_CLASS_HELPER_SEED (printed).
"""

from __future__ import annotations

import os
import random
import sys

from .conftest import HELPER_OPERATIONS

SEED = int(os.environ.get("MP_CLASS_HELPER_SEED") or random.randrange(10 ** 9))
print(f"test_class_helpers: MP_CLASS_HELPER_SEED={SEED}")



def _method(kind: str, name: str, params: str, body: str) -> str:
    """A method of *kind* (static, class, instance) named *name* whose body (indented 8) is *body*."""
    first = {"static": "", "class": "cls", "instance": "self"}[kind]
    args = ", ".join(p for p in (first, params) if p)
    decorator = {"static": "    @staticmethod\n", "class": "    @classmethod\n", "instance": ""}[kind]
    return f"{decorator}    def {name}({args}):\n" + "".join(f"        {line}\n" for line in body.splitlines())


def _package(rng: random.Random, root, pkg: str, dep: str, body: str, orm: bool) -> tuple[str, str]:
    """Write package *pkg* (its ``__init__`` fails without *dep*) whose class issues *body* from a method;
    ``(import line, call)`` of the script."""
    (root / pkg / "shared").mkdir(parents=True)
    (root / pkg / "__init__.py").write_text(
        f"import {dep}\nif not getattr({dep}, 'READY', False):\n    raise RuntimeError('not configured')\n")
    kind = rng.choice(["static", "class", "instance"])
    through = rng.choice(["direct", "cls"]) if kind != "static" else "direct"
    where = rng.choice(["own", "inherited"])
    me = {"static": "", "class": "cls", "instance": "self"}[kind]
    if orm:
        kind, me, through = "class", "cls", "cls"
        entry = _method("class", "upgrade", "session", "rows = session.query(Row).filter(Row.kind == cls.kind)\n"
                        "for item in paginated(rows):\n    cls.fix(item)")
        step = _method("class", "fix", "row", "try:\n    row.kind = cls.kind + '_v2'\nexcept Exception:\n    pass")
        helpers = ("from sqlalchemy import Column, Integer, String\nfrom sqlalchemy.orm import declarative_base\n"
                   "Base0 = declarative_base()\n\n\nclass Row(Base0):\n    __tablename__ = 'rows'\n"
                   "    id = Column(Integer, primary_key=True)\n    kind = Column(String(20))\n\n\n"
                   "def paginated(query):\n    yield from query\n\n\n")
    else:
        helpers = ""
        if through == "cls":
            entry = _method(kind, "upgrade", "", f"{me}.step()")
            step = _method(kind, "step", "", body)
        else:
            entry = _method(kind, "upgrade", "", body)
            step = ""
    base_methods = entry + "\n" + step if where == "inherited" else ""
    own_methods = entry + "\n" + step if where == "own" else ""
    (root / pkg / "shared" / "base.py").write_text(
        "from alembic import op\nimport sqlalchemy as sa\n" + helpers
        + "class Base:\n    kind = 'base'\n\n" + (base_methods or "    pass\n"))
    (root / pkg / "shared" / "impl.py").write_text(
        "from alembic import op\nfrom .base import *\n\n\n"
        "class Impl(Base):\n    kind = 'pivot'\n\n" + (own_methods or "    pass\n"))
    reexport = rng.choice(["from .impl import *\n", "from .impl import Impl\n", "from . import impl\nImpl = impl.Impl\n"])
    (root / pkg / "shared" / "__init__.py").write_text(reexport)
    target = rng.choice([f"{pkg}.shared", f"{pkg}.shared.impl"]) if "=" not in reexport else f"{pkg}.shared.impl"
    receiver = "Impl()" if kind == "instance" else "Impl"
    call = f"{receiver}.upgrade(session)" if orm else f"{receiver}.upgrade()"
    if orm:
        call = "session = sa.orm.Session(bind=op.get_bind())\n" + call
    return f"from {target} import Impl\n", call


def test_methods_of_a_class_of_an_unimportable_package_are_followed(tmp_path, run_lint, monkeypatch):
    from .conftest import script

    rng = random.Random(SEED)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    dep = "mp_absent_dep_" + "".join(rng.choice("abcdef") for _ in range(6))
    for round_ in range(4):
        pkg = f"mpcls{round_}_" + "".join(rng.choice("abcdef") for _ in range(6))
        table = f"t{round_}_{rng.randrange(1000)}"
        orm = round_ == 0 or rng.random() < 0.25
        body, code = rng.choice(list(HELPER_OPERATIONS.items()))
        code = "MP107" if orm else code
        head, call = _package(rng, tmp_path, pkg, dep, body.format(t=table), orm)
        path = tmp_path / f"rev_{round_}.py"
        path.write_text(script(call, revision=f"r{round_}", extra=head))
        args = ("--format", "json", "--phase", "expand", "--dialect", "postgresql", path)
        missing = run_lint(*args)
        shown = (SEED, round_, head, call, [(p.name, p.read_text()) for p in (tmp_path / pkg / "shared").glob("*.py")])
        assert code in missing.codes and "MP001" in missing.codes, (*shown, missing.json)  # read from source
        if not orm:  # the reference: everything importable (an ORM session cannot query offline)
            (tmp_path / f"{dep}.py").write_text("READY = True\n")
            present = run_lint(*args)
            rules = {f["code"] for f in present.json["findings"] if f["code"].startswith("MP1")}
            assert rules == {f["code"] for f in missing.json["findings"] if f["code"].startswith("MP1")}, \
                (*shown, present.json, missing.json)
            (tmp_path / f"{dep}.py").unlink()
        for name in [n for n in sys.modules if n == dep or n.startswith(pkg)]:
            sys.modules.pop(name)
