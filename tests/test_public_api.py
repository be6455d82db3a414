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
