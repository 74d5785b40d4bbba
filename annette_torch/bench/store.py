"""Measurement store: one SQLite file holding every benchmark run, configuration and per-layer record.

Append-only and crash-safe: a configuration's row and all its layer rows are written in one transaction,
so a run killed at any moment leaves either the whole configuration or nothing of it. Re-running a suite
skips configurations already stored for the same platform (resumable).
"""

from __future__ import annotations

import csv
import json
import os
import time
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Sequence

from ..errors import AnnetteError
from .records import LayerRecord
from .sqlite import SQLiteFile

__all__ = ["Store", "StoreError", "ConfigResult", "EXPORT_COLUMNS"]

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    platform TEXT NOT NULL,
    runner TEXT NOT NULL,
    toolchain TEXT NOT NULL,          -- JSON: name, version, settings
    fingerprint TEXT NOT NULL,        -- JSON: cpu model, cores, threads, os, python
    started REAL NOT NULL,
    annette_version TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS configs (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    platform TEXT NOT NULL,
    suite TEXT NOT NULL,
    config_id TEXT NOT NULL,
    params TEXT NOT NULL,             -- JSON of the configuration
    status TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
    error TEXT,
    e2e_median_ms REAL, e2e_min_ms REAL, e2e_std_ms REAL,
    iterations INTEGER,
    seconds REAL,                     -- wall time spent on this configuration
    finished REAL NOT NULL,
    UNIQUE (platform, suite, config_id)
);
CREATE TABLE IF NOT EXISTS layers (
    config INTEGER NOT NULL REFERENCES configs(id),
    idx INTEGER NOT NULL,
    layer TEXT NOT NULL, layer_type TEXT NOT NULL, fused TEXT NOT NULL, fused_into TEXT,
    node TEXT, node_type TEXT, exec_kind TEXT,
    time_ms REAL, min_ms REAL, std_ms REAL,
    absorbed TEXT, params TEXT,
    PRIMARY KEY (config, idx)
);
CREATE INDEX IF NOT EXISTS layers_type ON layers(layer_type);
"""

#: Columns of ``annette bench export`` (one row per measured layer; one row per failed configuration).
EXPORT_COLUMNS = ("platform", "suite", "config_id", "status", "layer", "layer_type", "fused", "fused_into",
                  "node", "node_type", "exec_kind", "time_ms", "min_ms", "std_ms", "e2e_median_ms", "params",
                  "error")


class StoreError(AnnetteError):
    """The measurement database cannot be opened or is not one of ours."""


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


class Store(SQLiteFile):
    """An SQLite measurement database (created on first use)."""

    schema = _SCHEMA
    pragmas = ("journal_mode=WAL", "synchronous=NORMAL", "foreign_keys=ON")
    error = StoreError
    description = "measurement database"
    kind = "store"
    schema_version = SCHEMA_VERSION

    # ------------------------------------------------------------------------------------------------
    def start_run(self, platform: str, runner: str, toolchain: dict[str, Any], fingerprint: dict[str, Any]) -> int:
        """Record the start of a sweep; returns the run id the configurations refer to."""
        from .. import __version__
        with self.transaction():
            cur = self.db.execute(
                "INSERT INTO runs (platform, runner, toolchain, fingerprint, started, annette_version) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (platform, runner, json.dumps(toolchain, sort_keys=True), json.dumps(fingerprint, sort_keys=True),
                 time.time(), __version__))
        return int(cur.lastrowid)

    def done(self, platform: str, suite: str, include_failed: bool = True) -> set[str]:
        """Config ids already stored for this platform and suite (skipped on resume)."""
        q = "SELECT config_id FROM configs WHERE platform=? AND suite=?"
        if not include_failed:
            q += " AND status='ok'"
        return {r[0] for r in self.db.execute(q, (platform, suite))}

    def add(self, run_id: int, platform: str, result: ConfigResult) -> None:
        """Store one configuration and its layer records atomically (all or nothing).

        A failed configuration that is stored again (``--retry-failed``) replaces the failed row.
        """
        r = result
        with self.transaction():
            self.db.execute("DELETE FROM layers WHERE config IN (SELECT id FROM configs WHERE platform=? AND "
                            "suite=? AND config_id=? AND status='failed')", (platform, r.suite, r.config_id))
            self.db.execute("DELETE FROM configs WHERE platform=? AND suite=? AND config_id=? AND status='failed'",
                            (platform, r.suite, r.config_id))
            cur = self.db.execute(
                "INSERT INTO configs (run_id, platform, suite, config_id, params, status, error, e2e_median_ms, "
                "e2e_min_ms, e2e_std_ms, iterations, seconds, finished) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (run_id, platform, r.suite, r.config_id, json.dumps(r.params, sort_keys=True), r.status, r.error,
                 r.e2e_median_ms, r.e2e_min_ms, r.e2e_std_ms, r.iterations, r.seconds, time.time()))
            cid = cur.lastrowid
            self.db.executemany(
                "INSERT INTO layers VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                [(cid, i, L.layer, L.layer_type, L.fused, L.fused_into, L.node, L.node_type, L.exec_kind, L.time_ms,
                  L.min_ms, L.std_ms, json.dumps(list(L.absorbed)), json.dumps(L.params, sort_keys=True))
                 for i, L in enumerate(r.layers)])

    # ------------------------------------------------------------------------------------------------
    def counts(self, platform: str | None = None) -> dict[tuple[str, str], dict[str, int]]:
        """(platform, suite) -> {'ok': n, 'failed': m}."""
        q = "SELECT platform, suite, status, COUNT(*) FROM configs"
        args: tuple = ()
        if platform:
            q += " WHERE platform=?"
            args = (platform,)
        out: dict[tuple[str, str], dict[str, int]] = {}
        for p, s, st, n in self.db.execute(q + " GROUP BY platform, suite, status", args):
            out.setdefault((p, s), {"ok": 0, "failed": 0})[st] = n
        return out

    def rows(self, platform: str | None = None, suite: str | None = None) -> Iterator[dict[str, Any]]:
        """Export rows: one per measured layer, one per failed configuration (columns `EXPORT_COLUMNS`)."""
        where, args = [], []
        if platform:
            where.append("c.platform=?")
            args.append(platform)
        if suite:
            where.append("c.suite=?")
            args.append(suite)
        w = (" WHERE " + " AND ".join(where)) if where else ""
        q = ("SELECT c.platform, c.suite, c.config_id, c.status, l.layer, l.layer_type, l.fused, l.fused_into, "
             "l.node, l.node_type, l.exec_kind, l.time_ms, l.min_ms, l.std_ms, c.e2e_median_ms, c.params, c.error "
             "FROM configs c LEFT JOIN layers l ON l.config = c.id" + w + " ORDER BY c.id, l.idx")
        for row in self.db.execute(q, args):
            yield dict(zip(EXPORT_COLUMNS, row))

    def export_csv(self, out: str | os.PathLike, platform: str | None = None, suite: str | None = None) -> int:
        """Write `rows` to a CSV file; returns the number of data rows."""
        n = 0
        with open(out, "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=list(EXPORT_COLUMNS))
            w.writeheader()
            for r in self.rows(platform, suite):
                w.writerow(r)
                n += 1
        return n

    def runs(self) -> list[dict[str, Any]]:
        """All runs with their toolchain and machine fingerprint."""
        cols = ("id", "platform", "runner", "toolchain", "fingerprint", "started", "annette_version")
        out = []
        for row in self.db.execute("SELECT " + ", ".join(cols) + " FROM runs ORDER BY id"):
            d = dict(zip(cols, row))
            d["toolchain"], d["fingerprint"] = json.loads(d["toolchain"]), json.loads(d["fingerprint"])
            out.append(d)
        return out

    def layer_records(self, platform: str, suite: str | None = None,
                      status: str = "ok") -> Iterable[tuple[str, str, dict[str, Any], LayerRecord]]:
        """(suite, config_id, params, LayerRecord) for every stored layer (input to the model generator)."""
        q = ("SELECT c.suite, c.config_id, c.params, l.layer, l.layer_type, l.fused, l.fused_into, l.node, "
             "l.node_type, l.exec_kind, l.time_ms, l.min_ms, l.std_ms, l.absorbed, l.params FROM configs c "
             "JOIN layers l ON l.config = c.id WHERE c.platform=? AND c.status=?")
        args: list[Any] = [platform, status]
        if suite:
            q += " AND c.suite=?"
            args.append(suite)
        for row in self.db.execute(q + " ORDER BY c.id, l.idx", args):
            s, cid, params = row[0], row[1], json.loads(row[2])
            L = LayerRecord(*row[3:13], absorbed=tuple(json.loads(row[13] or "[]")), params=json.loads(row[14] or "{}"))
            yield s, cid, params, L
