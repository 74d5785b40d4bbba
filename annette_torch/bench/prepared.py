"""Statements compiled once and executed straight on the database driver's connection.

A sweep writes twice per configuration (its claim, then its result). SQLAlchemy's execution machinery
costs a few tenths of a millisecond per statement, a visible share of a micro-kernel's few milliseconds; so
these writes render their SQL once with SQLAlchemy for the store's dialect and then run it on the driver's
cursor, in a transaction begun the way `store.Store.transaction` begins them.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

__all__ = ["Prepared", "RawTransaction"]


class Prepared:
    """A Core statement rendered once for ``dialect`` (``column_keys``: the columns an INSERT without values
    will be given); `args` turns named parameters into what the driver takes."""

    def __init__(self, stmt: Any, dialect: Any, column_keys: Sequence[str] | None = None) -> None:
        self.compiled = stmt.compile(dialect=dialect, column_keys=list(column_keys) if column_keys else None)
        self.sql = self.compiled.string
        self.order = self.compiled.positiontup if dialect.positional else None

    def args(self, params: Mapping[str, Any]) -> Any:
        """The driver's parameters: the given ones plus the statement's own literals, by position or name."""
        full = self.compiled.construct_params(dict(params))
        return [full[k] for k in self.order] if self.order is not None else full


class RawTransaction:
    """One write transaction on a driver connection (SQLite: ``BEGIN IMMEDIATE``, the write lock at once;
    PostgreSQL: the driver's implicit transaction); `commit` or `rollback` ends it."""

    def __init__(self, dbapi_con: Any, sqlite: bool) -> None:
        self.con, self.sqlite = dbapi_con, sqlite
        self.cur = dbapi_con.cursor()
        if sqlite:
            self.cur.execute("BEGIN IMMEDIATE")

    def execute(self, p: Prepared, params: Mapping[str, Any]) -> Any:
        """Run ``p``; returns the cursor (to fetch RETURNING rows)."""
        self.cur.execute(p.sql, p.args(params))
        return self.cur

    def first(self, p: Prepared, params: Mapping[str, Any]) -> Any:
        """Run ``p`` and return its first row (None when there is none)."""
        return self.execute(p, params).fetchone()

    def executemany(self, p: Prepared, rows: Iterable[Mapping[str, Any]]) -> None:
        self.cur.executemany(p.sql, [p.args(r) for r in rows])

    def scalar_sql(self, sql: str) -> Any:
        """The first column of the first row of a fixed query."""
        self.cur.execute(sql)
        return self.cur.fetchone()[0]

    def commit(self) -> None:
        self.con.commit()
        self.cur.close()

    def rollback(self) -> None:
        try:
            self.con.rollback()
        finally:
            self.cur.close()
