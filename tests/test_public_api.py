"""The package's public names resolve lazily, and nothing else is pretended."""

import pytest

import migrations_policy


@pytest.mark.parametrize("name", migrations_policy.__all__)
def test_public_name_resolves_to_its_object(name):
    obj = getattr(migrations_policy, name)
    assert obj.__name__ == name


def test_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        migrations_policy.Nope  # noqa: B018


LAZY_PACKAGES = ("migrations_policy", "migrations_policy.commands", "migrations_policy.authoring",
                 "migrations_policy.lint")


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_a_lazy_name_stays_itself_once_every_submodule_is_imported(package):
    """Importing a submodule binds its name on the package: a submodule named like a lazily exported
    function (``commands/lint.py`` beside ``commands.lint``) turned that name into the module for
    every later caller.  In a fresh interpreter, every submodule imported first, then every exported
    name must still be the object it names (none of them is a module)."""
    import subprocess
    import sys

    probe = (
        "import importlib, pkgutil, types\n"
        f"pkg = importlib.import_module({package!r})\n"
        "for info in pkgutil.iter_modules(pkg.__path__):\n"
        "    importlib.import_module(pkg.__name__ + '.' + info.name)\n"
        "print(sorted(n for n in pkg.__all__ if isinstance(getattr(pkg, n), types.ModuleType)))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out
