"""The content cache: findings per (file content, phase, options, rule set).

One JSON file, ``lint-v1.json``, in ``$MIGRATIONS_POLICY_CACHE_DIR`` or else
``.migrations_policy_cache/`` in the current directory (set the variable to ``off``
to disable).  The key hashes the file's bytes, its phase, the options, and a
fingerprint of the installed linter (version plus the size and mtime of every
``policy`` / ``lint`` module), so an edited rule invalidates everything.  A warm run
reads it without importing alembic or SQLAlchemy.  Writes are atomic (temp file +
rename); the cache keeps at most ``MAX_ENTRIES`` entries, newest last.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from functools import lru_cache
from pathlib import Path

from .. import __version__

ENV = "MIGRATIONS_POLICY_CACHE_DIR"
DEFAULT_DIR = ".migrations_policy_cache"
FILENAME = "lint-v1.json"
MAX_ENTRIES = 20000


@lru_cache(maxsize=1)
def fingerprint() -> str:
    package = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256(__version__.encode())
    for sub in ("policy", "lint"):
        for path in sorted((package / sub).rglob("*.py")):
            stat = path.stat()
            digest.update(f"{path.name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()


def cache_dir() -> Path | None:
    value = os.environ.get(ENV)
    if value is not None and value.strip().lower() in ("", "off", "0", "no", "false"):
        return None
    return Path(value) if value else Path(DEFAULT_DIR)


class Cache:
    def __init__(self, directory: Path | None):
        self.directory = directory
        self.entries: dict[str, list] = {}
        self.dirty = False
        if directory is not None:
            try:
                with open(directory / FILENAME, encoding="utf-8") as fh:
                    loaded = json.load(fh)
                if isinstance(loaded, dict):
                    self.entries = loaded
            except (OSError, ValueError):
                self.entries = {}

    @staticmethod
    def key(data: bytes, *parts: str) -> str:
        digest = hashlib.sha256(fingerprint().encode())
        for part in parts:
            digest.update(b"\0" + part.encode())
        digest.update(b"\0" + data)
        return digest.hexdigest()

    def get(self, key: str) -> list | None:
        return self.entries.get(key) if self.directory is not None else None

    def put(self, key: str, value: list) -> None:
        if self.directory is not None:
            self.entries.pop(key, None)
            self.entries[key] = value
            self.dirty = True

    def save(self) -> None:
        if self.directory is None or not self.dirty:
            return
        if len(self.entries) > MAX_ENTRIES:
            self.entries = dict(list(self.entries.items())[-MAX_ENTRIES:])
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            ignore = self.directory / ".gitignore"
            if not ignore.exists():
                ignore.write_text("# created by migrations-policy lint\n*\n")
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".lint-", suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(self.entries, fh, separators=(",", ":"))
            os.replace(tmp, self.directory / FILENAME)
        except OSError:
            pass  # a read-only checkout lints fine, only slower
