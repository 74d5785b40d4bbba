"""Measurement store: every benchmark run, configuration and per-layer record, in an SQLite file (the default)
or a database server named by a URL (PostgreSQL), through SQLAlchemy Core.

Append-only and crash-safe: a configuration's row and all its layer rows are written in one transaction, so
a run killed at any moment leaves either the whole configuration or nothing of it. A configuration is
stored once per platform and suite: storing it again is a no-op (a failed one is replaced), so several
workers and re-runs never duplicate it. Opening a file checks what it is before anything is written: a
database of another program, an empty file (unless a new store is wanted) or a corrupt one is one error line
and stays untouched. Passwords in URLs never appear in messages.
"""

from __future__ import annotations

import csv
import json
import logging
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Sequence

from sqlalchemy import Connection, Float, Integer, Text, bindparam, delete, event, func, inspect, select, text, update
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, SQLAlchemyError

from ..atomic import atomic_write
from ..dburl import driver_error, driver_url, is_url, mask_url
from ..errors import AnnetteError
from . import schema as S
from .prepared import Prepared, RawTransaction
from .records import LayerRecord
from .sqlite import SQLITE_TIMEOUT, check_file, sqlite_pragma

__all__ = ["Store", "StoreError", "ConfigResult", "EXPORT_COLUMNS", "SCHEMA_VERSION"]

log = logging.getLogger(__name__)

SCHEMA_VERSION = S.SCHEMA_VERSION
DESCRIPTION = "measurement store"

#: Columns of ``annette bench export`` (one row per measured layer; one row per failed configuration).
EXPORT_COLUMNS = ("platform", "suite", "config_id", "status", "layer", "layer_type", "fused", "fused_into",
                  "node", "node_type", "exec_kind", "time_ms", "min_ms", "std_ms", "e2e_median_ms", "params",
                  "error")

#: the columns `Store.add` writes
_CONFIG_COLUMNS = ("run_id", "platform", "suite", "config_id", "params", "status", "error", "e2e_median_ms",
                   "e2e_min_ms", "e2e_std_ms", "iterations", "seconds", "finished")
_LAYER_COLUMNS = ("config", "idx", "layer", "layer_type", "fused", "fused_into", "node", "node_type", "exec_kind",
                  "time_ms", "min_ms", "std_ms", "absorbed", "params")
#: SQLite connection settings: write-ahead log (readers never block the writer), foreign keys on
_SQLITE_PRAGMAS = ("journal_mode=WAL", "synchronous=NORMAL", "foreign_keys=ON")
#: held while a PostgreSQL store's schema is created or upgraded (several workers may open a new one at once)
_PG_SCHEMA_LOCK = 0x616E6E65


class StoreError(AnnetteError):
    """The measurement store cannot be opened or read, or is not one of ours."""


@dataclass
class ConfigResult:
    """Everything measured for one configuration (or why it failed)."""

    suite: str
    config_id: str
    params: dict[str, Any]
    status: str
    layers: Sequence[LayerRecord] = ()
    error: str | None = None
    e2e_median_ms: float | None = None
    e2e_min_ms: float | None = None
    e2e_std_ms: float | None = None
    iterations: int | None = None
    seconds: float | None = None


def _sqlite_path(target: str) -> str | None:
    """The file of an SQLite store (a plain path or an ``sqlite:///`` URL); None for a database server."""
    if not is_url(target):
        return target
    if not target.lower().startswith("sqlite"):
        return None
    try:
        db = make_url(target).database
    except ArgumentError:
        raise StoreError(f"{mask_url(target)}: not a database URL") from None
    if not db or db == ":memory:":
        raise StoreError(f"{target}: an SQLite store needs a file (sqlite:///path/to/store.sqlite)")
    return db


class Store:
    """A measurement store: an SQLite file path (created on first use) or a database URL such as
    ``postgresql://user:password@host/db`` (its tables created on first use).

    ``create=False`` (reading commands: status, export) refuses a missing or empty file instead of starting
    a new store there.
    """

    def __init__(self, target: str | os.PathLike, create: bool = True) -> None:
        self.target = os.fspath(target)
        #: how messages name the store (password masked)
        self.label = mask_url(self.target)
        self.path = _sqlite_path(self.target)
        #: statements built once and executed many times (claims, `add`)
        self.statements: dict[Any, Any] = {}
        self._writer: Connection | None = None
        self._writing = False
        if self.path is not None:
            folder = os.path.dirname(os.path.abspath(self.path))
            if not os.path.isdir(folder):
                raise StoreError(f"{self.path}: folder {folder} does not exist")
            self.label = self.path
            check_file(self.path, "meta", StoreError, DESCRIPTION, create)
            url: str | URL = URL.create("sqlite", database=os.path.abspath(self.path))
        else:
            url = driver_url(self.target)
        self.engine = self._engine(url)
        self.dialect = self.engine.dialect.name
        if self.dialect not in ("sqlite", "postgresql"):
            self.engine.dispose()
            raise StoreError(f"{self.label}: {self.dialect} is not supported; give an SQLite file or a "
                             "postgresql:// URL")
        try:
            self._open(create)
        except BaseException:
            self.engine.dispose()
            raise

    # ------------------------------------------------------------------------------------------ connection
    def _engine(self, url: str | URL) -> Engine:
        from sqlalchemy import create_engine
        try:
            if self.path is None:
                return create_engine(url, pool_pre_ping=True, pool_size=2, max_overflow=2)
            engine = create_engine(url, connect_args={"timeout": SQLITE_TIMEOUT})
        except (NoSuchModuleError, ImportError) as e:
            raise driver_error(str(url), e, DESCRIPTION) from None
        except ArgumentError as e:
            raise StoreError(f"{self.label}: not a database URL ({mask_url(e)})") from None

        @event.listens_for(engine, "connect")
        def _connect(dbapi_con: Any, _record: Any) -> None:
            dbapi_con.isolation_level = None  # transactions are begun explicitly, below
            for pragma in _SQLITE_PRAGMAS:
                sqlite_pragma(dbapi_con, pragma)

        @event.listens_for(engine, "begin")
        def _begin(conn: Connection) -> None:
            # a writer takes the write lock at once: two workers never deadlock upgrading a read lock
            conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get("annette_write") else "BEGIN")

        return engine

    def _error(self, e: BaseException) -> StoreError:
        """One line for a database error (the driver's first line, password masked)."""
        orig = getattr(e, "orig", None) or e
        first = (str(orig).strip().splitlines() or [type(orig).__name__])[0]
        low = first.lower()
        if self.path is not None and ("malformed" in low or "not a database" in low or "disk i/o" in low):
            return StoreError(f"{self.label}: corrupt {DESCRIPTION} ({first})")
        if "locked" in low:
            return StoreError(f"{self.label}: {DESCRIPTION} locked by another process for too long ({first})")
        return StoreError(f"{self.label}: {mask_url(first)}")

    def _writer_connection(self) -> Connection:
        """The connection writes go through, kept open (a sweep writes twice per configuration); a new one
        after the old one was lost."""
        if self._writer is None or self._writer.closed or self._writer.invalidated:
            self._writer = self.engine.connect().execution_options(annette_write=True)
        return self._writer

    @contextmanager
    def transaction(self, write: bool = True) -> Iterator[Connection]:
        """One transaction: committed when the block ends, rolled back if it raises. Reads use pooled
        connections (one may still be iterating while a write happens); database errors become one-line
        `StoreError` s."""
        try:
            if write and not self._writing:
                conn = self._writer_connection()
                self._writing = True
                try:
                    with conn.begin():
                        yield conn
                finally:
                    self._writing = False
                return
            with self.engine.connect() as conn:
                if write:
                    conn.execution_options(annette_write=True)
                with conn.begin():
                    yield conn
        except SQLAlchemyError as e:
            raise self._error(e) from None

    def prepared(self, key: Any, build: Callable[[], Any], column_keys: Sequence[str] | None = None) -> Prepared:
        """The statement ``build()`` rendered once for this store's dialect (cached under ``key``)."""
        if key not in self.statements:
            self.statements[key] = Prepared(build(), self.engine.dialect, column_keys)
        return self.statements[key]

    @contextmanager
    def raw_transaction(self) -> Iterator[RawTransaction]:
        """A write transaction executing `prepared` statements on the driver connection (the per-configuration
        writes of a sweep); errors become one-line `StoreError` s."""
        dbapi_error = self.engine.dialect.loaded_dbapi.Error
        try:
            conn = self._writer_connection()
            if self._writing or conn.in_transaction():
                raise StoreError(f"{self.label}: a write is already in progress on this store")
            tx = RawTransaction(conn.connection.dbapi_connection, self.dialect == "sqlite")
        except SQLAlchemyError as e:
            raise self._error(e) from None
        except dbapi_error as e:
            raise self._error(e) from None
        try:
            yield tx
            tx.commit()
        except BaseException as e:
            try:
                tx.rollback()
            except dbapi_error:  # the connection is gone: open a new one next time
                conn.invalidate()
            if isinstance(e, dbapi_error):
                raise self._error(e) from None
            raise

    def raw_clock(self, tx: RawTransaction) -> float:
        """`clock` inside a `raw_transaction`."""
        if self.dialect == "postgresql":
            return float(tx.scalar_sql("SELECT EXTRACT(EPOCH FROM clock_timestamp())"))
        return time.time()

    def clock(self, conn: Connection) -> float:
        """Seconds since the epoch by the store's clock: the server's for a database server (every worker
        compares leases with one clock), this machine's for an SQLite file."""
        if self.dialect == "postgresql":
            return float(conn.execute(text("SELECT EXTRACT(EPOCH FROM clock_timestamp())")).scalar_one())
        return time.time()

    def insert(self, table: Any) -> Any:
        """An INSERT of ``table`` with this dialect's ON CONFLICT clauses."""
        if self.dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert
        return insert(table)

    # -------------------------------------------------------------------------------------------- schema
    def _open(self, create: bool) -> None:
        """Check what the database holds (reading only), then create or upgrade the schema as needed."""
        with self.transaction(write=False) as c:
            version, names = self._version(c)
        if version == SCHEMA_VERSION:
            return
        if version is not None and version > SCHEMA_VERSION:
            raise StoreError(f"{self.label}: {DESCRIPTION} schema {version} is newer than this annette-torch "
                             f"({SCHEMA_VERSION}); upgrade annette-torch")
        if version is None:
            self._refuse_foreign(names, create)
        with self.transaction() as c:
            if self.dialect == "postgresql":
                c.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_SCHEMA_LOCK})
            version, names = self._version(c)  # another worker may have created or upgraded it meanwhile
            if version is None:
                self._refuse_foreign(names, create)
                S.metadata.create_all(c)
                c.execute(S.meta.insert(), [{"key": "schema_version", "value": str(SCHEMA_VERSION)},
                                            {"key": "kind", "value": S.STORE_KIND}])
                log.info("%s: new %s", self.label, DESCRIPTION)
            elif version < SCHEMA_VERSION:
                self._upgrade(c, version)

    def _version(self, c: Connection) -> tuple[int | None, set[str]]:
        """(schema version or None when the database holds no store, its table names)."""
        names = set(inspect(c).get_table_names())
        if not {"meta", "configs"} <= names:
            return None, names
        row = c.execute(select(S.meta.c.value).where(S.meta.c.key == "schema_version")).first()
        try:
            return (int(row[0]) if row is not None else None), names
        except ValueError:
            return None, names

    def _refuse_foreign(self, names: set[str], create: bool) -> None:
        """No store here: refuse a database that holds tables of ours without being a store (another program's
        ``meta`` or ``configs``), or any existing database when nothing may be created."""
        if self.path is not None and names:
            shown = ", ".join(sorted(names)[:6]) + (", ..." if len(names) > 6 else "")
            raise StoreError(f"{self.label}: an SQLite database of another program (tables: {shown}), not a "
                             f"{DESCRIPTION}; it was left untouched")
        if names & S.TABLES:
            raise StoreError(f"{self.label}: the database has tables named like a {DESCRIPTION}'s "
                             f"({', '.join(sorted(names & S.TABLES))}) but is not one; it was left untouched")
        if not create:
            raise StoreError(f"{self.label}: no {DESCRIPTION} there yet")

    def _upgrade(self, c: Connection, version: int) -> None:
        """Bring an older store up to `SCHEMA_VERSION` in place (inside the caller's transaction)."""
        if version < 2:
            cols = {col["name"] for col in inspect(c).get_columns("runs")}
            for name in ("worker", "machine"):
                if name not in cols:
                    c.execute(text(f"ALTER TABLE runs ADD COLUMN {name} TEXT"))
            S.metadata.create_all(c, tables=[S.claims, S.plan])
            c.execute(self.insert(S.meta).values(key="kind", value=S.STORE_KIND).on_conflict_do_nothing())
        c.execute(update(S.meta).where(S.meta.c.key == "schema_version").values(value=str(SCHEMA_VERSION)))
        log.info("%s: %s upgraded from schema %d to %d", self.label, DESCRIPTION, version, SCHEMA_VERSION)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        self.engine.dispose()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -------------------------------------------------------------------------------------------- writing
    def start_run(self, platform: str, runner: str, toolchain: dict[str, Any], fingerprint: dict[str, Any],
                  worker: str | None = None, machine: str | None = None) -> int:
        """Record the start of a sweep (by ``worker`` on ``machine``); returns the run id its configurations
        refer to."""
        from .. import __version__
        with self.transaction() as c:
            res = c.execute(S.runs.insert().values(
                platform=platform, runner=runner, toolchain=json.dumps(toolchain, sort_keys=True),
                fingerprint=json.dumps(fingerprint, sort_keys=True), started=time.time(),
                annette_version=__version__, worker=worker, machine=machine))
            return int(res.inserted_primary_key[0])

    def add(self, run_id: int, platform: str, result: ConfigResult, replace: bool = False) -> bool:
        """Store one configuration and its layer records atomically (all or nothing); returns whether it was
        stored. A configuration already stored as measured is kept (False: another worker or an earlier run
        has it) unless ``replace``, in the same transaction; one stored as failed is replaced. A claim on a configuration stored as measured is over (no
        claim statement takes a stored one); one stored as failed is marked so (``--retry-failed`` may take it)."""
        r = result
        cf, la, cl = S.configs, S.layers, S.claims

        def key(t: Any) -> Any:
            return ((t.c.platform == bindparam("k_platform", type_=Text))
                    & (t.c.suite == bindparam("k_suite", type_=Text))
                    & (t.c.config_id == bindparam("k_config_id", type_=Text)))

        insert = self.prepared("add.insert", lambda: self.insert(cf).on_conflict_do_nothing(
            index_elements=["platform", "suite", "config_id"]).returning(cf.c.id), _CONFIG_COLUMNS)
        k = {"k_platform": platform, "k_suite": r.suite, "k_config_id": r.config_id}
        row = {"run_id": run_id, "platform": platform, "suite": r.suite, "config_id": r.config_id,
               "params": json.dumps(r.params, sort_keys=True), "status": r.status, "error": r.error,
               "e2e_median_ms": r.e2e_median_ms, "e2e_min_ms": r.e2e_min_ms, "e2e_std_ms": r.e2e_std_ms,
               "iterations": r.iterations, "seconds": r.seconds, "finished": time.time()}
        with self.raw_transaction() as tx:
            got = tx.first(insert, row)
            state = r.status
            if got is None:  # stored already: a failed one is replaced, a measured one kept
                old = tx.first(self.prepared("add.old", lambda: select(cf.c.id, cf.c.status).where(key(cf))), k)
                if old is not None and (old[1] == "failed" or replace):
                    drop = {"k_id": old[0]}
                    tx.execute(self.prepared("add.drop_layers", lambda: delete(la).where(
                        la.c.config == bindparam("k_id", type_=Integer))), drop)
                    tx.execute(self.prepared("add.drop_config", lambda: delete(cf).where(
                        cf.c.id == bindparam("k_id", type_=Integer))), drop)
                    got = tx.first(insert, row)
                elif old is not None:
                    state = old[1]
            if got is not None and r.layers:
                tx.executemany(self.prepared("add.layers", la.insert, _LAYER_COLUMNS), [
                    {"config": got[0], "idx": i, "layer": L.layer, "layer_type": L.layer_type, "fused": L.fused,
                     "fused_into": L.fused_into, "node": L.node, "node_type": L.node_type, "exec_kind": L.exec_kind,
                     "time_ms": L.time_ms, "min_ms": L.min_ms, "std_ms": L.std_ms,
                     "absorbed": json.dumps(list(L.absorbed)), "params": json.dumps(L.params, sort_keys=True)}
                    for i, L in enumerate(r.layers)])
            if state == "failed":  # a measured configuration's claim needs no settling: being stored ends it
                settle = self.prepared("add.settle", lambda: update(cl).where(key(cl)).values(
                    state=bindparam("state", type_=Text), heartbeat=bindparam("k_now", type_=Float),
                    lease_until=bindparam("k_now", type_=Float)))
                tx.execute(settle, {**k, "state": state, "k_now": self.raw_clock(tx)})
        return got is not None

    # -------------------------------------------------------------------------------------------- reading
    def done(self, platform: str, suite: str, include_failed: bool = True) -> set[str]:
        """Config ids already stored for this platform and suite (skipped on resume)."""
        q = select(S.configs.c.config_id).where((S.configs.c.platform == platform) & (S.configs.c.suite == suite))
        if not include_failed:
            q = q.where(S.configs.c.status == "ok")
        with self.transaction(write=False) as c:
            return {row[0] for row in c.execute(q)}

    def counts(self, platform: str | None = None) -> dict[tuple[str, str], dict[str, int]]:
        """(platform, suite) -> {'ok': n, 'failed': m}."""
        t = S.configs
        q = select(t.c.platform, t.c.suite, t.c.status, func.count()).group_by(t.c.platform, t.c.suite, t.c.status)
        if platform:
            q = q.where(t.c.platform == platform)
        out: dict[tuple[str, str], dict[str, int]] = {}
        with self.transaction(write=False) as c:
            for p, s, st, n in c.execute(q):
                out.setdefault((p, s), {"ok": 0, "failed": 0})[st] = int(n)
        return out

    def e2e_medians(self, platform: str, suite: str | None = None) -> dict[tuple[str, str], float | None]:
        """(suite, config_id) -> end-to-end median (ms) of every measured configuration of ``platform``."""
        t = S.configs
        q = select(t.c.suite, t.c.config_id, t.c.e2e_median_ms).where((t.c.platform == platform) & (t.c.status == "ok"))
        if suite:
            q = q.where(t.c.suite == suite)
        with self.transaction(write=False) as c:
            return {(s, cid): m for s, cid, m in c.execute(q)}

    def rows(self, platform: str | None = None, suite: str | None = None) -> Iterator[dict[str, Any]]:
        """Export rows: one per measured layer, one per failed configuration (columns `EXPORT_COLUMNS`)."""
        c_, l_ = S.configs.alias("c"), S.layers.alias("l")
        q = (select(c_.c.platform, c_.c.suite, c_.c.config_id, c_.c.status, l_.c.layer, l_.c.layer_type, l_.c.fused,
                    l_.c.fused_into, l_.c.node, l_.c.node_type, l_.c.exec_kind, l_.c.time_ms, l_.c.min_ms,
                    l_.c.std_ms, c_.c.e2e_median_ms, c_.c.params, c_.c.error)
             .select_from(c_.outerjoin(l_, l_.c.config == c_.c.id)).order_by(c_.c.id, l_.c.idx))
        if platform:
            q = q.where(c_.c.platform == platform)
        if suite:
            q = q.where(c_.c.suite == suite)
        with self.transaction(write=False) as c:
            for row in c.execution_options(yield_per=2000).execute(q):
                yield dict(zip(EXPORT_COLUMNS, row))

    def export_csv(self, out: str | os.PathLike, platform: str | None = None, suite: str | None = None) -> int:
        """Write `rows` to a CSV file; returns the number of data rows. Written atomically: if reading the store
        fails half-way, an existing ``out`` is left as it was."""
        n = 0
        with atomic_write(out, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(EXPORT_COLUMNS))
            w.writeheader()
            for r in self.rows(platform, suite):
                w.writerow(r)
                n += 1
        return n

    def runs(self) -> list[dict[str, Any]]:
        """All runs with their toolchain and machine fingerprint."""
        cols = ("id", "platform", "runner", "toolchain", "fingerprint", "started", "annette_version", "worker",
                "machine")
        with self.transaction(write=False) as c:
            rows = c.execute(select(*(S.runs.c[k] for k in cols)).order_by(S.runs.c.id)).all()
        out = []
        for row in rows:
            d = dict(zip(cols, row))
            d["toolchain"], d["fingerprint"] = json.loads(d["toolchain"]), json.loads(d["fingerprint"])
            out.append(d)
        return out

    def layer_records(self, platform: str, suite: str | None = None,
                      status: str = "ok") -> Iterable[tuple[str, str, dict[str, Any], LayerRecord]]:
        """(suite, config_id, params, LayerRecord) for every stored layer (input to the model generator)."""
        c_, l_ = S.configs.alias("c"), S.layers.alias("l")
        q = (select(c_.c.suite, c_.c.config_id, c_.c.params, l_.c.layer, l_.c.layer_type, l_.c.fused,
                    l_.c.fused_into, l_.c.node, l_.c.node_type, l_.c.exec_kind, l_.c.time_ms, l_.c.min_ms,
                    l_.c.std_ms, l_.c.absorbed, l_.c.params)
             .select_from(c_.join(l_, l_.c.config == c_.c.id))
             .where((c_.c.platform == platform) & (c_.c.status == status)).order_by(c_.c.id, l_.c.idx))
        if suite:
            q = q.where(c_.c.suite == suite)
        with self.transaction(write=False) as c:
            for row in c.execution_options(yield_per=2000).execute(q):
                s, cid, params = row[0], row[1], json.loads(row[2])
                L = LayerRecord(*row[3:13], absorbed=tuple(json.loads(row[13] or "[]")),
                                params=json.loads(row[14] or "{}"))
                yield s, cid, params, L
