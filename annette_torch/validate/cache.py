"""The measurement cache: an SQLite file of whole-network measurements, so an interrupted benchmark
resumes where it stopped."""

from __future__ import annotations

import json
import math
import time
from typing import Any, Mapping

from ..bench.sqlite import SQLiteFile
from .errors import ValidationError
from .measurement import Measurement

__all__ = ["MeasurementCache"]

_CACHE_SCHEMA = """
CREATE TABLE IF NOT EXISTS measurements (
    platform TEXT NOT NULL,
    network TEXT NOT NULL,
    fingerprint TEXT NOT NULL,       -- network_fingerprint of the IR
    machine TEXT NOT NULL,           -- machine_key: machine + runtime version + settings
    median_ms REAL NOT NULL,
    spread REAL NOT NULL,
    repeat_medians TEXT NOT NULL,    -- JSON list
    min_ms REAL, runs INTEGER NOT NULL, repeats INTEGER NOT NULL, warmup INTEGER NOT NULL,
    seconds REAL, busy REAL, info TEXT, created REAL NOT NULL,
    PRIMARY KEY (platform, network, fingerprint, machine)
);
"""


class MeasurementCache(SQLiteFile):
    """SQLite cache of whole-network measurements, keyed by (platform, network name, network fingerprint,
    machine key). Each `put` is one transaction, so a benchmark killed at any moment keeps every network it
    finished and re-measures only the rest."""

    schema = _CACHE_SCHEMA
    marker = "measurements"
    pragmas = ("journal_mode=WAL",)
    error = ValidationError
    description = "measurement cache"
    kind = "cache"

    def upgrade(self) -> None:
        """Add the ``busy`` column to a cache written before it existed."""
        if "busy" not in self.column_names("measurements"):
            with self.transaction():
                self.db.execute("ALTER TABLE measurements ADD COLUMN busy REAL")

    def get(self, platform: str, network: str, fingerprint: str, machine: str, runs: int = 0,
            repeats: int = 0) -> Measurement | None:
        """The cached measurement, or None; entries taken with fewer ``runs`` / ``repeats`` than asked
        for do not count (a full pass re-measures what a quick pass stored)."""
        row = self.db.execute(
            "SELECT median_ms, spread, repeat_medians, min_ms, runs, repeats, warmup, seconds, busy FROM measurements "
            "WHERE platform=? AND network=? AND fingerprint=? AND machine=?",
            (platform, network, fingerprint, machine)).fetchone()
        if row is None or row[4] < runs or row[5] < repeats:
            return None
        return Measurement(row[0], row[1], tuple(json.loads(row[2])), row[3] if row[3] is not None else math.nan,
                           row[4], row[5], row[6], row[7] or 0.0, row[8] if row[8] is not None else math.nan)

    def put(self, platform: str, network: str, fingerprint: str, machine: str, m: Measurement,
            info: Mapping[str, Any] | None = None) -> None:
        """Store (or replace) one measurement atomically."""
        with self.transaction():
            self.db.execute(
                "INSERT OR REPLACE INTO measurements (platform, network, fingerprint, machine, median_ms, spread, "
                "repeat_medians, min_ms, runs, repeats, warmup, seconds, busy, info, created) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (platform, network, fingerprint, machine, m.median_ms, m.spread, json.dumps(list(m.repeat_medians)),
                 None if math.isnan(m.min_ms) else m.min_ms, m.runs, m.repeats, m.warmup, m.seconds,
                 None if math.isnan(m.busy) else m.busy,
                 json.dumps(dict(info or {}), sort_keys=True), time.time()))

    def __len__(self) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM measurements").fetchone()[0])

    def entries(self, platform: str | None = None) -> list[dict[str, Any]]:
        """All cached rows (as dicts), optionally of one platform."""
        q = ("SELECT platform, network, fingerprint, machine, median_ms, spread, runs, repeats, seconds, busy "
             "FROM measurements")
        args: tuple = ()
        if platform:
            q += " WHERE platform=?"
            args = (platform,)
        cols = ("platform", "network", "fingerprint", "machine", "median_ms", "spread", "runs", "repeats", "seconds",
                "busy")
        return [dict(zip(cols, r)) for r in self.db.execute(q + " ORDER BY rowid", args)]
