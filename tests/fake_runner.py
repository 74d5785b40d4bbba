"""A hardware module for fault tests: profiles synthetically and misbehaves on request.

The configuration's ``config_id`` is read from the model's graph name (``<suite>-<config_id>``); the
behaviour for it comes from the runner's keyword arguments: ``raise_on`` (an exception), ``hang_on``
(sleeps forever), ``crash_on`` (the process dies), ``slow`` (seconds per configuration). ``trace`` names a
file to which each profiling appends ``<pid> <start> <end>`` (to check that workers take turns);
``host_cpu=False`` says the runner measures elsewhere (no per-machine lock).
"""

from __future__ import annotations

import os
import time

import numpy as np

from annette_torch.bench.runners.base import Profile, Runner


class FakeRunner(Runner):
    name = "fake"

    def __init__(self, raise_on=(), hang_on=(), crash_on=(), slow: float = 0.0, trace: str | None = None,
                 host_cpu: bool = True) -> None:
        self.raise_on, self.hang_on, self.crash_on, self.slow = set(raise_on), set(hang_on), set(crash_on), slow
        self.trace, self.uses_host_cpu = trace, host_cpu

    def toolchain(self):
        return {"toolchain": "fake", "version": "1"}

    def prepare(self, model):
        cid = model.graph.name.rsplit("-", 1)[-1]
        if cid in self.raise_on:
            raise RuntimeError(f"toolchain rejected {cid}")
        if cid in self.hang_on:
            time.sleep(3600)
        if cid in self.crash_on:
            os._exit(139)
        return model

    def profile(self, prepared, iterations=20, warmup=3, max_s=None):
        t0 = time.time()
        if self.slow:
            time.sleep(self.slow)
        if self.trace:
            with open(self.trace, "a") as f:
                f.write(f"{os.getpid()} {t0} {time.time()}\n")
        rng = np.random.default_rng(0)
        nodes = {n.name: (n.op_type, "fake", "executed", 0.1 + 0.01 * rng.random(iterations))
                 for n in prepared.graph.node}
        return Profile(nodes=nodes, e2e_ms=np.full(iterations, 0.5))
