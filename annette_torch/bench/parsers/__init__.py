"""Profiler-report parsers: a toolchain's per-layer report -> `NodeRecord`s in one format."""
