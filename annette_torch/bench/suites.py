"""Benchmark suites: a parametric graph (``builder(config) -> Network``) plus a parameter space.

Micro-kernel suites measure one layer (``conv``, ``dwconv``, ``gconv``, ``gconv_same``, ``maxpool``, ``avgpool``, ``fc``, ``add``,
``concat``, ``act``, ``bn``, ``resize``); multi-layer suites have the shapes of the paper's Fig. 4
(``conv_bn_relu``, ``conv_pool``, ``residual``, ``concat_branches``, ``dwsep``, ``conv_act``, ``dw_act``,
``stem``);
``cold_weights`` measures weighted layers after a pool that streams a chosen amount of activations through
the caches (whether a layer's weights are still cached inside a network, `annette_torch.models.cache`); ``paper_conv``
replays the paper's ~35k convolution configurations (``paper35k.csv`` of the reference data). Value ranges
follow the paper (spatial 1..224, channels 3..2048, kernels 1/3/5/7, strides 1/2, pools 2..10); a config is
feasible when its model stays within `MAX_OPS` operations, `MAX_ACT_BYTES` of activations and
`MAX_WEIGHT_BYTES` of weights (float32), so one config runs in well under a second on a small CPU. The caps
are checked analytically and vectorised (a suite's grid of ~400k configs is counted in milliseconds); a
test keeps the formulas equal to the built networks'.

Conventions of the generated networks: NCHW, batch 1 unless the suite has ``n``; convolutions use "same"
padding (``k // 2`` per side, so the output is ``ceil(size / stride)``, as the original ANNETTE generator's
TensorFlow ``SAME``); pools use no padding; inputs are called ``x`` (``x0``, ``x1``... for several); layer
names are short and fixed (``conv``, ``bn``, ``relu``, ``pool``; ``conv1``, ``bn1``... in chains), and the
network is called ``<suite>-<config_id>``.

Loaders for the original ANNETTE material: `from_annette_template` fills a benchmark graph template and
`load_sweep_table` reads a sweep table; `reference_dir` finds the reference data folder.
"""

from __future__ import annotations

import ast
import copy
import csv
import hashlib
import json
import logging
import math
import operator
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..errors import AnnetteError
from ..ir import INT_COLUMNS, LayerType, Network, NetworkBuilder
from . import samplers as _samplers

__all__ = ["Suite", "SUITES", "list_suites", "get_suite", "config_id", "multi_kernel", "from_annette_template",
           "load_sweep_table", "reference_dir", "SuiteError", "MAX_OPS", "MAX_ACT_BYTES", "MAX_WEIGHT_BYTES",
           "ACTIVATIONS", "SPATIAL", "CHANNELS"]

log = logging.getLogger(__name__)
T = LayerType

#: Caps per config (one model): operations (2 x MACs), activation bytes (float32 outputs of all layers,
#: inputs included) and weight bytes (float32, biases excluded).
MAX_OPS = 4e9  # covers the largest convolutions of common networks (VGG's 3.7 GOPs at 224x224)
MAX_ACT_BYTES = 64 * 2**20
MAX_WEIGHT_BYTES = 64 * 2**20

# 1 (squeeze-excite blocks) to 224; the sizes of common networks (7, 14, 28, 56, 112) included
SPATIAL = [1, 2, 4, 7, 8, 12, 14, 16, 24, 28, 32, 48, 56, 64, 96, 112, 128, 192, 224]
# multiples of 8 (vectorised layouts) and in-between counts (e.g. NAS-Bench-101's channel splits: 25, 43, 51, 102)
CHANNELS = [3, 8, 13, 16, 24, 25, 32, 43, 48, 51, 64, 85, 96, 102, 128, 171, 192, 205, 256, 384, 512, 768, 1024,
            1536, 2048]
KERNELS = [1, 3, 5, 7]
#: input sizes of image networks (stem suite)
STEM_SPATIAL = [32, 56, 64, 96, 112, 128, 160, 192, 224, 256, 299, 320, 384, 416, 448, 512, 640]
STRIDES = [1, 2]
POOL_KERNELS = list(range(2, 11))
FEATURES = [8, 16, 32, 64, 128, 256, 384, 512, 768, 1000, 1024, 1536, 2048, 4096]
#: FC input widths beyond FEATURES: the flattened feature maps of classic classifiers (AlexNet 256x6x6,
#: VGG 512x7x7), whose weights (up to 400 MB) do not fit any cache
FC_INPUTS = FEATURES + [9216, 16384, 25088]
ACTIVATIONS = ["relu", "relu6", "leaky", "sigmoid", "silu", "hardswish", "tanh", "gelu"]
#: activations behind the pointwise (1x1) convolutions of mobile networks (the ``pw_act`` suite)
PW_ACTIVATIONS = ["relu", "relu6", "hardswish", "silu"]
_ACT_TYPES = {"relu": T.RELU, "relu6": T.RELU6, "leaky": T.LEAKY_RELU, "sigmoid": T.SIGMOID, "silu": T.SILU,
              "hardswish": T.HARDSWISH, "tanh": T.TANH, "gelu": T.GELU}
#: The paper's value lists (paper35k.csv).
PAPER_SPATIAL = [8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024]
PAPER_CHANNELS = [3, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 1024, 1536, 2048, 4096]

DEFAULT_N = 100
_REF_ENV = "ANNETTE_REFERENCE_DIR"


class SuiteError(AnnetteError):
    """A suite name, config or reference file is unusable."""


# ------------------------------------------------------------------------------------------------------
# the Suite object


def config_id(params: Mapping[str, Any]) -> str:
    """Short deterministic id of a config: the first 10 hex digits of SHA-1 over its sorted JSON."""
    clean = {k: _plain(v) for k, v in params.items() if k != "config_id"}
    text = json.dumps(clean, sort_keys=True, separators=(",", ":"))
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:10]


def _plain(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


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
            ok &= (np.asarray(ops, float) <= MAX_OPS) & (4.0 * np.asarray(act, float) <= MAX_ACT_BYTES) \
                & (4.0 * np.asarray(wts, float) <= self.max_weight_bytes)
        return ok

    def _columns(self, configs: Sequence[Mapping[str, Any]]) -> dict[str, np.ndarray]:
        keys = list(self.space) + [k for k in self.optional if any(k in c for c in configs)]
        cols = {}
        for k in keys:
            vals = [c.get(k, self.optional.get(k)) for c in configs]
            cols[k] = np.array(vals, dtype=object if any(isinstance(v, str) for v in vals) else np.int64)
        return cols

    def filter(self, configs: Sequence[Mapping[str, Any]], capped: bool = True) -> list[dict]:
        """The feasible configs among ``configs`` (order kept)."""
        if not configs:
            return []
        mask = self.feasible(self._columns(configs), capped)
        return [dict(c) for c, ok in zip(configs, mask) if ok]

    def count(self, capped: bool = True) -> int:
        """Number of feasible configs of the full grid (of the table for table suites)."""
        key = ("table" if self.default_sampler == "table" else "grid", capped)
        if key not in self._counts:
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
        if n is not None:
            n = _samplers._check_n(n)
        if sampler == "table":
            rows = self.filter(self._load_table(), capped)
            out = rows if n is None else rows[:n]
        elif sampler == "grid":
            if kw:
                raise SuiteError(f"sampler 'grid' takes no options, got {sorted(kw)}")
            out = self.filter(_samplers.grid(self.space), capped)
            out = out if n is None else out[:n]
        elif sampler in _samplers.SAMPLERS:
            fn = _samplers.SAMPLERS[sampler]
            want = DEFAULT_N if n is None else n
            total = _samplers.space_size(self.space) if sampler != "unrolling" else None
            m = want
            out = []
            for _ in range(24):
                cand = fn(self.space, n=m, seed=seed, **kw)
                out = self.filter(cand, capped)
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
        extra = {k: v for k, v in (options or {}).items() if self.optional[k] != v}  # defaults: no key
        return [dict(c, **extra, config_id=config_id({**c, **extra})) for c in out]

    def build(self, config: Mapping[str, Any]) -> Network:
        """The network of one config, named ``<suite>-<config_id>``."""
        params = {k: _plain(v) for k, v in config.items() if k != "config_id"}
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


# ------------------------------------------------------------------------------------------------------
# builders (NetworkBuilder) and their analytic costs (numpy-vectorised over config columns)


def _same_out(size, s):
    """Output size of an odd kernel with k // 2 padding per side and stride s."""
    return (size - 1) // s + 1


def _pool_out(size, k, s):
    return (size - k) // s + 1


def _conv(b: NetworkBuilder, name: str, x: int, f: int, k: int, s: int = 1, groups: int = 1, d: int = 1) -> int:
    return b.conv(name, x, f, k, s, padding=d * (k // 2), dilation=d, groups=groups)


def _act(b: NetworkBuilder, kind: str, name: str, x: int) -> int:
    try:
        t = _ACT_TYPES[kind]
    except KeyError:
        raise SuiteError(f"unknown activation {kind!r}; choose from {ACTIVATIONS}") from None
    return b.same(t, name, x, alpha=0.01 if t == T.LEAKY_RELU else None)


def _input(b: NetworkBuilder, c: dict, name: str = "x", hw: tuple[str, str] = ("h", "w")) -> int:
    if hw[0] == "hw":
        return b.input(name, (int(c.get("n", 1)), int(c["c"]), int(c["hw"]), int(c["hw"])))
    return b.input(name, (int(c.get("n", 1)), int(c["c"]), int(c[hw[0]]), int(c[hw[1]])))


def _b_conv(c: dict) -> Network:
    b = NetworkBuilder("conv")
    _conv(b, "conv", _lead(b, c, _input(b, c)), int(c["f"]), int(c["k"]), int(c["s"]), d=int(c.get("d", 1)))
    return b.build()


def _c_conv(c):
    d = c.get("d", 1)
    eff = d * (c["k"] - 1) + 1
    ho = (c["h"] + 2 * (d * (c["k"] // 2)) - eff) // c["s"] + 1
    wo = (c["w"] + 2 * (d * (c["k"] // 2)) - eff) // c["s"] + 1
    n = c.get("n", 1)
    return (2 * n * ho * wo * c["f"] * c["c"] * c["k"] ** 2, n * (c["c"] * c["h"] * c["w"] + c["f"] * ho * wo),
            c["f"] * c["c"] * c["k"] ** 2)


#: ``lead`` values of the conv / gconv / gconv_same / dwconv / maxpool / avgpool / concat / slice suites: what produces
#: the measured layer's input(s)
LEADS = ("none", "dw1")


def _lead(b: NetworkBuilder, c: dict, x: int, name: str = "lead") -> int:
    """The measured layer's producer: the graph input itself (``none``) or a 1x1 depthwise conv (``dw1``).

    A runtime may run a layer fed by the graph input in another layout, with another kernel, than inside a
    network: OpenVINO's CPU plugin runs a max pool on the plain NCHW input 4-6x slower than after any conv
    (blocked layout), a depthwise conv ~30% slower. The cheapest conv in front gives the in-network layout.
    """
    return _dw1(b, c, "lead", x, name)


def _dw1(b: NetworkBuilder, c: dict, key: str, x: int, name: str) -> int:
    """``x`` when the config's ``key`` (``lead`` / ``tail``) is ``none``, a 1x1 depthwise conv on it when ``dw1``."""
    v = str(c.get(key, "none"))
    if v == "none":
        return x
    if v != "dw1":
        raise SuiteError(f"{key} must be one of {list(LEADS)}, got {v!r}")
    ch = b.out_shape(x)[1]
    return b.conv(name, x, ch, 1, groups=ch)


def _b_dwconv(c: dict) -> Network:
    b = NetworkBuilder("dwconv")
    _conv(b, "dwconv", _lead(b, c, _input(b, c)), int(c["c"]), int(c["k"]), int(c["s"]), groups=int(c["c"]))
    return b.build()


def _c_dwconv(c):
    ho, wo = _same_out(c["h"], c["s"]), _same_out(c["w"], c["s"])
    return 2 * ho * wo * c["c"] * c["k"] ** 2, c["c"] * (c["h"] * c["w"] + ho * wo), c["c"] * c["k"] ** 2


def _b_gconv(c: dict) -> Network:
    b = NetworkBuilder("gconv")
    _conv(b, "gconv", _lead(b, c, _input(b, c)), int(c["f"]), int(c["k"]), int(c["s"]), groups=int(c["g"]))
    return b.build()


def _c_gconv(c):
    ho, wo = _same_out(c["h"], c["s"]), _same_out(c["w"], c["s"])
    cpg = c["c"] // c["g"]
    return (2 * ho * wo * c["f"] * cpg * c["k"] ** 2, c["c"] * c["h"] * c["w"] + c["f"] * ho * wo,
            c["f"] * cpg * c["k"] ** 2)


def _v_gconv(c):
    return (c["c"] % c["g"] == 0) & (c["f"] % c["g"] == 0) & (c["g"] < c["c"])


def _b_gconv_same(c: dict) -> Network:
    return _b_gconv({**c, "f": c["c"]})


def _c_gconv_same(c):
    return _c_gconv({**c, "f": c["c"]})


def _v_gconv_same(c):
    return (c["c"] % c["g"] == 0) & (c["g"] < c["c"])


#: (kernel, stride) pairs of the ``convtranspose`` suite: the decoders' upsampling layers (k2 s2, k4 s2 with one
#: pixel of padding per side: exactly twice the input) and a same-size k3 s1
DECONV = ["2x2", "4x2", "3x1"]


def _deconv(c) -> tuple[Any, Any]:
    """Kernel and stride from the ``ks`` parameter ("4x2"): ints for one configuration, arrays for columns."""
    ks = np.char.split(np.asarray(c["ks"], dtype=str), "x")
    k = np.array([int(v[0]) for v in np.atleast_1d(ks)])
    s = np.array([int(v[1]) for v in np.atleast_1d(ks)])
    return (k, s) if np.ndim(c["ks"]) else (int(k[0]), int(s[0]))


def _b_convtranspose(c: dict) -> Network:
    b = NetworkBuilder("convtranspose")
    x = _lead(b, c, _input(b, c))
    n, _, h, w = b.out_shape(x)
    k, s = _deconv(c)
    p = k - s  # total padding: the output is exactly s times the input
    b.add(T.CONV_TRANSPOSE, "convtranspose", [x], (n, int(c["f"]), (h - 1) * s - p + k, (w - 1) * s - p + k),
          kernel=(k, k), stride=(s, s), padding=(p, p))
    return b.build()


def _c_convtranspose(c):
    k, s = _deconv(c)
    e = c["h"] * c["w"]
    return 2 * e * c["c"] * c["f"] * k ** 2, e * (c["c"] + c["f"] * s ** 2), c["c"] * c["f"] * k ** 2


def _b_pool(kind: str) -> Callable[[dict], Network]:
    def build(c: dict) -> Network:
        b = NetworkBuilder(f"{kind}pool")
        b.pool("pool", _lead(b, c, _input(b, c)), kind, int(c["k"]), int(c["s"]))
        return b.build()
    return build


def _c_pool(c):
    ho, wo = _pool_out(c["h"], c["k"], c["s"]), _pool_out(c["w"], c["k"], c["s"])
    return 2 * ho * wo * c["c"] * c["k"] ** 2, c["c"] * (c["h"] * c["w"] + ho * wo), 0 * c["c"]


def _v_pool(c):
    return (c["k"] <= c["h"]) & (c["k"] <= c["w"])


def _b_fc(c: dict) -> Network:
    b = NetworkBuilder("fc")
    x = b.input("x", (int(c["n"]), int(c["c"])))
    b.linear("fc", x, int(c["f"]))
    return b.build()


def _c_fc(c):
    return 2 * c["n"] * c["f"] * c["c"], c["n"] * (c["c"] + c["f"]), c["c"] * c["f"]


def _b_add(c: dict) -> Network:
    b = NetworkBuilder("add")
    xs = [_input(b, c, f"x{j}") for j in range(2)]
    b.same(T.ADD, "add", xs)
    return b.build()


def _c_add(c):
    e = c["c"] * c["h"] * c["w"]
    return e, 3 * e, 0 * e


#: the ``eltwise_const`` suite's operations: a tensor and a per-channel constant
CONST_OPS = {"add": T.ADD, "sub": T.SUB, "mul": T.MUL, "div": T.DIV}


def _b_eltwise_const(c: dict) -> Network:
    """``x (op) C`` with a per-channel constant: how exporters write ``x + 3`` or ``x / 6`` (hard-swish and
    hard-sigmoid written out, normalisation); a one-input layer in the IR, cheaper than a two-input one."""
    try:
        t = CONST_OPS[str(c["op"])]
    except KeyError:
        raise SuiteError(f"unknown op {c['op']!r}; choose from {list(CONST_OPS)}") from None
    b = NetworkBuilder("eltwise_const")
    b.same(t, str(c["op"]), _input(b, c))
    return b.build()


def _c_eltwise_const(c):
    e = c["c"] * c["h"] * c["w"]
    return e, 2 * e, 0 * e


def _b_concat(c: dict) -> Network:
    b = NetworkBuilder("concat")
    xs = [_lead(b, c, _input(b, c, f"x{j}"), "lead" if j == 0 else f"lead{j}") for j in range(int(c["inputs"]))]
    b.concat("concat", xs)
    return b.build()


def _c_concat(c):
    e = c["c"] * c["h"] * c["w"] * c["inputs"]
    return 0 * e, 2 * e, 0 * e


def _b_slice(c: dict) -> Network:
    """Leading channels of a tensor (``drop`` % of them left out, at least one): NAS-Bench-101's channel
    truncation, a half of ShuffleNet's split."""
    b = NetworkBuilder("slice")
    x = _lead(b, c, _input(b, c))
    n, ch, h, w = b.out_shape(x)
    b.add(T.SLICE, "slice", [x], (n, _slice_keep(ch, c["drop"]), h, w))
    return b.build()


def _slice_keep(ch, drop):
    return np.maximum(np.minimum(np.asarray(ch) - 1, np.asarray(ch) * (100 - np.asarray(drop)) // 100), 1)


def _c_slice(c):
    e = c["c"] * c["h"] * c["w"]
    return 0 * e, e + _slice_keep(c["c"], c["drop"]) * c["h"] * c["w"], 0 * e


def _b_act(c: dict) -> Network:
    b = NetworkBuilder("act")
    _act(b, str(c["act"]), str(c["act"]), _input(b, c))
    return b.build()


def _c_elementwise(c):
    e = c["c"] * c["h"] * c["w"]
    return e, 2 * e, 0 * e


def _b_bn(c: dict) -> Network:
    b = NetworkBuilder("bn")
    b.same(T.BATCH_NORM, "bn", _input(b, c))
    return b.build()


def _c_bn(c):
    e = c["c"] * c["h"] * c["w"]
    return 2 * e, 2 * e, 2 * c["c"]


def _b_resize(c: dict) -> Network:
    b = NetworkBuilder("resize")
    x = _input(b, c)
    n, ch, h, w = b.out_shape(x)
    sc = int(c["scale"])
    b.add(T.RESIZE, "resize", [x], (n, ch, h * sc, w * sc), mode="nearest")
    return b.build()


def _c_resize(c):
    e = c["c"] * c["h"] * c["w"]
    return e * c["scale"] ** 2, e * (1 + c["scale"] ** 2), 0 * e


def _b_conv_bn_relu(c: dict) -> Network:
    b = NetworkBuilder("conv_bn_relu")
    x = _input(b, c, hw=("hw", "hw"))
    for j in range(1, int(c["depth"]) + 1):
        x = _conv(b, f"conv{j}", x, int(c["f"]), int(c["k"]), int(c["s"]) if j == 1 else 1)
        x = b.same(T.BATCH_NORM, f"bn{j}", x)
        x = b.same(T.RELU, f"relu{j}", x)
    return b.build()


def _c_conv_bn_relu(c):
    ho = _same_out(c["hw"], c["s"])
    o = ho * ho * c["f"]
    k2 = c["k"] ** 2
    d = c["depth"]
    ops = 2 * o * c["c"] * k2 + (d - 1) * 2 * o * c["f"] * k2 + d * 3 * o
    return ops, c["c"] * c["hw"] ** 2 + d * 3 * o, c["f"] * c["c"] * k2 + (d - 1) * c["f"] ** 2 * k2 + d * 2 * c["f"]


def _b_gconv_bn_relu(c: dict) -> Network:
    """A grouped conv + BN + ReLU as in RegNet / ResNeXt blocks (c = f): the only multi-layer suite whose
    convolution is grouped, so the only source of fusion rules for GroupConv."""
    b = NetworkBuilder("gconv_bn_relu")
    x = _conv(b, "conv", _input(b, c, hw=("hw", "hw")), int(c["c"]), int(c["k"]), int(c["s"]), groups=int(c["g"]))
    b.same(T.RELU, "relu", b.same(T.BATCH_NORM, "bn", x))
    return b.build()


def _c_gconv_bn_relu(c):
    ops, act, wts = _c_gconv({**c, "h": c["hw"], "w": c["hw"], "f": c["c"]})  # the conv; BN + ReLU per output:
    o = _same_out(c["hw"], c["s"]) ** 2 * c["c"]
    return ops + 3 * o, act + 2 * o, wts + 2 * c["c"]


def _b_conv_pool(c: dict) -> Network:
    b = NetworkBuilder("conv_pool")
    x = _conv(b, "conv", _input(b, c, hw=("hw", "hw")), int(c["f"]), int(c["k"]), 1)
    b.pool("pool", x, str(c["pool"]), int(c["pk"]), int(c["ps"]))
    return b.build()


def _c_conv_pool(c):
    o = c["hw"] ** 2 * c["f"]
    po = _pool_out(c["hw"], c["pk"], c["ps"]) ** 2 * c["f"]
    return (2 * o * c["c"] * c["k"] ** 2 + 2 * po * c["pk"] ** 2, c["c"] * c["hw"] ** 2 + o + po,
            c["f"] * c["c"] * c["k"] ** 2)


def _v_conv_pool(c):
    return c["pk"] <= c["hw"]


def _b_residual(c: dict) -> Network:
    b = NetworkBuilder("residual")
    x = _input(b, c, hw=("hw", "hw"))
    f, k, s = int(c["f"]), int(c["k"]), int(c["s"])
    y = _conv(b, "conv1", x, f, k, s)
    y = b.same(T.BATCH_NORM, "bn1", y)
    y = b.same(T.RELU, "relu1", y)
    y = _conv(b, "conv2", y, f, k, 1)
    y = b.same(T.BATCH_NORM, "bn2", y)
    if c["shortcut"] == "projection":
        x = _conv(b, "proj", x, f, 1, s)
        x = b.same(T.BATCH_NORM, "proj_bn", x)
    elif c["shortcut"] != "identity":
        raise SuiteError(f"shortcut must be 'identity' or 'projection', got {c['shortcut']!r}")
    y = b.same(T.ADD, "add", [y, x])
    b.same(T.RELU, "relu2", y)
    return b.build()


def _c_residual(c):
    ho = _same_out(c["hw"], c["s"])
    o = ho * ho * c["f"]
    k2 = c["k"] ** 2
    proj = np.asarray(c["shortcut"] == "projection", dtype=np.int64)
    ops = 2 * o * c["c"] * k2 + 3 * o + 2 * o * c["f"] * k2 + 2 * o + proj * (2 * o * c["c"] + 2 * o) + 2 * o
    act = c["c"] * c["hw"] ** 2 + o * (7 + 2 * proj)
    wts = c["f"] * c["c"] * k2 + c["f"] ** 2 * k2 + 4 * c["f"] + proj * (c["f"] * c["c"] + 2 * c["f"])
    return ops, act, wts


def _v_residual(c):
    return (c["shortcut"] == "projection") | ((c["s"] == 1) & (c["c"] == c["f"]))


_BRANCH_KERNELS = (1, 3, 5, 7)


def _b_concat_branches(c: dict) -> Network:
    b = NetworkBuilder("concat_branches")
    x = _input(b, c, hw=("hw", "hw"))
    ys = [_conv(b, f"conv{j + 1}", x, int(c["f"]), _BRANCH_KERNELS[j % 4]) for j in range(int(c["branches"]))]
    b.concat("concat", ys)
    return b.build()


def _c_concat_branches(c):
    o = c["hw"] ** 2 * c["f"]
    ksum = sum(np.where(c["branches"] > j, _BRANCH_KERNELS[j] ** 2, 0) for j in range(4))
    return 2 * o * c["c"] * ksum, c["c"] * c["hw"] ** 2 + 2 * o * c["branches"], c["f"] * c["c"] * ksum


def _b_dwsep(c: dict) -> Network:
    b = NetworkBuilder("dwsep")
    x = _input(b, c, hw=("hw", "hw"))
    x = _conv(b, "dw", x, int(c["c"]), int(c["k"]), int(c["s"]), groups=int(c["c"]))
    x = b.same(T.BATCH_NORM, "dw_bn", x)
    x = b.same(T.RELU6, "dw_relu6", x)
    x = _conv(b, "pw", x, int(c["f"]), 1)
    x = b.same(T.BATCH_NORM, "pw_bn", x)
    b.same(T.RELU6, "pw_relu6", x)
    return b.build()


def _c_dwsep(c):
    ho = _same_out(c["hw"], c["s"])
    a, o = ho * ho * c["c"], ho * ho * c["f"]
    ops = 2 * a * c["k"] ** 2 + 3 * a + 2 * o * c["c"] + 3 * o
    return ops, c["c"] * c["hw"] ** 2 + 3 * a + 3 * o, c["c"] * c["k"] ** 2 + 2 * c["c"] + c["f"] * c["c"] + 2 * c["f"]


#: ``tail`` values of the conv_act / dw_act / stem suites: what consumes the activation (as `LEADS`)
TAILS = LEADS


def _tail(b: NetworkBuilder, c: dict, x: int) -> int:
    """The activation's consumer: none (the activation is the graph output) or a 1x1 depthwise conv (``dw1``).

    A runtime may not fuse an activation whose output is a graph output: ONNX Runtime folds a HardSwish into
    the convolution before it only when another layer reads it, as in every network.
    """
    return _dw1(b, c, "tail", x, "tail")


def _tail_cost(c, o, ch):
    """(ops, activation elements, weights) the ``tail`` adds: a 1x1 depthwise conv over ``o`` elements."""
    on = np.asarray(c.get("tail", "none")) == "dw1"
    return on * 2 * o, on * o, on * ch


def _b_conv_act(c: dict) -> Network:
    b = NetworkBuilder("conv_act")
    x = _conv(b, "conv", _input(b, c, hw=("hw", "hw")), int(c["f"]), int(c["k"]), 1)
    _tail(b, c, _act(b, str(c["act"]), str(c["act"]), x))
    return b.build()


def _c_conv_act(c):
    o = c["hw"] ** 2 * c["f"]
    t = _tail_cost(c, o, c["f"])
    return (2 * o * c["c"] * c["k"] ** 2 + o + t[0], c["c"] * c["hw"] ** 2 + 2 * o + t[1],
            c["f"] * c["c"] * c["k"] ** 2 + t[2])


#: ``kind`` values of the conv_mul suite
CONV_MUL_KINDS = ["swish", "product", "hardswish"]


def _b_conv_mul(c: dict) -> Network:
    """A conv whose output is multiplied element-wise (same shapes): by its own sigmoid (``swish``: SiLU
    written out, as YOLOv5 and older ONNX exports have it), by a parallel 1x1 conv's output (``product``), or
    by ``relu6(y + 3)`` and then divided by 6 (``hardswish``: ``y * relu6(y + 3) / 6``, hard-swish written out
    as in MobileNetV3 exports; the constants are per-channel here)."""
    b = NetworkBuilder("conv_mul")
    x = _input(b, c, hw=("hw", "hw"))
    y = _conv(b, "conv", x, int(c["f"]), int(c["k"]), 1)
    kind = str(c["kind"])
    if kind == "swish":
        other = b.same(T.SIGMOID, "sigmoid", y)
    elif kind == "product":
        other = _conv(b, "conv2", x, int(c["f"]), 1)
    elif kind == "hardswish":
        other = b.same(T.RELU6, "relu6", b.same(T.ADD, "add3", y))
    else:
        raise SuiteError(f"unknown kind {c['kind']!r}; choose from {CONV_MUL_KINDS}")
    m = b.same(T.MUL, "mul", [y, other])
    if kind == "hardswish":
        b.same(T.DIV, "div6", m)
    return b.build()


def _c_conv_mul(c):
    o = c["hw"] ** 2 * c["f"]
    kind = np.asarray(c["kind"])
    swish, hard = kind == "swish", kind == "hardswish"
    # after the conv and the Mul: the sigmoid (o), the 1x1 conv (2*o*c), or the add, relu6 and div (3*o)
    ops = 2 * o * c["c"] * c["k"] ** 2 + o + np.where(swish, o, np.where(hard, 3 * o, 2 * o * c["c"]))
    act = c["c"] * c["hw"] ** 2 + np.where(hard, 5, 3) * o
    return ops, act, c["f"] * c["c"] * (c["k"] ** 2 + np.where(swish | hard, 0, 1))


#: the layer between the 3x3 conv and the strided 1x1 conv of the ``stride_prop`` suite: nothing, an
#: activation (`ACTIVATIONS`), a BatchNorm, or an element-wise Add / Mul with a 1x1 conv of the input
STRIDE_MIDS = ["none", *ACTIVATIONS, "bn", "add", "mul"]
_MID_MERGE = {"add": T.ADD, "mul": T.MUL}


def _mid_type(mid: str) -> T | None:
    """The layer type of a ``stride_prop`` middle layer (None for ``none``)."""
    if mid == "none":
        return None
    if mid == "bn":
        return T.BATCH_NORM
    if mid in _MID_MERGE:
        return _MID_MERGE[mid]
    if mid in _ACT_TYPES:
        return _ACT_TYPES[mid]
    raise SuiteError(f"unknown middle layer {mid!r}; choose from {STRIDE_MIDS}")


def _stride_path(b: NetworkBuilder, c: dict, x: int, tag: str, s: int) -> None:
    y = _conv(b, f"conv{tag}", x, int(c["f"]), 3)
    t = _mid_type(str(c["mid"]))
    if t in (T.ADD, T.MUL):
        y = b.same(t, f"mid{tag}", [y, _conv(b, f"side{tag}", x, int(c["f"]), 1)])
    elif t is not None:
        y = b.same(t, f"mid{tag}", y, alpha=0.01 if t == T.LEAKY_RELU else None)
    _conv(b, f"out{tag}", y, int(c["f"]), 1, s)


def _b_stride_prop(c: dict) -> Network:
    """Two paths from one input: 3x3 conv -> middle layer -> 1x1 conv with stride 2 (``A``), and the same with
    stride 1 (``B``). A toolchain propagating strides runs conv ``convA`` at a quarter of ``convB``'s work
    when the stride passes the middle layer (`annette_torch.mapping.strides`)."""
    b = NetworkBuilder("stride_prop")
    x = _input(b, c, hw=("hw", "hw"))
    _stride_path(b, c, x, "A", 2)
    _stride_path(b, c, x, "B", 1)
    return b.build()


def _c_stride_prop(c):
    o = c["hw"] ** 2 * c["f"]
    o2 = ((c["hw"] - 1) // 2 + 1) ** 2 * c["f"]  # the stride-2 1x1 conv's output
    mid = np.asarray(c["mid"]).astype(str)
    side = np.isin(mid, list(_MID_MERGE))
    bn = mid == "bn"
    has = mid != "none"
    mid_ops = np.where(bn, 2, np.where(has, 1, 0)) * o  # BatchNorm 2 per element, the rest 1
    path = 2 * o * c["c"] * 9 + mid_ops + np.where(side, 2 * o * c["c"], 0)
    ops = 2 * path + 2 * (o + o2) * c["f"]
    act = c["c"] * c["hw"] ** 2 + 2 * o * (1 + has + side) + o + o2
    wts = 2 * (c["f"] * c["c"] * (9 + side) + c["f"] ** 2 + 2 * c["f"] * bn)
    return ops, act, wts


def _b_stem(c: dict) -> Network:
    b = NetworkBuilder("stem")
    x = _conv(b, "conv", _input(b, c, hw=("hw", "hw")), int(c["f"]), int(c["k"]), int(c["s"]))
    x = b.same(T.BATCH_NORM, "bn", x)
    _tail(b, c, _act(b, str(c["act"]), "act", x))
    return b.build()


def _c_stem(c):
    ho = _same_out(c["hw"], c["s"])
    o = ho * ho * c["f"]
    t = _tail_cost(c, o, c["f"])
    return (2 * o * c["c"] * c["k"] ** 2 + 3 * o + t[0], c["c"] * c["hw"] ** 2 + 3 * o + t[1],
            c["f"] * c["c"] * c["k"] ** 2 + 2 * c["f"] + t[2])


def _b_dw_act(c: dict) -> Network:
    b = NetworkBuilder("dw_act")
    x = _input(b, c, hw=("hw", "hw"))
    x = _conv(b, "dw", x, int(c["c"]), int(c["k"]), 1, groups=int(c["c"]))
    _tail(b, c, _act(b, str(c["act"]), str(c["act"]), x))
    return b.build()


def _c_dw_act(c):
    o = c["hw"] ** 2 * c["c"]
    t = _tail_cost(c, o, c["c"])
    return 2 * o * c["k"] ** 2 + o + t[0], c["c"] * c["hw"] ** 2 + 2 * o + t[1], c["c"] * c["k"] ** 2 + t[2]


#: channel counts of the shuffle suite: ShuffleNet V2 stage widths (x0.5 .. x2) and powers of two
SHUFFLE_CHANNELS = [24, 32, 48, 64, 96, 116, 128, 176, 192, 232, 244, 256, 352, 464, 488, 512, 976]


def _shuffle(b: NetworkBuilder, name: str, x: int, g: int) -> int:
    """Channel shuffle as the front ends see it: view to (n, g, c/g, h, w), swap axes 1-2, view back."""
    n, c, h, w = b.out_shape(x)
    x = b.add(T.RESHAPE, f"{name}_view", [x], (n, g, c // g, h, w))
    x = b.add(T.TRANSPOSE, f"{name}_transpose", [x], (n, c // g, g, h, w))
    return b.add(T.RESHAPE, f"{name}_view_back", [x], (n, c, h, w))


def _shuffle_branch(b: NetworkBuilder, name: str, x: int, f: int, s: int) -> int:
    x = b.same(T.RELU, f"{name}_relu1", b.same(T.BATCH_NORM, f"{name}_bn1", _conv(b, f"{name}_pw1", x, f, 1)))
    x = b.same(T.BATCH_NORM, f"{name}_bn2", _conv(b, f"{name}_dw", x, f, 3, s, groups=f))
    return b.same(T.RELU, f"{name}_relu3", b.same(T.BATCH_NORM, f"{name}_bn3", _conv(b, f"{name}_pw2", x, f, 1)))


def _b_shuffle(c: dict) -> Network:
    """ShuffleNet V2 units after a conv: split (one ``Slice`` layer, as the front ends trace ``chunk``), branch,
    concat, channel shuffle; a stride-2 first unit runs two branches on the whole input and doubles the width."""
    b = NetworkBuilder("shuffle")
    g, ch = int(c["g"]), int(c["c"])
    x = _input(b, c, hw=("hw", "hw"))
    x = b.same(T.RELU, "lead_relu", b.same(T.BATCH_NORM, "lead_bn", _conv(b, "lead", x, ch, 1)))
    for u in range(int(c["depth"])):
        n, cc, h, w = b.out_shape(x)
        if u == 0 and int(c["s"]) == 2:
            left = b.same(T.BATCH_NORM, f"u{u}_b1_bn", _conv(b, f"u{u}_b1_dw", x, cc, 3, 2, groups=cc))
            left = b.same(T.RELU, f"u{u}_b1_relu", b.same(T.BATCH_NORM, f"u{u}_b1_bn2",
                                                          _conv(b, f"u{u}_b1_pw", left, cc, 1)))
            right = _shuffle_branch(b, f"u{u}_b2", x, cc, 2)
        else:
            left = b.add(T.SLICE, f"u{u}_split", [x], (n, cc // 2, h, w))
            right = _shuffle_branch(b, f"u{u}_b2", left, cc // 2, 1)
        x = _shuffle(b, f"u{u}_shuffle", b.concat(f"u{u}_cat", [left, right]), g)
    return b.build()


def _c_shuffle(c):
    def branch(e_in, e_o, f):  # pw1-bn-relu, dw3x3-bn, pw2-bn-relu
        return (2 * e_in * f + 3 * e_in + 20 * e_o + 2 * e_o * f + 3 * e_o, 3 * e_in + 5 * e_o, 2 * f * f + 15 * f)

    ch, hw, depth = (np.asarray(c[k], dtype=np.float64) for k in ("c", "hw", "depth"))
    s2 = np.asarray(c["s"]) == 2
    a = hw * hw * ch
    ops, act, wts = 2 * a * ch + 3 * a, 4 * a, ch * ch + 2 * ch   # input + lead conv-bn-relu
    for u in range(int(np.max(depth))):
        on = depth > u
        if u == 0:  # a stride-2 first unit: two branches on the whole input, width doubled
            ho = _same_out(hw, 2)
            eo = ho * ho * ch
            bo, ba, bw = branch(hw * hw * ch, eo, ch)
            o2 = 2 * eo * ch + 23 * eo + bo
            a2 = 5 * eo + ba + 8 * eo
            w2 = 11 * ch + ch * ch + 2 * ch + bw
            hw, ch = np.where(s2, ho, hw), np.where(s2, 2 * ch, ch)
        e = hw * hw * ch
        bo, ba, bw = branch(e / 2, e / 2, ch / 2)
        o1, a1, w1 = bo, e / 2 + ba + 4 * e, bw
        if u == 0:
            o1, a1, w1 = np.where(s2, o2, o1), np.where(s2, a2, a1), np.where(s2, w2, w1)
        ops, act, wts = ops + on * o1, act + on * a1, wts + on * w1
    return ops, act, wts


def _v_shuffle(c):
    cc, g = np.asarray(c["c"]), np.asarray(c["g"])
    return (cc % (2 * g) == 0)


#: the se suite's values: spatial sizes and channel counts of EfficientNet / MobileNetV3 / MnasNet blocks, the
#: squeeze reduction (EfficientNet squeezes its expanded width 24-fold, MobileNetV3 4-fold) and project widths
SE_SPATIAL = [4, 7, 8, 14, 16, 28, 32, 56, 64, 112]
SE_CHANNELS = [16, 24, 32, 40, 48, 64, 72, 96, 120, 144, 192, 240, 288, 384, 480, 576, 672, 960, 1152]
SE_REDUCE = [4, 8, 16, 24]
SE_PROJECT = [16, 24, 40, 64, 80, 112, 160, 192, 320]
_SE_GATES = {"sigmoid": T.SIGMOID, "hardsigmoid": T.HARDSIGMOID}


def _b_se(c: dict) -> Network:
    """A squeeze-excite block as in EfficientNet / MobileNetV3: depthwise 3x3 + activation, global average pool,
    1x1 squeeze + activation, 1x1 excite + gate, the channel-wise product (a broadcasting ``Mul``), a 1x1
    project conv; a global pool and flatten close it, so the graph ends in a plain-layout layer (a runtime's
    reorders inside the block are then all the product's, none at the graph output)."""
    b = NetworkBuilder("se")
    ch = int(c["c"])
    if str(c["gate"]) not in _SE_GATES:
        raise SuiteError(f"unknown gate {c['gate']!r}; choose from {list(_SE_GATES)}")
    x = _act(b, str(c["act"]), "dw_act", _conv(b, "dw", _input(b, c, hw=("hw", "hw")), ch, 3, groups=ch))
    s = _act(b, str(c["act"]), "squeeze_act", _conv(b, "squeeze", b.global_pool("se_pool", x),
                                                        max(1, ch // int(c["r"])), 1))
    g = b.same(_SE_GATES[str(c["gate"])], "gate", _conv(b, "excite", s, ch, 1))
    y = _conv(b, "project", b.same(T.MUL, "scale", [x, g]), int(c["f"]), 1)
    n = b.out_shape(y)[0]
    b.add(T.FLATTEN, "flatten", [b.global_pool("pool", y)], (n, int(c["f"])))
    return b.build()


def _c_se(c):
    ch, hw, f = (np.asarray(c[k], dtype=np.float64) for k in ("c", "hw", "f"))
    sq = np.maximum(1, ch // np.asarray(c["r"]))
    e = hw * hw * ch
    ops = 22 * e + 4 * ch * sq + sq + ch + 2 * hw * hw * (ch + 1) * f
    return ops, 4 * e + 3 * ch + 2 * sq + hw * hw * f + 2 * f, 9 * ch + 2 * ch * sq + ch * f


def _b_head(c: dict) -> Network:
    """A classifier head as in AlexNet / VGG / small landmark nets: 1x1 conv + ReLU, optionally a 2x2 max pool,
    then Flatten of the whole feature map into a fully connected layer. The only suite whose Flatten reads
    more than a pooled vector: elsewhere it sees <= a few thousand elements and extrapolated to 20x its cost."""
    b = NetworkBuilder("head")
    x = b.same(T.RELU, "relu", _conv(b, "conv", _input(b, c, hw=("hw", "hw")), int(c["c"]), 1))
    if c["pool"] == "max":
        x = b.pool("pool", x, "max", 2)
    elif c["pool"] != "none":
        raise SuiteError(f"pool must be 'none' or 'max', got {c['pool']!r}")
    n, ch, h, w = b.out_shape(x)
    b.linear("fc", b.add(T.FLATTEN, "flatten", [x], (n, ch * h * w)), int(c["f"]))
    return b.build()


def _c_head(c):
    a = c["hw"] ** 2 * c["c"]
    pool = np.asarray(c["pool"]) == "max"
    p = np.where(pool, (np.asarray(c["hw"]) // 2) ** 2 * c["c"], a)  # the flattened elements
    return (2 * a * c["c"] + a + pool * 8 * p + 2 * p * c["f"], 3 * a + (1 + pool) * p + c["f"],
            c["c"] * c["c"] + p * c["f"])


def _v_head(c):
    return (np.asarray(c["pool"]) == "none") | (np.asarray(c["hw"]) >= 2)


#: weighted layers of the cold_weights suite: kernel size (0 = fully connected)
_COLD_LAYERS = {"fc": 0, "conv1": 1, "conv3": 3}


def _cold_input_side(c):
    """Input side of a cold_weights config: ``s`` times the pool window that makes ~``flush`` MB of input."""
    want = np.sqrt(np.asarray(c["flush"], float) * 2**20 / (4.0 * np.asarray(c["c"], float)))
    r = np.maximum(1, np.round(want / np.asarray(c["s"], float))).astype(np.int64)
    return np.where(np.asarray(c["flush"]) > 0, r, 1) * c["s"]


def _b_cold_weights(c: dict) -> Network:
    k = _COLD_LAYERS.get(str(c["layer"]))
    if k is None:
        raise SuiteError(f"layer must be one of {list(_COLD_LAYERS)}, got {c['layer']!r}")
    side = int(_cold_input_side(c))
    b = NetworkBuilder("cold_weights")
    x = b.input("x", (1, int(c["c"]), side, side))
    if k == 0:
        b.linear("w", b.global_pool("pool", x), int(c["f"]))
    else:
        if side > int(c["s"]):
            x = b.pool("pool", x, "max", side // int(c["s"]))
        _conv(b, "w", x, int(c["f"]), k)
    return b.build()


def _c_cold_weights(c):
    k = np.vectorize(lambda v: _COLD_LAYERS.get(str(v), 0))(np.asarray(c["layer"], dtype=object)).astype(np.int64)
    side = _cold_input_side(c)
    s2 = np.asarray(c["s"]) ** 2
    k2 = np.maximum(k, 1) ** 2
    inp = c["c"] * side ** 2
    pooled = (k == 0) | (side > c["s"])  # fc: always a global pool; conv: a pool unless the input is s x s
    return (2 * s2 * c["c"] * c["f"] * k2 + np.where(pooled, 2 * inp, 0),  # pools: 2 ops per window element
            inp + np.where(pooled, c["c"] * s2, 0) + c["f"] * s2, c["c"] * c["f"] * k2)


def _v_cold_weights(c):
    layer = np.asarray(c["layer"], dtype=object)
    s = np.asarray(c["s"])
    # fc: on the 1 x 1 pooled map; a 3x3 conv needs s >= 2 (on 1 x 1 only its centre tap reads weights)
    return np.where(layer == "fc", s == 1, (np.asarray(c["c"]) <= 4096) & ((layer != "conv3") | (s >= 2)))


# ------------------------------------------------------------------------------------------------------
# multi-kernel graphs


def multi_kernel(networks: Sequence[Network], name: str | None = None) -> Network:
    """Independent networks side by side in one graph: each keeps its own input(s), nothing connects them,
    so a toolchain cannot fuse across kernels; layer ``L`` of network ``i`` is named ``k{i}/L``.

    Measuring several kernels in one compiled model cuts the per-model overhead (compile, session setup).
    Layer attributes (``attrs``) are kept.
    """
    nets = list(networks)
    if not nets:
        raise SuiteError("multi_kernel needs at least one network")
    names: list[str] = []
    for i, n in enumerate(nets):
        names.extend(f"k{i}/{x}" for x in n.names)
    sizes = [len(n) for n in nets]
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    edges = [n.edges + off for n, off in zip(nets, offsets) if n.edges.size]
    keys = sorted({k for n in nets for k in n.attrs})
    attrs = {k: [v for n in nets for v in (n.attrs.get(k) or [None] * len(n))] for k in keys}
    if name is None:
        joined = "+".join(n.name for n in nets)
        name = joined if len(joined) <= 120 else \
            f"multi{len(nets)}-{hashlib.sha1(joined.encode()).hexdigest()[:10]}"
    return Network(name=name, names=names, types=np.concatenate([n.types for n in nets]),
                   cols={c: np.concatenate([n.cols[c] for n in nets]) for c in INT_COLUMNS},
                   edges=np.concatenate(edges) if edges else np.zeros((0, 2), np.int64), attrs=attrs)


# ------------------------------------------------------------------------------------------------------
# reference data: templates and sweep tables


def reference_dir() -> Path | None:
    """The ANNETTE reference data folder: ``$ANNETTE_REFERENCE_DIR``, else ``shared/annette-reference`` next to
    the working directory or the checkout; None when absent."""
    env = os.environ.get(_REF_ENV)
    cands = [Path(env)] if env else []
    cwd = Path.cwd()
    cands += [cwd.parent / "shared" / "annette-reference", cwd / "shared" / "annette-reference",
              Path(__file__).resolve().parents[3] / "shared" / "annette-reference"]
    for c in cands:
        if c.is_dir():
            return c
    return None


def _resolve(path: str | os.PathLike, sub: str, ext: str) -> Path:
    p = Path(path)
    if p.is_file():
        return p
    ref = reference_dir()
    if ref is not None and not p.is_absolute():
        base = ref / sub
        stem = p.name if p.suffix == ext else p.name + ext
        for cand in [base / p.parent / stem, *sorted(base.rglob(stem))]:
            if cand.is_file():
                return cand
    where = f" (looked in {ref / sub})" if ref is not None else \
        f" (reference data not found: set ${_REF_ENV})"
    raise SuiteError(f"no such file: {str(path)!r}{where}")


def load_sweep_table(path: str | os.PathLike) -> list[dict]:
    """Rows of an ANNETTE sweep table (CSV with a header, e.g. ``width,height,channels,filters,k_size,stride,
    dilation,batch_size``) as dicts of ints (floats / strings where a value is not an integer).

    ``path`` is a file or a table name of the reference data (``"paper35k"``).
    """
    p = _resolve(path, "benchmark-configs", ".csv")
    try:
        with open(p, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            if not reader.fieldnames:
                raise SuiteError(f"{p}: empty table (no header)")
            rows = [{k.strip(): _number(v) for k, v in row.items() if k is not None} for row in reader]
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise SuiteError(f"cannot read sweep table {p}: {e}") from None
    return rows


def _number(v: str | None) -> Any:
    v = (v or "").strip()
    try:
        return int(v)
    except ValueError:
        try:
            return float(v)
        except ValueError:
            return v


_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
        ast.Div: operator.floordiv}


def _fill_value(v: Any, config: Mapping[str, Any]) -> Any:
    """A template value with placeholders replaced: ``"channels"`` -> config value, ``"2*channels"`` -> evaluated."""
    if isinstance(v, list):
        return [_fill_value(x, config) for x in v]
    if isinstance(v, dict):
        return {k: _fill_value(x, config) for k, x in v.items()}
    if not isinstance(v, str):
        return v
    if v in config:
        return _plain(config[v])
    try:
        tree = ast.parse(v, mode="eval").body
    except SyntaxError:
        return v
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    if not names or not names <= set(config):
        return v

    def ev(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.Name):
            return config[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.left), ev(node.right))
        raise ValueError(v)

    try:
        return int(ev(tree))
    except (ValueError, TypeError, ZeroDivisionError):
        return v


def _spatial(v: Any, rank: int, default: int) -> list[int]:
    """Per-spatial-axis values from an NHWC-style list ``[1, a, b, 1]`` / ``[1, a, 1]``."""
    n_sp = rank - 2
    if isinstance(v, list) and len(v) == rank:
        vals = v[1:-1]
    elif isinstance(v, list) and len(v) == n_sp:
        vals = v
    else:
        vals = [default] * n_sp
    return [int(x) if isinstance(x, (int, np.integer)) else default for x in vals]


def _window_out(size: int, k: int, s: int, d: int, padding: str) -> tuple[int, int]:
    """(output size, total padding) of a sliding window under SAME or VALID padding."""
    eff = d * (k - 1) + 1
    if padding == "same":
        out = -(-size // s)
        return out, max((out - 1) * s + eff - size, 0)
    out = (size - eff) // s + 1
    if out < 1:
        raise SuiteError(f"kernel {k} (dilation {d}) does not fit size {size} with VALID padding")
    return out, 0


def _pads8(totals: list[int]) -> list[int]:
    """ANNETTE's 8-entry pads (NHWC begins, NHWC ends) from total padding per spatial axis (1 or 2 axes)."""
    t = list(totals) + [0] * (2 - len(totals))
    b = [x // 2 for x in t]
    e = [x - x // 2 for x in t]
    return [0, b[0], b[1], 0, 0, e[0], e[1], 0]


#: Placeholder values used when the config does not give them (paper35k.csv has no stride/dilation columns).
_TEMPLATE_DEFAULTS = {"batch_size": 1, "stride": 1, "dilation": 1}


def from_annette_template(path: str | os.PathLike, config: Mapping[str, Any], padding: str = "same",
                          name: str | None = None) -> Network:
    """Fill an original ANNETTE benchmark template with ``config`` and convert it to a `Network`.

    ``path`` is a template file or a template name of the reference data (``"conv2d"``, ``"dw-conv2d"``,
    ``"annette_convnet"``...). Every string value equal to a config key (``"channels"``, ``"k_size"``,
    ``"width"``, ``"height"``, ``"filters"``, ``"stride"``, ``"batch_size"``, ``"dilation"``) or an arithmetic
    expression of config keys (``"2*channels"``) is replaced; ``batch_size``, ``stride`` and ``dilation``
    default to 1. The templates leave the other shapes at -1;
    they are computed layer by layer: convolutions and pools with ``padding="same"`` (output
    ``ceil(size / stride)``, the padding TensorFlow's SAME adds, split begin = total // 2) as the original
    ANNETTE generator built them — the templates' all-zero ``pads`` were never used, and the multi-layer
    template's three parallel convolutions with kernels kxk, 1xk and kx1 only add up with SAME — or
    ``"valid"``; a pool kernel of -1 is a global pool; ``FullyConnected``/``MatMul`` flatten their input;
    ``Concat`` adds channels; other layers keep their input's shape. Shapes given by the template that
    contradict this are replaced.

    The templates list the input as ``[batch_size, width, height, channels]`` in NHWC positions, so the
    network's H (NCHW index 2) is the config's ``width`` and W is ``height`` — as in the original generator's
    TensorFlow placeholder. Raises `SuiteError` for a missing file, a placeholder the config does not fill,
    or a shape that cannot be computed.
    """
    if padding not in ("same", "valid"):
        raise SuiteError(f"padding must be 'same' or 'valid', got {padding!r}")
    p = _resolve(path, "graphs/templates", ".json")
    try:
        with open(p, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise SuiteError(f"cannot read template {p}: {e}") from None
    layers = data.get("layers") if isinstance(data, dict) else None
    if not isinstance(layers, dict) or not layers:
        raise SuiteError(f"{p}: not an ANNETTE graph template (no 'layers' object)")
    config = {**_TEMPLATE_DEFAULTS, **config}
    filled = {k: _fill_value(copy.deepcopy(v), config) for k, v in layers.items()}
    order = _template_order(filled, p)
    out_shapes: dict[str, list[int]] = {}
    for key in order:
        try:
            out_shapes[key] = _template_layer(filled[key], out_shapes, padding)
        except SuiteError as e:
            raise SuiteError(f"template {p.name}, layer {key!r}: {e}") from None
    from ..frontends.annette_json import from_annette_json

    net_name = name or f"{data.get('name') or p.stem}-{config_id(config)}"
    return from_annette_json({"name": net_name, "layers": filled}, name=net_name)


def _template_order(layers: dict, p: Path) -> list[str]:
    order: list[str] = []
    state: dict[str, int] = {}

    def visit(k: str, stack: tuple) -> None:
        if state.get(k) == 2:
            return
        if state.get(k) == 1:
            raise SuiteError(f"template {p.name}: cycle through {k!r}")
        state[k] = 1
        for par in layers[k].get("parents") or []:
            par = str(par).split(":")[0]
            if par in layers:
                visit(par, stack + (k,))
        state[k] = 2
        order.append(k)

    for k in layers:
        visit(k, ())
    return order


def _ints(shape: Any, what: str) -> list[int]:
    if not isinstance(shape, list) or not shape:
        raise SuiteError(f"{what} {shape!r} is not a shape")
    bad = [x for x in shape if isinstance(x, str)]
    if bad:
        raise SuiteError(f"placeholder(s) {bad} in {what} are not in the config")
    return [int(x) for x in shape]


def _template_layer(L: dict, out_shapes: dict, padding: str) -> list[int]:
    """Compute (and write into ``L``) the NHWC input/output shapes and pads of one template layer."""
    typ = str(L.get("type"))
    if typ in ("DataInput", "Input"):
        shp = _ints(L.get("output_shape"), "input shape")
        if any(x <= 0 for x in shp[1:]):
            raise SuiteError(f"input shape {shp} has unfilled (-1) dimensions")
        L["output_shape"] = shp
        return shp
    parents = [str(q).split(":")[0] for q in (L.get("parents") or []) if str(q).split(":")[0] in out_shapes]
    if not parents:
        raise SuiteError("no parent to take the input shape from")
    ins = list(out_shapes[parents[0]])
    rank = len(ins)
    n = ins[0]
    if typ in ("DepthwiseConv1d",):
        typ = L["type"] = "DepthwiseConv"
    if typ in ("Conv", "Conv1d", "DepthwiseConv", "ConvTranspose", "ConvTranspose2d", "Pool", "Pool1d"):
        if rank < 3:
            raise SuiteError(f"{typ} needs a spatial input, got shape {ins}")
        spatial = ins[1:-1]
        c_in = ins[-1]
        strides = _spatial(L.get("strides"), rank, 1)
        dil = _spatial(L.get("dilations"), rank, 1)
        ks = L.get("kernel_shape")
        pool = typ.startswith("Pool")
        if pool:
            kern = _spatial(ks, rank, 1)
            if any(k == -1 for k in kern) or (isinstance(ks, list) and -1 in ks[1:-1]):  # global pool
                L["kernel_shape"] = [1, *spatial, 1] if rank == 4 else [1, spatial[0], 1]
                L["strides"] = [1] * rank
                L["pads"] = _pads8([0] * len(spatial))
                out = [n, *([1] * len(spatial)), c_in]
                L["input_shape"], L["output_shape"] = ins, out
                return out
            c_out = c_in
        else:
            ks = _ints(ks, "kernel_shape")
            n_sp = rank - 2
            kern = ks[:n_sp] if len(ks) >= n_sp + 2 else ks[:1] + [1] * (n_sp - 1)
            if typ == "DepthwiseConv":
                c_out = c_in if ks[-1] in (1, c_in) else ks[-1]
            else:
                c_out = ks[-1]
        out_sp, totals = [], []
        for size, k, s, d in zip(spatial, kern, strides, dil):
            if typ.startswith("ConvTranspose"):
                o = size * s if padding == "same" else (size - 1) * s + d * (k - 1) + 1
                totals.append(max((size - 1) * s + d * (k - 1) + 1 - o, 0))
                out_sp.append(o)
            else:
                o, t = _window_out(size, k, s, d, padding)
                out_sp.append(o)
                totals.append(t)
        L["pads"] = _pads8(totals)
        out = [n, *out_sp, c_out]
    elif typ in ("FullyConnected", "MatMul"):
        ins = [n, math.prod(ins[1:])]
        f = (L.get("output_shape") or [None, None])[-1]
        if isinstance(f, str) or not isinstance(f, int) or f <= 0:
            raise SuiteError(f"output features {f!r} unknown (fill 'filters')")
        out = [n, f]
    elif typ == "Flatten":
        out = [n, math.prod(ins[1:])]
    elif typ == "Concat":
        shapes = [out_shapes[q] for q in parents]
        if any(len(s) != rank or s[:-1] != ins[:-1] for s in shapes):
            raise SuiteError(f"cannot concatenate shapes {shapes} along channels")
        out = [*ins[:-1], sum(s[-1] for s in shapes)]
    else:
        out = list(ins)
    L["input_shape"], L["output_shape"] = ins, out
    return out


# ------------------------------------------------------------------------------------------------------
# the paper's convolution table


def _paper_rows() -> list[dict]:
    rows = load_sweep_table("paper35k")
    out = []
    for r in rows:
        c = {"h": int(r["height"]), "w": int(r["width"]), "c": int(r["channels"]), "f": int(r["filters"]),
             "k": int(r["k_size"]), "s": int(r.get("stride", 1) or 1)}
        if int(r.get("dilation", 1) or 1) != 1:
            c["d"] = int(r["dilation"])
        if int(r.get("batch_size", 1) or 1) != 1:
            c["n"] = int(r["batch_size"])
        out.append(c)
    return out


_PAPER_CACHE: dict[str, list[dict]] = {}


def _paper_table() -> list[dict]:
    ref = reference_dir()
    key = str(ref)
    if key not in _PAPER_CACHE:
        _PAPER_CACHE[key] = _paper_rows()
    return [dict(r) for r in _PAPER_CACHE[key]]


# ------------------------------------------------------------------------------------------------------
# registry


def _suites() -> dict[str, Suite]:
    hw = {"h": SPATIAL, "w": SPATIAL}
    sq = {"hw": SPATIAL}
    ch = CHANNELS
    # grouped convs: ResNeXt / RegNet widths and group counts (group widths 4..64 channels), not just powers of 2
    ch_g = [16, 24, 32, 48, 64, 96, 128, 160, 192, 240, 256, 384, 400, 512, 640, 768, 1024, 2048]
    s = [
        Suite("conv", "2-D convolution (h, w, c, f, kernel, stride)", {**hw, "c": ch, "f": ch, "k": KERNELS,
              "s": STRIDES}, _b_conv, cost=_c_conv, optional={"d": 1, "n": 1, "lead": "none"}),
        Suite("dwconv", "depthwise convolution (h, w, c, kernel, stride)", {**hw, "c": ch, "k": KERNELS,
              "s": STRIDES}, _b_dwconv, cost=_c_dwconv, optional={"lead": "none"}),
        Suite("gconv", "grouped convolution (h, w, c, f, groups, kernel, stride)",
              {**hw, "c": ch_g, "f": ch_g, "g": [2, 4, 5, 8, 10, 16, 20, 25, 32, 40, 64], "k": KERNELS, "s": STRIDES}, _b_gconv,
              cost=_c_gconv, valid=_v_gconv, optional={"lead": "none"}),
        Suite("gconv_same", "grouped convolution keeping the channel count, as in ResNeXt / RegNet "
              "(h, w, c = f, groups, kernel, stride)",
              {**hw, "c": ch_g, "g": [2, 4, 5, 8, 10, 16, 20, 25, 32, 40, 64], "k": KERNELS, "s": STRIDES},
              _b_gconv_same, cost=_c_gconv_same, valid=_v_gconv_same, optional={"lead": "none"}),
        Suite("convtranspose", "transposed convolution, the upsampling of decoders (h, w, c, f, kernel x stride "
              "2x2 / 4x2 / 3x1, output s times the input)", {**hw, "c": ch, "f": ch, "ks": DECONV}, _b_convtranspose,
              cost=_c_convtranspose, optional={"lead": "none"}),
        Suite("maxpool", "max pooling (h, w, c, kernel 2..10, stride)", {**hw, "c": ch, "k": POOL_KERNELS,
              "s": STRIDES}, _b_pool("max"), cost=_c_pool, valid=_v_pool, optional={"lead": "none"}),
        Suite("avgpool", "average pooling (h, w, c, kernel 2..10, stride)", {**hw, "c": ch, "k": POOL_KERNELS,
              "s": STRIDES}, _b_pool("avg"), cost=_c_pool, valid=_v_pool, optional={"lead": "none"}),
        Suite("fc", "fully connected (batch rows n, in features c, out features f)",
              {"n": [1, 4, 16], "c": FC_INPUTS, "f": FEATURES}, _b_fc, cost=_c_fc, max_weight_bytes=512 * 2**20),
        Suite("add", "element-wise add of two inputs (h, w, c)", {**hw, "c": ch}, _b_add, cost=_c_add),
        Suite("eltwise_const", "element-wise op of a tensor and a per-channel constant (h, w, c, op: "
              + "/".join(CONST_OPS) + ")", {**hw, "c": ch, "op": list(CONST_OPS)}, _b_eltwise_const,
              cost=_c_eltwise_const),
        Suite("concat", "channel concat of 2-4 inputs (h, w, c per input)", {**hw, "c": ch, "inputs": [2, 3, 4]},
              _b_concat, cost=_c_concat, optional={"lead": "none"}),
        Suite("slice", "leading channels of a tensor (h, w, c, drop % of the channels, at least one)",
              {**hw, "c": [c for c in ch if c >= 2], "drop": [0, 25, 50, 75]}, _b_slice, cost=_c_slice,
              optional={"lead": "none"}),
        Suite("act", "activation (h, w, c, kind: " + "/".join(ACTIVATIONS) + ")",
              {**hw, "c": ch, "act": ACTIVATIONS}, _b_act, cost=_c_elementwise),
        Suite("bn", "batch normalization (h, w, c)", {**hw, "c": ch}, _b_bn, cost=_c_bn),
        Suite("resize", "nearest upsampling x2/x4 (h, w, c, scale)", {**hw, "c": ch, "scale": [2, 4]},
              _b_resize, cost=_c_resize),
        Suite("conv_bn_relu", "conv-bn-relu chains of 1-3 blocks (hw, c, f, kernel, stride of the first)",
              {**sq, "c": ch, "f": ch, "k": KERNELS, "s": STRIDES, "depth": [1, 2, 3]}, _b_conv_bn_relu,
              kind="multi", cost=_c_conv_bn_relu),
        Suite("conv_pool", "conv followed by max/avg pool (hw, c, f, kernel, pool kind, pool size 2-4, stride)",
              {**sq, "c": ch, "f": ch, "k": KERNELS, "pool": ["max", "avg"], "pk": [2, 3, 4], "ps": STRIDES},
              _b_conv_pool, kind="multi", cost=_c_conv_pool, valid=_v_conv_pool),
        Suite("residual", "conv-bn-relu-conv-bn + add (identity or 1x1 projection shortcut) + relu",
              {**sq, "c": ch, "f": ch, "k": [1, 3], "s": STRIDES, "shortcut": ["identity", "projection"]},
              _b_residual, kind="multi", cost=_c_residual, valid=_v_residual),
        Suite("concat_branches", "2-4 parallel convs (kernels 1/3/5/7) concatenated (hw, c, f per branch)",
              {**sq, "c": ch, "f": ch, "branches": [2, 3, 4]}, _b_concat_branches, kind="multi",
              cost=_c_concat_branches),
        Suite("dwsep", "depthwise-separable block dw-bn-relu6-pw1x1-bn-relu6 (hw, c, f, dw kernel, stride)",
              {**sq, "c": ch, "f": ch, "k": [3, 5], "s": STRIDES}, _b_dwsep, kind="multi", cost=_c_dwsep),
        Suite("conv_act", "conv (stride 1) + activation (hw, c, f, kernel, kind)",
              {**sq, "c": ch, "f": ch, "k": KERNELS, "act": ACTIVATIONS}, _b_conv_act, kind="multi",
              cost=_c_conv_act, optional={"tail": "none"}),
        Suite("pw_act", "pointwise (1x1) conv + activation, as in MobileNetV2/V3 and EfficientNet blocks: whether "
              "a runtime fuses the activation can depend on the shape (hw, c, f, kind "
              + "/".join(PW_ACTIVATIONS) + ")", {**sq, "c": ch, "f": ch, "k": [1], "act": PW_ACTIVATIONS},
              _b_conv_act, kind="multi", cost=_c_conv_act, optional={"tail": "none"}),
        Suite("conv_mul", "conv (stride 1) times its sigmoid (SiLU written out), times a parallel 1x1 conv, or "
              "hard-swish written out (y * relu6(y + 3) / 6): a same-shape Mul inside a network (hw, c, f, kernel, "
              "kind " + "/".join(CONV_MUL_KINDS) + ")",
              {**sq, "c": ch, "f": ch, "k": KERNELS, "kind": CONV_MUL_KINDS}, _b_conv_mul, kind="multi",
              cost=_c_conv_mul),
        Suite("stride_prop", "3x3 conv -> middle layer (none, activation, bn, add, mul) -> 1x1 conv with stride 2, "
              "next to the same path with stride 1: does the toolchain compute only the pixels the strided conv "
              "reads (hw, c, f, mid)", {"hw": [14, 28, 56], "c": [16, 32, 64, 128], "f": [16, 32, 64, 128],
                                        "mid": STRIDE_MIDS}, _b_stride_prop, kind="multi", cost=_c_stride_prop),
        Suite("dw_act", "depthwise conv (stride 1) + activation (hw, c, kernel, kind)",
              {**sq, "c": ch, "k": KERNELS, "act": ACTIVATIONS}, _b_dw_act, kind="multi", cost=_c_dw_act,
              optional={"tail": "none"}),
        Suite("stem", "a network's first conv on an image: 1-4 input channels (hw, c, f, kernel, stride) + bn "
              "+ activation", {"hw": STEM_SPATIAL, "c": [1, 3, 4], "f": [8, 16, 24, 32, 48, 64, 96],
                               "k": [3, 5, 7], "s": STRIDES, "act": ["relu", "relu6", "silu", "hardswish"]},
              _b_stem, kind="multi", cost=_c_stem, optional={"tail": "none"}),
        Suite("shuffle", "ShuffleNet V2 units after a 1x1 conv: split, conv-dw-conv branch, concat, channel shuffle "
              "(hw, c, groups g, stride of the first unit, units)",
              {"hw": [7, 14, 28, 56, 112], "c": SHUFFLE_CHANNELS, "g": [2, 4], "s": [1, 2], "depth": [1, 2, 3]},
              _b_shuffle, kind="multi", cost=_c_shuffle, valid=_v_shuffle),
        Suite("se", "squeeze-excite block: dw3x3-act, pool, 1x1 squeeze-act, 1x1 excite-gate, channel product, 1x1 "
              "project (hw, c, squeeze reduction r, project width f, act relu/silu, gate sigmoid/hardsigmoid)",
              {"hw": SE_SPATIAL, "c": SE_CHANNELS, "r": SE_REDUCE, "f": SE_PROJECT, "act": ["relu", "silu"],
               "gate": list(_SE_GATES)}, _b_se, kind="multi", cost=_c_se),
        Suite("gconv_bn_relu", "grouped conv (c = f, as in RegNet / ResNeXt) + bn + relu (hw, c, groups, kernel, "
              "stride)", {**sq, "c": ch_g, "g": [2, 4, 5, 8, 10, 16, 20, 25, 32, 40, 64], "k": [1, 3, 5],
                          "s": STRIDES}, _b_gconv_bn_relu, kind="multi", cost=_c_gconv_bn_relu,
              valid=_v_gconv_same),
        Suite("head", "classifier head: 1x1 conv + relu, optional 2x2 max pool, flatten, FC (hw, c, f, pool)",
              {"hw": [1, 2, 4, 5, 6, 7, 8, 10, 12, 14], "c": [32, 64, 96, 128, 160, 256, 384, 512],
               "f": [10, 16, 32, 64, 128, 256], "pool": ["none", "max"]}, _b_head, kind="multi", cost=_c_head,
              valid=_v_head),
        Suite("cold_weights", "FC / 1x1 / 3x3 conv (c, f, spatial s) after a pool reading ~flush MB of input: "
              "weights pushed out of the caches as inside a network",
              {"layer": list(_COLD_LAYERS), "c": [128, 256, 512, 1024, 2048, 4096, 8192, 16384],
               "f": [128, 256, 512, 1000, 2048, 4096], "s": [1, 2, 4, 7], "flush": [0, 1, 2, 4, 8, 16, 32, 48]},
              _b_cold_weights, kind="multi", default_sampler="random", cost=_c_cold_weights,
              valid=_v_cold_weights, max_weight_bytes=256 * 2**20),
        Suite("paper_conv", "the paper's conv configurations (paper35k.csv of the ANNETTE reference data)",
              {"h": PAPER_SPATIAL, "w": PAPER_SPATIAL, "c": PAPER_CHANNELS, "f": PAPER_CHANNELS, "k": KERNELS,
               "s": [1]}, _b_conv, default_sampler="table", cost=_c_conv, optional={"d": 1, "n": 1},
              table=_paper_table),
    ]
    return {x.name: x for x in s}


SUITES: dict[str, Suite] = _suites()


def get_suite(name: str) -> Suite:
    """The suite called ``name`` (`SuiteError` listing the names if unknown)."""
    try:
        return SUITES[name]
    except KeyError:
        raise SuiteError(f"unknown suite {name!r}; choose from {', '.join(SUITES)}") from None


def list_suites() -> dict[str, str]:
    """Suite name -> description with its number of feasible configs."""
    out = {}
    for name, s in SUITES.items():
        try:
            what = "rows" if s.default_sampler == "table" else "configs"
            out[name] = f"{s.description} [{s.kind}; {s.count():,} {what}]"
        except SuiteError as e:
            out[name] = f"{s.description} [{s.kind}; unavailable: {e}]"
    return out
