"""Database URL helpers: every URL shown to a person goes through ``mask_url``, every message
that may quote one through ``mask_text``.

Masking fails closed, in three layers:

* a parsed URL is rendered with its password, and every query parameter whose name looks
  secret (``password``, ``passwd``, ``pwd``, ``sslpassword``, ``token``, ``secret``, ``api_key`` ...),
  replaced by ``***``;
* free text (a driver's error, an unparsable URL) has ``user:password@`` masked whatever the
  scheme looks like (``postgresql://``, ``postgresql:/``, ``postgresql//`` or none), and every
  ``secret-name=value`` pair masked;
* every password seen by ``parse_url`` (including a guess from an unparsable URL) is
  remembered, and ``mask_text`` replaces it, raw or percent-encoded, wherever it appears.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING
from urllib.parse import quote, quote_plus, unquote, unquote_plus

from migrations_policy.core.errors import UsageError

if TYPE_CHECKING:  # SQLAlchemy is imported where a URL is parsed: masking text needs no SQLAlchemy
    from sqlalchemy.engine import URL

_MASK = "***"
#: Query parameter (or libpq keyword) names whose values are secrets.
_SECRET_NAME = r"[A-Za-z_.\-]*(?:pass|pwd|pw|secret|token|credential|auth|api_?key|private_?key|sslkey)[A-Za-z_.\-]*"
# user:password@ inside any URL-looking text, with or without a well-formed scheme.  The
# password runs to the *last* "@" of the word: a raw password may itself contain "@", ":" or "/".
_PASSWORD_IN_TEXT = re.compile(
    r"(?<![^\s'\"`(=,])"  # at the start of a word: linear time on long words
    r"(?P<prefix>(?:[A-Za-z][A-Za-z0-9+.\-]*+:?/{0,2})?[^\s:/@'\"`(=,]*+:)(?P<pw>(?!/)[^\s'\"`]*)@")
# name=value pairs (URL query parameters, libpq keywords): names are whole words (possessive:
# linear time), and only those is_secret_parameter() accepts get their value masked.
_PARAMETER = re.compile(r"(?<![A-Za-z0-9_.\-])(?P<name>[A-Za-z_.\-]++\s*=\s*)(?P<value>'[^']*'|[^&;\s'\"`]+)")
_SPACE = re.compile(r"\s")
#: Words one of which every secret parameter name contains (a fast pre-check of _SECRET_NAME).
_SECRET_WORDS = ("pass", "pwd", "pw", "secret", "token", "credential", "auth", "apikey", "api_key", "privatekey",
                 "private_key", "sslkey")
_SECRET_PARAMETER_NAME = re.compile(rf"^{_SECRET_NAME}$", re.IGNORECASE)
#: Passwords seen in URLs of this process; shorter ones are masked only where they stand in a URL.
_remembered: set[str] = set()
_MIN_REMEMBERED = 4


def is_secret_parameter(name: str) -> bool:
    """Whether a URL query parameter called *name* holds a secret (its value is never shown)."""
    return bool(_SECRET_PARAMETER_NAME.match(name))


def remember_secret(secret: str | None) -> None:
    """Mask *secret* (and its percent-encoded forms) in every later ``mask_text``."""
    if not secret or len(secret) < _MIN_REMEMBERED:
        return
    for form in (secret, quote_plus(secret), quote(secret, safe=""), unquote_plus(secret)):
        if len(form) >= _MIN_REMEMBERED:
            _remembered.add(form)


def remember_url_text(text: str) -> None:
    """Remember what looks like the password of a URL given as text, parsable or not, and every
    secret ``name=value`` pair in it, also once percent-decoded (a query value may itself carry one:
    libpq's ``options=-c%20password%3D...``).  A ``%%`` (an ini file's escaped ``%``) is read as ``%``."""
    views = {text, text.replace("%%", "%")}
    for view in list(views):
        views.add(unquote(view))
        views.add(unquote_plus(view))
    for view in views:
        for guess in _userinfo_guesses(view):
            remember_secret(guess)
        for match in _PASSWORD_IN_TEXT.finditer(view):
            remember_secret(match.group("pw"))
        for match in _PARAMETER.finditer(view):
            if is_secret_parameter(match.group("name").rstrip("= \t")):
                remember_secret(match.group("value").strip("'"))


_remember_url_text = remember_url_text


def _userinfo_guesses(text: str) -> list[str]:
    """What may be the password of a URL whatever characters it holds: the text before the last "@",
    from after each ":" not followed by "/" (the scheme's): the password is one of them, the others are
    shorter pieces of it or longer strings around it."""
    head = text[:text.rfind("@")] if "@" in text else ""
    return [head[colon + 1:] for colon in range(len(head)) if head[colon] == ":" and head[colon + 1:colon + 2] != "/"]


def _unparsable(text: str) -> str:
    """An unparsable URL as a message shows it: nothing before its last "@" (the user and password
    however they are written), only the scheme's name and what follows (host, database, parameters)."""
    if "@" not in text:
        return mask_text(text)
    scheme = re.match(r"[A-Za-z][A-Za-z0-9+.\-]*(?=:)", text)
    return f"{scheme.group(0) + '://' if scheme else ''}***@{mask_text(text[text.rfind('@') + 1:])}"


def _password_runs_on(text: str, password: str | None) -> bool:
    """Whether a raw "@" follows the one that ended *password*: the password held an "@" of its own,
    so what the parser took for the host, the database or a query parameter begins with a piece of it
    (which a driver's error then quotes: "failed to resolve host '<piece>@127.0.0.1'").  The parser
    ends a password at its first "@"; any later raw "@" makes where it ends a guess (written
    percent-encoded, %40, nothing is ambiguous)."""
    if password is None or "://" not in text:
        return False
    rest = text.split("://", 1)[1]
    end = rest.find("@", rest.find(":"))  # the password follows the user's first ':' (a user holds none)
    return end != -1 and "@" in rest[end + 1:]


def _value_holds_secret(value: str) -> bool:
    """A query value that itself names a secret (``-c password=...``): shown as ``***`` whole."""
    return "=" in value and _names_a_secret(value) and any(
        is_secret_parameter(m.group("name").rstrip("= \t")) for m in _PARAMETER.finditer(value))


def parse_url(text: str) -> "URL":
    """Parse a database URL, raising a one-line UsageError that never echoes a password."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    _remember_url_text(str(text))
    try:
        url = make_url(text)
    except (ArgumentError, ValueError, TypeError):
        url = None  # the parser's own message may quote a piece of a raw password (a bad "port"): not shown
    if url is None or _password_runs_on(str(text), url.password):
        raise UsageError(f"invalid database URL {_unparsable(str(text))!r}: expected a URL like "
                         "postgresql+psycopg://user@host:5432/dbname, with a password percent-encoded "
                         "('@' as %40, ':' as %3A, '/' as %2F)") from None
    remember_secret(url.password if isinstance(url.password, str) else None)
    for name, value in url.query.items():
        for item in (value,) if isinstance(value, str) else value:
            if is_secret_parameter(name):
                remember_secret(item)
            else:
                remember_url_text(item)
    return url


def mask_url(url: "str | URL") -> str:
    """Render *url* with its password and secret query parameters replaced by ``***``."""
    from sqlalchemy.engine import URL, make_url
    from sqlalchemy.exc import ArgumentError

    if not isinstance(url, URL):
        try:
            url = make_url(url)
        except (ArgumentError, ValueError, TypeError):
            return mask_text(str(url))
    query = {name: (_MASK if is_secret_parameter(name) or any(
        _value_holds_secret(item) for item in ((value,) if isinstance(value, str) else value)) else value)
        for name, value in url.query.items()}
    return mask_text(url.set(query=query).render_as_string(hide_password=True).replace("%2A%2A%2A", _MASK))


def mask_text(text: str) -> str:
    """Mask passwords in free text: ``user:password@`` in any URL-like word, ``secret=value``
    pairs, and every password remembered from a parsed URL."""
    for secret in sorted(_remembered, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, _MASK)
    if "@" in text:
        text = _mask_userinfo(text)
    if "=" in text and _names_a_secret(text):
        text = _by_line(text, _names_a_secret, lambda line: _PARAMETER.sub(_mask_parameter, line))
    return text


def _by_line(text: str, wanted, mask) -> str:
    """*mask* applied to the lines *wanted* says may hold a secret (a long output costs a scan, not a regex)."""
    return "\n".join(mask(line) if wanted(line) else line for line in text.split("\n"))


def _names_a_secret(text: str) -> bool:
    low = text.lower()
    return any(word in low for word in _SECRET_WORDS)


def _mask_userinfo(text: str) -> str:
    """``user:***@`` in the whitespace-separated words that hold an "@"; the rest of the text is
    only searched for "@" and whitespace (C speed), never by the pattern."""
    out, done = [], 0  # text[:done] is settled
    at = text.find("@")
    while at != -1:
        start = max(text.rfind(space, done, at) for space in " \n\t\r") + 1
        start = max(start, done)
        end_match = _SPACE.search(text, at)
        end = end_match.start() if end_match else len(text)
        out.append(text[done:start])
        out.append(_PASSWORD_IN_TEXT.sub(lambda m: f"{m.group('prefix')}{_MASK}@", text[start:end]))
        done = end
        at = text.find("@", end)
    out.append(text[done:])
    return "".join(out)


def _mask_parameter(match: "re.Match[str]") -> str:
    if is_secret_parameter(match.group("name").rstrip("= \t")):
        return f"{match.group('name')}{_MASK}"
    return match.group()
