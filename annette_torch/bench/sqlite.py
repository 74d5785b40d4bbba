"""One way to open the project's SQLite files (measurement store, measurement cache): what an existing file
is, read without changing it (missing, empty, one of ours, another program's database, not a database at
all, corrupt); the connection pragmas, schema creation and version check, transactions and closing."""

from __future__ import annotations

import os
import sqlite3
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from ..errors import AnnetteError

__all__ = ["SQLiteFile", "FileState", "inspect_file", "check_file", "sqlite_pragma", "SQLITE_HEADER",
           "SQLITE_TIMEOUT"]

_File = TypeVar("_File", bound="SQLiteFile")

#: the first 16 bytes of every SQLite 3 database file
SQLITE_HEADER = b"SQLite format 3\x00"
#: seconds a connection waits for a lock (SQLite's busy timeout, and `sqlite_pragma`'s retries)
SQLITE_TIMEOUT = 60.0


def sqlite_pragma(con: Any, pragma: str, timeout: float = SQLITE_TIMEOUT) -> None:
    """Execute ``PRAGMA pragma`` on a DB-API SQLite connection, retrying while the database is locked.

    Two connections switching a new database to WAL at once both hold a shared lock and want an exclusive
    one; SQLite then fails one of them at once ("database is locked") instead of calling its busy handler,
    so two workers starting on a new file could lose that race. The pragma is retried until ``timeout``.
    """
    deadline, delay = time.monotonic() + timeout, 0.005
    while True:
        try:
            con.execute(f"PRAGMA {pragma}")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e).lower() or time.monotonic() + delay > deadline:
                raise
            time.sleep(delay)
            delay = min(2 * delay, 0.25)


@dataclass(frozen=True)
class FileState:
    """What is at a path before anything is written there: ``exists``, ``size`` in bytes and, for an SQLite
    file, its tables (``tables`` is empty for a missing, empty or table-less file)."""

    exists: bool
    size: int
    tables: frozenset[str]

    @property
    def blank(self) -> bool:
        """Nothing worth keeping: no file, 0 bytes, or an SQLite file without tables."""
        return not self.exists or self.size == 0 or not self.tables


def inspect_file(path: str, error: type[AnnetteError], description: str) -> FileState:
    """Read ``path``'s header and table list through a read-only connection (the file is never modified:
    no schema, no journal mode change). A file that is not an SQLite database, or whose first pages are
    corrupt, raises ``error`` with one line."""
    if not os.path.exists(path):
        return FileState(False, 0, frozenset())
    if os.path.isdir(path):
        raise error(f"{path}: is a folder, not a {description}")
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(len(SQLITE_HEADER))
    except OSError as e:
        raise error(f"{path}: cannot read ({e.strerror or e})") from None
    if size == 0:
        return FileState(True, 0, frozenset())
    if head != SQLITE_HEADER:
        raise error(f"{path}: not a {description} (not an SQLite database); give another file")
    uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro"
    try:
        con = sqlite3.connect(uri, uri=True, timeout=30)
        try:
            tables = frozenset(r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'"))
        finally:
            con.close()
    except sqlite3.DatabaseError as e:
        raise error(f"{path}: corrupt {description} ({e})") from None
    return FileState(True, size, tables)


def check_file(path: str, marker: str, error: type[AnnetteError], description: str, create: bool) -> FileState:
    """`inspect_file` plus the decision: a file holding table ``marker`` is ours; a blank one (missing, 0 bytes,
    no tables) is accepted only when ``create``; a database of another program is refused, untouched."""
    state = inspect_file(path, error, description)
    if state.blank:
        if not create:
            if not state.exists:
                raise error(f"{path}: no such {description}")
            if state.size == 0:
                raise error(f"{path}: empty file (0 bytes), not a {description}")
            raise error(f"{path}: an SQLite database without tables, not a {description}")
        return state
    if marker not in state.tables:
        shown = ", ".join(sorted(state.tables)[:6]) + (", ..." if len(state.tables) > 6 else "")
        raise error(f"{path}: an SQLite database of another program (tables: {shown}), not a {description}; "
                    "it was left untouched")
    return state


class SQLiteFile:
    """An SQLite file, created with ``schema`` on first use; a subclass names its schema, pragmas and errors.

    ``marker`` is a table every such file has: an existing SQLite file without it is another program's and
    is refused before anything is written to it. ``description`` ends the messages (``"<path>: not a
    <description> (...)"``); with ``schema_version`` set, the schema's ``meta`` table records it and a file
    written by a newer release is refused (``"<path>: <kind> schema N is newer ..."``).
    """

    schema: ClassVar[str] = ""
    marker: ClassVar[str] = ""
    pragmas: ClassVar[tuple[str, ...]] = ("journal_mode=WAL",)
    error: ClassVar[type[AnnetteError]] = AnnetteError
    description: ClassVar[str] = "database"
    kind: ClassVar[str] = "database"
    schema_version: ClassVar[int | None] = None

    def __init__(self, path: str | os.PathLike, create: bool = True) -> None:
        self.path = os.fspath(path)
        d = os.path.dirname(os.path.abspath(self.path))
        if not os.path.isdir(d):
            raise self.error(f"{self.path}: folder {d} does not exist")
        check_file(self.path, self.marker, self.error, self.description, create)
        try:
            self.db = sqlite3.connect(self.path, timeout=30)
            for pragma in self.pragmas:
                sqlite_pragma(self.db, pragma, timeout=30)
            self.db.executescript(self.schema)
            if self.schema_version is not None:
                self._check_version(self.schema_version)
            self.upgrade()
        except sqlite3.DatabaseError as e:
            raise self.error(f"{self.path}: not a {self.description} ({e})") from None

    def _check_version(self, version: int) -> None:
        """Record ``version`` in a new file's ``meta`` table; refuse a file of a newer schema."""
        row = self.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if row is None:
            with self.transaction():
                self.db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(version),))
        elif int(row[0]) > version:
            raise self.error(f"{self.path}: {self.kind} schema {row[0]} is newer than this annette-torch ({version})")

    def upgrade(self) -> None:
        """Bring a file written by an older release up to date (columns added since); nothing by default."""

    def column_names(self, table: str) -> set[str]:
        """The columns ``table`` has in this file."""
        return {r[1] for r in self.db.execute(f"PRAGMA table_info({table})")}

    def transaction(self) -> sqlite3.Connection:
        """Context manager of one transaction: committed when the block ends, rolled back if it raises."""
        return self.db

    def close(self) -> None:
        self.db.close()

    def __enter__(self: _File) -> _File:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
