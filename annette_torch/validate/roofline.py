"""Measured layers of a benchmark store as points of the roofline plot."""

from __future__ import annotations

import logging
import os
from typing import Iterable

import numpy as np

from ..errors import AnnetteError
from ..ir import Network

__all__ = ["store_layer_points"]

log = logging.getLogger(__name__)


def store_layer_points(db_path: str | os.PathLike, platform: str, bit_width: float = 32.0,
                       suites: Iterable[str] | None = None, limit: int | None = 5000) -> dict[str, np.ndarray]:
    """Measured layers of a benchmark store as roofline points: ``ops``, ``bytes``, ``time_ms``, ``type``.

    Each stored configuration's network is rebuilt from its suite and parameters; a layer that executed
    (time > 0, not an inserted toolchain node) gives one point with its own operations and bytes (inputs,
    outputs and weights at ``bit_width`` bits). At most ``limit`` points (a fixed random sample of all).
    """
    from ..bench.store import Store
    from ..bench.suites import SuiteError, get_suite
    ops, byts, times, types = [], [], [], []
    nets: dict[tuple[str, str], tuple[Network, list[str]] | None] = {}
    want = set(suites) if suites is not None else None
    with Store(db_path, create=False) as st:
        for suite, cid, params, rec in st.layer_records(platform):
            if want is not None and suite not in want:
                continue
            if rec.fused == "inserted" or not rec.time_ms or rec.time_ms <= 0:
                continue
            k = (suite, cid)
            if k not in nets:
                try:
                    built = get_suite(suite).build(params)
                    nets[k] = (built, built.type_labels())
                except (SuiteError, AnnetteError, KeyError, TypeError, ValueError) as e:
                    log.debug("store_layer_points: %s/%s not rebuilt: %s", suite, cid, e)
                    nets[k] = None
            if nets[k] is None:
                continue
            net, labels = nets[k]
            try:
                i = net.index(rec.layer)
            except KeyError:
                continue
            ops.append(float(net.ops[i]))
            byts.append(float((net.in_elems[i] + net.out_elems[i] + net.weights[i]) * bit_width / 8))
            times.append(float(rec.time_ms))
            types.append(labels[i])
    keep = np.arange(len(ops))
    if limit is not None and len(ops) > limit:  # an even, deterministic sample over all suites
        keep = np.sort(np.random.default_rng(0).choice(len(ops), int(limit), replace=False))
    return {"ops": np.array(ops)[keep], "bytes": np.array(byts)[keep], "time_ms": np.array(times)[keep],
            "type": np.array(types, dtype=object)[keep]}
