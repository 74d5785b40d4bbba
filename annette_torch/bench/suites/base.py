"""The `Suite` object: a parameter space, a parametric network builder and its analytic size caps."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ...errors import AnnetteError
from ...ir import Network
from .. import samplers as _samplers
from . import counts as _counts

__all__ = ["Suite", "SuiteError", "config_id", "plain_value", "Cost", "MAX_OPS", "MAX_ACT_BYTES",
           "MAX_WEIGHT_BYTES", "DEFAULT_N"]

#: Caps per config (one model): operations (2 x MACs), activation bytes (float32 outputs of all layers,
#: inputs included) and weight bytes (float32, biases excluded).
MAX_OPS = 4e9  # covers the largest convolutions of common networks (VGG's 3.7 GOPs at 224x224)
MAX_ACT_BYTES = 64 * 2**20
MAX_WEIGHT_BYTES = 64 * 2**20

#: configs a sampler draws when no ``n`` is given
DEFAULT_N = 100


class SuiteError(AnnetteError):
    """A suite name, config or reference file is unusable."""


def config_id(params: Mapping[str, Any]) -> str:
    """Short deterministic id of a config: the first 10 hex digits of SHA-1 over its sorted JSON."""
    clean = {k: plain_value(v) for k, v in params.items() if k != "config_id"}
    text = json.dumps(clean, sort_keys=True, separators=(",", ":"))
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:10]


def plain_value(v: Any) -> Any:
    """A numpy scalar as the Python value it holds (other values unchanged), so JSON and ids see plain types."""
    return v.item() if isinstance(v, np.generic) else v


#: ``cost(cols) -> (ops, activation elements, weight elements)``, vectorised over config columns
Cost = Callable[[Mapping[str, Any]], tuple]


@dataclass
class Suite:
    """A benchmark suite: parameter space + parametric network builder.

    ``cost(cols)`` returns ``(ops, activation elements, weight elements)`` and ``valid(cols)`` a feasibility
    mask, both vectorised (``cols`` maps each parameter to a numpy array, or to scalars for one config).
    ``table`` (optional) loads a fixed configuration table (sampler ``"table"``; the other samplers still
    draw from ``space``). ``optional`` lists extra config keys the builder accepts, with their defaults.
    A ``config_id`` depends on the parameters only, so two suites can share one (e.g. ``maxpool`` and
    ``avgpool``): key stored results by (suite, config_id), or by the network name ``<suite>-<config_id>``.
    """

    name: str
    description: str
    space: dict[str, list]
    builder: Callable[[dict], Network]
    kind: str = "micro"  # "micro" | "multi"
    default_sampler: str = "sobol"
    cost: Cost | None = None
    valid: Callable[[Mapping[str, Any]], Any] | None = None
    optional: dict[str, Any] = field(default_factory=dict)  # extra config keys the builder accepts (defaults)
    table: Callable[[], list[dict]] | None = None
    max_weight_bytes: float = MAX_WEIGHT_BYTES  # this suite's weight cap (fc, cold_weights: beyond the caches)
    max_act_bytes: float = MAX_ACT_BYTES  # this suite's activation cap (interp: segmentation logits at input size;
    #                                      cold_weights: traffic beyond the last-level cache)
    _counts: dict = field(default_factory=dict, repr=False, compare=False)

    # -- feasibility --------------------------------------------------------------------------------
    def feasible(self, cols: Mapping[str, Any], capped: bool = True) -> np.ndarray:
        """Boolean mask over column arrays: valid and (when ``capped``) within the size caps."""
        n = len(next(iter(cols.values()))) if cols else 0
        ok = np.ones(n, bool)
        if self.valid is not None:
            ok &= np.asarray(self.valid(cols), bool)
        if capped and self.cost is not None:
            ops, act, wts = self.cost(cols)
            ok &= (np.asarray(ops, float) <= MAX_OPS) & (4.0 * np.asarray(act, float) <= self.max_act_bytes) \
                & (4.0 * np.asarray(wts, float) <= self.max_weight_bytes)
        return ok

    def _columns(self, configs: Sequence[Mapping[str, Any]]) -> dict[str, np.ndarray]:
        keys = list(self.space) + [k for k in self.optional if any(k in c for c in configs)]
        cols = {}
        for k in keys:
            vals = [c.get(k, self.optional.get(k)) for c in configs]
            cols[k] = np.array(vals, dtype=object if any(isinstance(v, str) for v in vals) else np.int64)
        return cols

    def costs(self, configs: Sequence[Mapping[str, Any]]) -> tuple:
        """(operations, activation elements, weight elements) of each of ``configs`` (arrays; needs ``cost``)."""
        if self.cost is None:
            raise SuiteError(f"suite {self.name!r} has no cost formula")
        out = [np.asarray(v, np.float64) for v in self.cost(self._columns(configs))]
        return tuple(np.broadcast_to(v, (len(configs),)).copy() for v in out)

    def filter(self, configs: Sequence[Mapping[str, Any]], capped: bool = True) -> list[dict]:
        """The feasible configs among ``configs`` (order kept)."""
        if not configs:
            return []
        mask = self.feasible(self._columns(configs), capped)
        return [dict(c) for c, ok in zip(configs, mask) if ok]

    def count_fingerprint(self) -> str:
        """What the capped grid count depends on besides the cost formulas (space, caps): see `counts`."""
        return _counts.fingerprint(self.space, (MAX_OPS, self.max_act_bytes, self.max_weight_bytes))

    def count(self, capped: bool = True, stored: bool = True) -> int:
        """Number of feasible configs of the full grid (of the table for table suites). The capped grid
        count comes from the stored counts (`counts`) when they are current; ``stored=False`` enumerates."""
        key = ("table" if self.default_sampler == "table" else "grid", capped)
        if stored and key == ("grid", True) and key not in self._counts:
            n = _counts.stored_count(self.name, self.count_fingerprint())
            if n is not None:
                return n
        if not stored or key not in self._counts:
            if self.default_sampler == "table":
                self._counts[key] = len(self.filter(self._load_table(), capped))
            else:
                keys = list(self.space)
                sizes = [len(self.space[k]) for k in keys]
                idx = np.indices(sizes).reshape(len(keys), -1)
                cols = {k: np.asarray(self.space[k], dtype=object if any(isinstance(v, str) for v in self.space[k])
                                      else np.int64)[idx[j]] for j, k in enumerate(keys)}
                self._counts[key] = int(self.feasible(cols, capped).sum())
        return self._counts[key]

    # -- configs ------------------------------------------------------------------------------------
    def configs(self, sampler: str | None = None, n: int | None = None, seed: int = 0, capped: bool = True,
                options: Mapping[str, Any] | None = None, **kw: Any) -> list[dict]:
        """Feasible configs, each with its ``config_id``.

        ``sampler``: ``"grid"``, ``"random"``, ``"sobol"``, ``"lhs"``, ``"unrolling"`` (needs ``steps=...``,
        optional ``width=``) or ``"table"`` (table suites); default: the suite's ``default_sampler``.
        ``n``: how many (default: all for grid/table, `DEFAULT_N` otherwise); fewer come back only when the
        space has fewer feasible configs. Infeasible draws are skipped and more are drawn. ``capped=False``
        lifts the size caps (validity still applies). ``options`` sets optional keys (e.g. ``{"lead": "dw1"}``)
        on every config (a key at its default value is left out, so the ids stay those without it).
        """
        unknown = sorted(set(options or {}) - set(self.optional))
        if unknown:
            raise SuiteError(f"suite {self.name!r} has no options {unknown} (options: {sorted(self.optional)})")
        sampler = sampler or self.default_sampler
        # options set before the caps are checked: an option may change a config's size (``windows``)
        extra = {k: v for k, v in (options or {}).items() if self.optional[k] != v}  # defaults: no key

        def feasible(cands: Sequence[Mapping[str, Any]]) -> list[dict]:
            return self.filter([dict(c, **extra) for c in cands], capped)

        if n is not None:
            n = _samplers._check_n(n)
        if sampler == "table":
            rows = feasible(self._load_table())
            out = rows if n is None else rows[:n]
        elif sampler == "grid":
            if kw:
                raise SuiteError(f"sampler 'grid' takes no options, got {sorted(kw)}")
            out = feasible(_samplers.grid(self.space))
            out = out if n is None else out[:n]
        elif sampler in _samplers.SAMPLERS:
            fn = _samplers.SAMPLERS[sampler]
            want = DEFAULT_N if n is None else n
            total = _samplers.space_size(self.space) if sampler != "unrolling" else None
            m = want
            out = []
            for _ in range(24):
                cand = fn(self.space, n=m, seed=seed, **kw)
                out = feasible(cand)
                if len(out) >= want or len(cand) < m or (total is not None and m >= total):
                    break
                rate = max(len(out), 1) / len(cand)  # feasible share so far: draw enough for ``want``
                m = min(max(2 * m, int(math.ceil(1.25 * want / rate))), max(64 * want, 4096))
                if total is not None:
                    m = min(m, total)
            out = out[:want]
        else:
            raise SuiteError(f"unknown sampler {sampler!r}; choose from "
                             f"{', '.join(['table'] + list(_samplers.SAMPLERS))}")
        return [dict(c, **extra, config_id=config_id({**c, **extra})) for c in out]

    def build(self, config: Mapping[str, Any]) -> Network:
        """The network of one config, named ``<suite>-<config_id>``."""
        params = {k: plain_value(v) for k, v in config.items() if k != "config_id"}
        missing = [k for k in self.space if k not in params]
        extra = [k for k in params if k not in self.space and k not in self.optional]
        if missing or extra:
            raise SuiteError(f"suite {self.name!r}: config {params} " +
                             (f"lacks {missing}" if missing else "") + (" and " if missing and extra else "") +
                             (f"has unknown keys {extra}" if extra else "") +
                             f" (parameters: {list(self.space) + list(self.optional)})")
        full = {**self.optional, **params}
        net = self.builder(full)
        # optional keys at their default do not change the network, nor its id
        ident = {k: v for k, v in params.items() if k not in self.optional or self.optional[k] != v}
        net.name = f"{self.name}-{config_id(ident)}"
        return net

    def _load_table(self) -> list[dict]:
        if self.table is None:
            raise SuiteError(f"suite {self.name!r} has no configuration table; use sampler 'grid', 'sobol', ...")
        return self.table()
