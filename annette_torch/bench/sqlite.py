"""One way to open the project's SQLite files (benchmark store, measurement cache): the folder check, the
connection pragmas, schema creation and version check, transactions and closing."""

from __future__ import annotations

import os
import sqlite3
from typing import ClassVar, TypeVar

from ..errors import AnnetteError

__all__ = ["SQLiteFile"]

_File = TypeVar("_File", bound="SQLiteFile")


class SQLiteFile:
    """An SQLite file, created with ``schema`` on first use; a subclass names its schema, pragmas and errors.

    ``description`` ends the message for a file that is not such a database (``"<path>: not a
    <description> (...)"``); with ``schema_version`` set, the schema's ``meta`` table records it and a file
    written by a newer release is refused (``"<path>: <kind> schema N is newer ..."``).
    """

    schema: ClassVar[str] = ""
    pragmas: ClassVar[tuple[str, ...]] = ("journal_mode=WAL",)
    error: ClassVar[type[AnnetteError]] = AnnetteError
    description: ClassVar[str] = "database"
    kind: ClassVar[str] = "database"
    schema_version: ClassVar[int | None] = None

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.fspath(path)
        d = os.path.dirname(os.path.abspath(self.path))
        if not os.path.isdir(d):
            raise self.error(f"{self.path}: folder {d} does not exist")
        try:
            self.db = sqlite3.connect(self.path, timeout=30)
            for pragma in self.pragmas:
                self.db.execute(f"PRAGMA {pragma}")
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
