"""The content cache: findings per (file content, phase, options, rule set), behind a stat index.

One file, ``lint-v5.marshal`` (Python's ``marshal`` format: read and written ~5x
faster than JSON), in ``$MIGRATIONS_POLICY_CACHE_DIR`` or else
``.migrations_policy_cache/`` in the current directory (set the variable to ``off``
to disable).  It holds two maps:

* ``files``: absolute path -> (mtime, ctime, size, inode, sha256 of the bytes, revision
  header, the stat of each module read to resolve the header).  A file whose stat (and
  its header modules' stat: ``branch_labels = (migration.CONTRACT_BRANCH,)`` changes
  with ``migration.py``) matches is neither read nor hashed, so a warm run is
  one ``stat`` per script.  As in git's index, an entry whose mtime or ctime is not
  older than the index file itself is "racy" (the file may have changed again within
  the same clock tick) and is re-read.
* ``results``: findings (with each rule's default severity) keyed by the content
  hash, the phase and the options, with the local modules the script imported and
  the files it read (path and sha256, as reported by the worker that ran it,
  ``reads``): a result whose helper module or data file changed (or is gone) is not used.

Both belong to a fingerprint of the installed linter (version, Python's bytecode tag,
and the size and mtime of every ``policy`` / ``lint`` module): a file written by
another fingerprint is ignored, so an edited rule invalidates everything.

The file is the sha256 of the payload (32 bytes) followed by the payload: a file whose
digest does not match (a flipped byte, a truncated write) is ignored and rebuilt.

A warm run reads it without importing alembic or SQLAlchemy.  Writes are atomic
(temp file + rename); each map keeps at most ``MAX_ENTRIES`` entries, newest last.
"""

from __future__ import annotations

import hashlib
import marshal
import os
import sys
from functools import lru_cache
from pathlib import Path

from migrations_policy import __version__
from migrations_policy.lint.script.headers import Header, header_of_bytes

ENV = "MIGRATIONS_POLICY_CACHE_DIR"
DEFAULT_DIR = ".migrations_policy_cache"
FILENAME = "lint-v5.marshal"
MAX_ENTRIES = 20000
_DIGEST = 32  # bytes of the sha256 that precedes the payload


@lru_cache(maxsize=1)
def fingerprint() -> str:
    package = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256(f"{__version__}|{sys.implementation.cache_tag}".encode())
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
        self.files: dict[str, list] = {}
        self.results: dict[str, list] = {}
        self.dirty = False
        self._index_mtime = 0  # entries stamped at or after it are racy
        self._seen: dict[str, list | None] = {}  # this run's answer per path as given
        self._cwd = os.getcwd()
        if directory is not None:
            self._load(directory / FILENAME)

    def _load(self, path: Path) -> None:
        try:
            with open(path, "rb") as fh:
                index_mtime = os.fstat(fh.fileno()).st_mtime_ns
                data = fh.read()
            digest, payload = data[:_DIGEST], data[_DIGEST:]
            if len(digest) != _DIGEST or hashlib.sha256(payload).digest() != digest:
                return  # damaged: ignored, and rewritten whole by save()
            loaded = marshal.loads(payload)
        except (OSError, ValueError, EOFError, TypeError):
            return
        if isinstance(loaded, tuple) and len(loaded) == 3 and loaded[0] == fingerprint():
            files, results = loaded[1], loaded[2]
            if isinstance(files, dict) and isinstance(results, dict):
                self.files, self.results, self._index_mtime = files, results, index_mtime

    def _entry(self, path: Path) -> list | None:
        """[mtime, ctime, size, inode, sha256, header] of *path* now; None when it cannot be read."""
        given = str(path)
        if given in self._seen:
            return self._seen[given]
        name = os.path.normpath(os.path.join(self._cwd, given))  # os.path.abspath without a getcwd() per file
        entry = None
        try:
            stamp = self._stamp(name)
            entry = self.files.get(name)
            if not (isinstance(entry, list) and len(entry) == 7 and entry[:4] == stamp and self._fresh(stamp)
                    and all(self._stamp(dep) == dep_stamp and self._fresh(dep_stamp) for dep, dep_stamp in entry[6])):
                with open(name, "rb") as fh:
                    data = fh.read()
                consulted: list[str] = []
                header = header_of_bytes(data, Path(name), consulted)
                entry = stamp + [hashlib.sha256(data).hexdigest(),
                                 [header.revision, list(header.down_revisions), list(header.branch_labels),
                                  header.requires_data, header.declared, list(header.depends_on)],
                                 [[dep, self._stamp(dep)] for dep in dict.fromkeys(consulted)]]
                self.files.pop(name, None)
                self.files[name] = entry
                self.dirty = True
        except (OSError, ValueError, TypeError):
            entry = None
        self._seen[given] = entry
        return entry

    @staticmethod
    def _stamp(name: str) -> list[int] | None:
        """[mtime, ctime, size, inode] of *name*; None when it is gone."""
        try:
            stat = os.stat(name)
        except OSError:
            return None
        return [stat.st_mtime_ns, stat.st_ctime_ns, stat.st_size, stat.st_ino]

    def _fresh(self, stamp: list[int] | None) -> bool:
        """Whether *stamp* is older than the index (else "racy": it may have changed within the same tick)."""
        return stamp is not None and max(stamp[:2]) < self._index_mtime

    def header(self, path: Path) -> Header | None:
        """The revision header of *path* (from the index when the file is unchanged)."""
        entry = self._entry(path)
        if entry is None:
            return None
        revision, downs, labels, requires_data, declared, *depends = entry[5]  # an older index has no depends_on
        return Header(revision, tuple(downs), tuple(labels), requires_data, declared, tuple(*depends))

    def digest(self, path: Path) -> str | None:
        """The sha256 of *path*'s bytes; None when it cannot be read."""
        entry = self._entry(path)
        return entry[4] if entry is not None else None

    @staticmethod
    def key(digest: str, *parts: str) -> str:
        """The results key of content *digest* linted with *parts* (phase, options); the fingerprint
        is the whole file's."""
        return "\0".join((digest, *parts))

    def get(self, key: str) -> list | None:
        """The cached hits of *key*, unless a local module the script imported has changed since."""
        if self.directory is None:
            return None
        found = self.results.get(key)
        if not (isinstance(found, list) and len(found) == 2):
            return None
        hits, modules = found
        for path, digest in modules:  # digest "" (reads.ABSENT): a file read while absent, still absent
            if (self.digest(Path(path)) or "") != digest:
                return None
        return hits

    def put(self, key: str, hits: list, modules: list[tuple[str, str]] = ()) -> None:
        """Store *hits* for *key*, valid while each of *modules* (path, sha256) is unchanged."""
        if self.directory is not None:
            self.results.pop(key, None)
            self.results[key] = [hits, [list(module) for module in modules]]
            self.dirty = True

    def save(self) -> None:
        if self.directory is None or not self.dirty:
            return
        files = dict(list(self.files.items())[-MAX_ENTRIES:])
        results = dict(list(self.results.items())[-MAX_ENTRIES:])
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            ignore = self.directory / ".gitignore"
            if not ignore.exists():
                ignore.write_text("# created by migrations-policy lint\n*\n")
            # (a name of its own, created exclusively: what ``tempfile.mkstemp`` does, without importing tempfile)
            tmp = self.directory / f".lint-{os.getpid()}-{os.urandom(6).hex()}.tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o600)
            with os.fdopen(fd, "wb") as fh:
                payload = marshal.dumps((fingerprint(), files, results))
                fh.write(hashlib.sha256(payload).digest() + payload)
            os.replace(tmp, self.directory / FILENAME)
        except OSError:
            pass  # a read-only checkout lints fine, only slower
