"""Latency-aware neural architecture search on top of annette-torch estimates."""
