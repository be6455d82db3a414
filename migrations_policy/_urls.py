"""Database URL helpers: every URL shown to a person goes through ``mask_url``."""

from __future__ import annotations

import re

from typing import TYPE_CHECKING

from .errors import UsageError

if TYPE_CHECKING:  # SQLAlchemy is imported where a URL is parsed: masking text needs no SQLAlchemy
    from sqlalchemy.engine import URL

_MASK = "***"
# user:password@ inside any URL-looking text (for messages from drivers).  The password runs to the
# *last* "@" of the word: a raw password may itself contain "@", ":" or "/".
_PASSWORD_IN_TEXT = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.\-]*://[^:/@\s]*:)(?P<pw>\S*)@")


def parse_url(text: str) -> "URL":
    """Parse a database URL, raising a one-line UsageError that never echoes a password."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(text)
    except (ArgumentError, ValueError) as exc:
        raise UsageError(f"invalid database URL {mask_text(str(text))!r}: {mask_text(str(exc))}") from None


def mask_url(url: "str | URL") -> str:
    """Render *url* with its password replaced by ``***``."""
    from sqlalchemy.engine import URL, make_url
    from sqlalchemy.exc import ArgumentError

    if isinstance(url, URL):
        return url.render_as_string(hide_password=True)
    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        return mask_text(url)


def mask_text(text: str) -> str:
    """Mask any ``scheme://user:password@`` found in free text (e.g. a driver's error)."""
    return _PASSWORD_IN_TEXT.sub(lambda m: f"{m.group('scheme')}{_MASK}@", text)
