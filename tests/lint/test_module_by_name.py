"""A revision that runs another module's function through ``module = import_module("pkg.mod")`` or
``import pkg.mod as alias`` (issue 28, labelled real scripts: superset 59a1450b3c10 and e863403c0c50 run an older
revision's ``downgrade()`` -- a DROP TABLE -- this way).  When ``pkg`` cannot be imported (its ``__init__`` needs a
package that is not installed), the module is found on sys.path without importing its package and the function is
read like a helper imported by name: its operations are judged, reported at the calling line, as with the
package importable."""

from __future__ import annotations

import os
import random
import sys

from .conftest import HELPER_OPERATIONS

SEED = int(os.environ.get("MP_MODULE_NAME_SEED") or random.randrange(10 ** 9))
print(f"test_module_by_name: MP_MODULE_NAME_SEED={SEED}")



def test_a_function_of_a_module_imported_by_name_is_followed(tmp_path, run_lint, monkeypatch):
    from .conftest import script

    rng = random.Random(SEED)
    monkeypatch.chdir(tmp_path)
    dep = "mp_absent_dep_" + "".join(rng.choice("abcdef") for _ in range(6))
    pkg = "mpapp_" + "".join(rng.choice("abcdef") for _ in range(6))
    (tmp_path / pkg / "versions").mkdir(parents=True)
    (tmp_path / pkg / "__init__.py").write_text(  # an __init__ that fails without its dependency
        f"import {dep}\nif not getattr({dep}, 'READY', False):\n    raise RuntimeError('not configured')\n")
    (tmp_path / pkg / "versions" / "__init__.py").write_text("")
    for round_ in range(3):
        table = f"t{round_}_{rng.randrange(1000)}"
        body, code = rng.choice(list(HELPER_OPERATIONS.items()))
        function = rng.choice(["upgrade", "downgrade", "do_it"])
        modname = f"older_{round_}"
        (tmp_path / pkg / "versions" / f"{modname}.py").write_text(
            "from alembic import op\nimport sqlalchemy as sa\n\n\n"
            f"def {function}():\n    {body.format(t=table)}\n")
        if rng.random() < 0.5:
            head = f"from importlib import import_module\nmodule = import_module({pkg + '.versions.' + modname!r})\n"
        else:
            head = f"import {pkg}.versions.{modname} as module\n"
        path = tmp_path / f"rev_{round_}.py"
        path.write_text(script(f"module.{function}()", revision=f"r{round_}", extra=head))
        missing = run_lint("--format", "json", "--phase", "expand", "--dialect", "postgresql", path)
        assert code in missing.codes and "MP001" in missing.codes, (SEED, head, body, missing.json)  # from source
        (tmp_path / f"{dep}.py").write_text("READY = True\n")  # the reference: everything importable
        monkeypatch.syspath_prepend(str(tmp_path))
        present = run_lint("--format", "json", "--phase", "expand", "--dialect", "postgresql", path)
        rules = {f["code"] for f in present.json["findings"] if f["code"].startswith("MP1")}
        assert rules == {f["code"] for f in missing.json["findings"] if f["code"].startswith("MP1")}, (SEED, body)
        (tmp_path / f"{dep}.py").unlink()
        for name in [n for n in sys.modules if n == dep or n.startswith(pkg)]:
            sys.modules.pop(name)
