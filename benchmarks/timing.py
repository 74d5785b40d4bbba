"""Timing helper shared by the speed benchmarks (run as scripts: this folder is on ``sys.path``)."""

from __future__ import annotations

import time
from typing import Callable


def best_of(fn: Callable[[], object], repeat: int = 7, number: int = 2000) -> float:
    """Best (min) mean seconds per call over ``repeat`` rounds of ``number`` calls."""
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - t) / number)
    return min(times)
