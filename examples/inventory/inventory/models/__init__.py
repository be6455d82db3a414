"""The inventory's models, one module per release (``release1``, ``release2``, ``release3``)."""

from importlib import import_module

RELEASES = ("release1", "release2", "release3")


def models_for(release: str):
    """The models module of *release* (e.g. ``"release2"``)."""
    if release not in RELEASES:
        raise ValueError(f"unknown release {release!r} (known: {', '.join(RELEASES)})")
    return import_module(f"{__name__}.{release}")
