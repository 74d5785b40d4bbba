"""Benchmark tool: generate micro-kernel and multi-layer benchmarks, run them on a toolchain, parse the
per-layer profile, match executed nodes back to the original layers, and store the measurements."""
