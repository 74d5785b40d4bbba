"""The measurement store's tables (SQLAlchemy Core, the same on SQLite and PostgreSQL) and its version history.

Version 1: ``meta``, ``runs``, ``configs``, ``layers``. Version 2 adds who measured (``runs.worker``,
``runs.machine``), the planned configurations of each sweep (``plan``) and the claims with leases that let
several workers share one sweep (``claims``); a version-1 store is upgraded in place when it is opened.
"""

from __future__ import annotations

from sqlalchemy import (CheckConstraint, Column, Float, ForeignKey, Index, Integer, MetaData, Table, Text,
                        UniqueConstraint)

__all__ = ["SCHEMA_VERSION", "STORE_KIND", "metadata", "meta", "runs", "configs", "layers", "claims", "plan",
           "TABLES"]

#: the schema version this release writes; a store of a newer one is refused
SCHEMA_VERSION = 2
#: ``meta.kind`` of a measurement store (version 1 stores lack it: their ``schema_version`` row says it)
STORE_KIND = "annette measurement store"

metadata = MetaData()

meta = Table("meta", metadata,
             Column("key", Text, primary_key=True),
             Column("value", Text, nullable=False))

runs = Table("runs", metadata,
             Column("id", Integer, primary_key=True),
             Column("platform", Text, nullable=False),
             Column("runner", Text, nullable=False),
             Column("toolchain", Text, nullable=False),      # JSON: name, version, settings
             Column("fingerprint", Text, nullable=False),    # JSON: cpu model, cores, threads, os, python
             Column("started", Float, nullable=False),
             Column("annette_version", Text, nullable=False),
             Column("worker", Text),                         # version 2: the worker's name
             Column("machine", Text))                        # version 2: the host it ran on

configs = Table("configs", metadata,
                Column("id", Integer, primary_key=True),
                Column("run_id", Integer, ForeignKey("runs.id"), nullable=False),
                Column("platform", Text, nullable=False),
                Column("suite", Text, nullable=False),
                Column("config_id", Text, nullable=False),
                Column("params", Text, nullable=False),      # JSON of the configuration
                Column("status", Text, nullable=False),
                Column("error", Text),
                Column("e2e_median_ms", Float), Column("e2e_min_ms", Float), Column("e2e_std_ms", Float),
                Column("iterations", Integer),
                Column("seconds", Float),                    # wall time spent on this configuration
                Column("finished", Float, nullable=False),
                CheckConstraint("status IN ('ok', 'failed')", name="configs_status"),
                UniqueConstraint("platform", "suite", "config_id", name="configs_key"))

layers = Table("layers", metadata,
               Column("config", Integer, ForeignKey("configs.id"), primary_key=True, autoincrement=False),
               Column("idx", Integer, primary_key=True, autoincrement=False),
               Column("layer", Text, nullable=False), Column("layer_type", Text, nullable=False),
               Column("fused", Text, nullable=False), Column("fused_into", Text),
               Column("node", Text), Column("node_type", Text), Column("exec_kind", Text),
               Column("time_ms", Float), Column("min_ms", Float), Column("std_ms", Float),
               Column("absorbed", Text), Column("params", Text),
               Index("layers_type", "layer_type"))

#: one row per configuration a worker took: ``state`` 'claimed' (until ``lease_until``, renewed by the
#: worker's heartbeat; storing the configuration as measured ends it), 'failed' once stored as failed
claims = Table("claims", metadata,
               Column("platform", Text, primary_key=True),
               Column("suite", Text, primary_key=True),
               Column("config_id", Text, primary_key=True),
               Column("worker", Text, nullable=False),
               Column("machine", Text, nullable=False),
               Column("run_id", Integer),
               Column("state", Text, nullable=False),
               Column("claimed", Float, nullable=False),
               Column("heartbeat", Float, nullable=False),
               Column("lease_until", Float, nullable=False))

#: the configurations sweeps were started for (the union over workers): what ``remaining`` counts down
plan = Table("plan", metadata,
             Column("platform", Text, primary_key=True),
             Column("suite", Text, primary_key=True),
             Column("config_id", Text, primary_key=True))

#: every table of a measurement store
TABLES = frozenset(metadata.tables)
