"""Platforms: the data that turns a network into a latency for one target (mapping model + layer models),
its file format, where shipped and user files are found, and which machine a measured file belongs to."""

from .machine import machine_fingerprint, machine_slug
from .platform import LAYER_KEYS, SCHEMA, SCHEMA_VERSION, Platform, dumps_platform
from .registry import (ALIASES, PlatformFile, alias_of, list_platforms, load_platform, platform_dir, platform_files, refresh_platforms,
                       resolve_platform, shipped_machines, user_platform_dir)

__all__ = ["Platform", "load_platform", "list_platforms", "platform_dir", "user_platform_dir", "platform_files",
           "PlatformFile", "resolve_platform", "refresh_platforms", "ALIASES", "alias_of", "shipped_machines", "machine_fingerprint",
           "machine_slug", "SCHEMA", "SCHEMA_VERSION", "LAYER_KEYS", "dumps_platform"]
