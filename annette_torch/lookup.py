"""Per-layer cost lookup and differentiable expected latency, for training loops and NAS.

`layer_costs` maps each submodule (qualified name) or IR layer of a model to its predicted time, so a
training loop can read or regularise it. `LatencyTable` caches the predicted latency of every candidate op
of a search space (one vectorised estimation pass when built) and turns architecture weights into the
ProxylessNAS expected latency ``E[lat] = sum_b sum_k p_bk * lat_bk + fixed`` as a torch expression, so a
supernet's loss can include it; a cached evaluation with its gradient costs tens of microseconds.

Additivity caveat: a table estimates each block alone, so a fusion rule joining the last layer of one
block with the first of the next is not seen, and the full network may differ from `LatencyTable.exact`.
For MobileNetV2-style blocks on the shipped platforms no rule crosses a block boundary (blocks end in
BatchNorm or Add, start with a convolution, and no rule has those as primary), so the sum is exact up to
float rounding (measured: at most 5e-16 relative on zcu102 and ncs2); `tests/test_lookup.py` checks it
against `estimate` of the full network.
"""

from __future__ import annotations

import json
import logging
import os
import warnings
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from .errors import AnnetteError
from .ir import LayerType, Network
from .platform import Platform, load_platform

if TYPE_CHECKING:  # torch is imported lazily: building or saving a table does not need it
    import torch

    from .estimator import Estimate

__all__ = ["layer_costs", "costs_from_estimate", "LatencyTable", "TABLE_SCHEMA", "block_latencies", "mean_block_traffic"]

log = logging.getLogger(__name__)

TABLE_SCHEMA = "annette-torch/latency-table"
TABLE_SCHEMA_VERSION = 1


# ------------------------------------------------------------------------------------------------------
# per-layer cost lookup


def layer_costs(model: Any, platform: str | os.PathLike | Platform = "zcu102",
                input_shape: Sequence[int] | None = None, by: str = "module",
                depth: int | None = None) -> dict[str, float]:
    """Predicted ms per submodule qualified name (``by="module"``, root ``""``) or per IR layer (``"layer"``).

    Arguments in `estimate`'s order; ``platform`` defaults to ``zcu102``. A fused group's time goes to the
    module of the layer that executes it; functional layers count for the module whose ``forward`` calls
    them. ``depth`` truncates module names to their first components (``depth=1``: per top-level child).
    Values sum to ``estimate(model, platform, input_shape).total_ms``. The order of earlier releases,
    ``(model, input_shape, platform)``, still works with a `DeprecationWarning`.
    """
    if _looks_like_shape(platform) and not _looks_like_shape(input_shape):
        warnings.warn("layer_costs(model, input_shape, platform) is deprecated: use layer_costs(model, platform, "
                      "input_shape), the order of estimate()", DeprecationWarning, stacklevel=2)
        platform, input_shape = (input_shape if input_shape is not None else "zcu102"), platform  # type: ignore[assignment]
    from .estimator import estimate

    est = estimate(model, platform, input_shape)
    attrs = est.network.attrs
    if by == "module" and "module" not in attrs and "scope" not in attrs and not isinstance(model, Network):
        log.warning("layer_costs(%s): the traced network carries no module names (ONNX fallback?); keys are "
                    "IR layer names", est.network.name)
    return costs_from_estimate(est, by=by, depth=depth)


def _looks_like_shape(x: Any) -> bool:
    """A tuple or list of ints (an input shape), as opposed to a platform name, path or `Platform`."""
    return isinstance(x, (tuple, list)) and all(isinstance(v, (int, np.integer)) for v in x)


def costs_from_estimate(est: "Estimate", by: str = "module", depth: int | None = None) -> dict[str, float]:
    """`layer_costs` of an existing `Estimate` (no re-tracing).

    A network without module names (built directly, or read from ONNX) is keyed by layer names, its
    inputs by ``""``.
    """
    net: Network = est.network
    t = est.time_ms
    if by == "layer":
        return {name: float(v) for name, v in zip(net.names, t)}
    if by != "module":
        raise ValueError(f"layer_costs: by must be 'module' or 'layer', got {by!r}")
    if depth is not None and depth < 0:
        raise ValueError(f"layer_costs: depth must be >= 0, got {depth}")
    mods = net.attrs.get("module")
    scopes = net.attrs.get("scope")
    if mods is None and scopes is None:
        keys = [n if t_ != LayerType.INPUT else "" for n, t_ in zip(net.names, net.types)]
    else:
        keys = []
        for i in range(len(net)):
            k = (mods[i] if mods is not None else None) or (scopes[i] if scopes is not None else None) or ""
            keys.append(k)
    out: dict[str, float] = {}
    for k, v in zip(keys, t):
        if depth is not None:
            k = ".".join(k.split(".")[:depth]) if k else k
        out[k] = out.get(k, 0.0) + float(v)
    return out


# ------------------------------------------------------------------------------------------------------
# latency table


def block_latencies(plat: Platform, nets: Sequence[Network], count_input: bool = False,
                     context_bytes: float | None = None, count_output: bool = False) -> np.ndarray:
    """Predicted ms of each network, in one vectorised pass over all of them, Input layers excluded.

    Input layers are excluded because a block's input is the previous block's output: the full network
    pays for it once, as its own input layer (``count_input=True`` for the part holding it); so are the
    reorders a toolchain inserts at graph inputs and outputs (a block's ends are inside the network;
    ``count_output=True`` for the part writing the network's output).
    ``context_bytes``: the traffic of the network the blocks belong to (for the platform's cache model).
    """
    if not nets:
        return np.zeros(0)
    big, seg = Network.concat(list(nets))
    mapped = plat.mapping.apply(big)
    t, _ = plat.predict(mapped.network, segments=seg[mapped.kept], context_bytes=context_bytes,
                        input_reorders=count_input, output_reorders=count_output)
    if not count_input:
        t = np.where(mapped.network.types == LayerType.INPUT, 0.0, t)
    return np.bincount(seg[mapped.kept], weights=t, minlength=len(nets))


def _traffic(plat: Platform, nets: Sequence[Network]) -> np.ndarray:
    """Bytes each network moves per inference on ``plat`` (after mapping), Input layers excluded."""
    if not nets:
        return np.zeros(0)
    big, seg = Network.concat(list(nets))
    mapped = plat.mapping.apply(big)
    byts = np.where(mapped.network.types == LayerType.INPUT, 0.0, plat.layer_bytes(mapped.network))
    return np.bincount(seg[mapped.kept], weights=byts, minlength=len(nets))


def mean_block_traffic(plat: Platform, blocks: Sequence[Sequence[Network | None]],
                   fixed: Sequence[Network] = ()) -> float | None:
    """Traffic of the network the blocks belong to: the fixed parts plus each block's mean candidate.

    None for a platform without a cache model (nothing depends on it then).
    """
    if plat.cache is None:
        return None
    traffic = iter(_traffic(plat, [n for row in blocks for n in row if n is not None]))
    total = float(_traffic(plat, list(fixed)).sum())
    for row in blocks:
        total += sum(next(traffic) for n in row if n is not None) / len(row)
    return total


_EXPECTED_FN: Any = None


def _expected_fn() -> Any:
    """The autograd function of `LatencyTable.expected` (defined lazily: torch is imported on first use).

    One graph node with the closed-form gradient ``dE/dalpha_bk = p_bk (lat_bk - E_b)``. On the CPU it
    computes with numpy: these are ~100-element arrays, and torch's ``exp`` / ``softmax`` enter a
    thread-pool region that alone costs 5-30 us on a busy machine (numpy: ~1 us).
    """
    global _EXPECTED_FN
    if _EXPECTED_FN is None:
        import torch
        from torch.autograd.function import once_differentiable

        class ExpectedLatency(torch.autograd.Function):
            @staticmethod
            def forward(ctx: Any, alpha: torch.Tensor, lat: torch.Tensor, logmask: torch.Tensor,
                        lat_np: np.ndarray | None, logmask_np: np.ndarray | None, fixed: float,
                        probs: bool) -> torch.Tensor:
                ctx.probs = probs
                if lat_np is not None:  # CPU, float32/64: numpy
                    a = alpha.detach().numpy()
                    if probs:
                        p = a
                    else:
                        p = a + logmask_np
                        p -= p.max(-1, keepdims=True)
                        np.exp(p, out=p)
                        p /= p.sum(-1, keepdims=True)
                    eb = (p * lat_np).sum(-1, keepdims=True)  # expected latency per block
                    ctx.np = (p, lat_np, eb)
                    return torch.from_numpy(np.asarray(eb.sum((-2, -1)) + fixed, dtype=a.dtype))
                ctx.np = None
                if probs:
                    p = alpha
                else:
                    z = alpha + logmask
                    p = (z - z.amax(-1, keepdim=True)).exp_()
                    p = p.div_(p.sum(-1, keepdim=True))
                eb = (p * lat).sum(-1, keepdim=True)
                ctx.save_for_backward(p, lat, eb)
                return eb.sum((-2, -1)) + fixed

            @staticmethod
            @once_differentiable
            def backward(ctx: Any, g: torch.Tensor) -> tuple:
                if ctx.np is not None:
                    p, lat, eb = ctx.np
                    gn = g.detach().numpy()[..., None, None]
                    grad = np.empty(p.shape, p.dtype)
                    grad[...] = lat * gn if ctx.probs else (lat - eb) * p * gn
                    grad = torch.from_numpy(grad)
                else:
                    p, lat, eb = ctx.saved_tensors
                    g = g[..., None, None]
                    grad = (lat * g).expand_as(p) if ctx.probs else (lat - eb).mul_(p).mul_(g)
                return grad, None, None, None, None, None, None

        _EXPECTED_FN = ExpectedLatency
    return _EXPECTED_FN


class LatencyTable:
    """Predicted latency (ms) of each candidate op ``k`` of each searchable block ``b`` on one platform.

    ``lat[b, k]`` holds the latencies (``+inf`` where block ``b`` has fewer than ``K`` candidates, see
    ``mask``); ``fixed_ms`` is the time of the parts that are not searched (stem, head). Build with
    `build` (or a space's own builder, e.g. `annette_torch.search.spaces.mbv2.latency_table`); evaluate with `expected` (differentiable) or `exact` (one architecture).
    """

    def __init__(self, lat: np.ndarray, fixed_ms: float = 0.0, ops: Sequence[Sequence[str]] | None = None,
                 platform: str = "", meta: Mapping[str, Any] | None = None) -> None:
        lat = np.asarray(lat, dtype=np.float64)
        if lat.ndim != 2:
            raise ValueError(f"LatencyTable: lat must be (blocks, candidates), got shape {lat.shape}")
        self.lat = lat
        self.mask = np.isfinite(lat)
        if not self.mask.any(axis=1).all():
            bad = int(np.flatnonzero(~self.mask.any(axis=1))[0])
            raise ValueError(f"LatencyTable: block {bad} has no candidate")
        if (lat[self.mask] < 0).any():
            raise ValueError("LatencyTable: negative latency")
        self.fixed_ms = float(fixed_ms)
        if ops is None:
            ops = [[str(k) for k in np.flatnonzero(row)] for row in self.mask]
        self.ops = [list(map(str, o)) for o in ops]
        if len(self.ops) != lat.shape[0] or any(len(o) != int(m.sum()) for o, m in zip(self.ops, self.mask)):
            raise ValueError("LatencyTable: ops must name each present candidate of each block")
        if any(not m[: m.sum()].all() for m in self.mask):
            raise ValueError("LatencyTable: candidates of a block must be the leading entries of its row")
        self.platform = platform
        self.meta = dict(meta or {})
        self._index = [{name: k for k, name in enumerate(o)} for o in self.ops]
        self._lat_list = [row[m].tolist() for row, m in zip(lat, self.mask)]
        self._torch: dict[tuple, tuple] = {}
        self._np: dict[Any, tuple] = {}

    # -- construction -----------------------------------------------------------------------------------
    @classmethod
    def build(cls, platform: str | os.PathLike | Platform, blocks: Sequence[Sequence[Network | None]],
              fixed_ms: float = 0.0, ops: Sequence[Sequence[str]] | None = None,
              meta: Mapping[str, Any] | None = None, context_bytes: float | None = None) -> "LatencyTable":
        """Estimate every candidate of every block once (``None`` = a zero op, 0 ms) into a table.

        Each candidate network is one block on its own input (its Input layers are not counted);
        ``fixed_ms`` adds the non-searched parts. All candidates are scored in one vectorised pass. For a
        platform with a cache model, blocks are judged inside a network moving ``context_bytes`` (default:
        every block's mean candidate traffic, see `mean_block_traffic`).
        """
        plat = load_platform(platform)
        if not blocks:
            raise ValueError("LatencyTable.build: no blocks")
        K = max(len(c) for c in blocks)
        lat = np.full((len(blocks), K), np.inf)
        nets, where = [], []
        for b, cands in enumerate(blocks):
            if not cands:
                raise ValueError(f"LatencyTable.build: block {b} has no candidate")
            for k, net in enumerate(cands):
                if net is None:
                    lat[b, k] = 0.0
                else:
                    nets.append(net)
                    where.append((b, k))
        if nets:
            context = mean_block_traffic(plat, blocks) if context_bytes is None else context_bytes
            vals = block_latencies(plat, nets, context_bytes=context)
            rows, cols = np.array(where).T
            lat[rows, cols] = vals
        table = cls(lat, fixed_ms, ops, plat.name, meta)
        log.debug("LatencyTable.build: %d blocks x %d candidates on %s (%d networks estimated)",
                  len(blocks), K, plat.name, len(nets))
        return table

    # -- evaluation -------------------------------------------------------------------------------------
    @property
    def n_blocks(self) -> int:
        """Number of searchable blocks."""
        return self.lat.shape[0]

    def _tensors(self, dtype: "torch.dtype", device: "torch.device") -> tuple["torch.Tensor", "torch.Tensor"]:
        """Latencies (0 where missing) and the additive log-mask (-inf where missing), cached per dtype/device."""
        key = (dtype, device)
        t = self._torch.get(key)
        if t is None:
            import torch

            lat = torch.as_tensor(np.where(self.mask, self.lat, 0.0), dtype=dtype, device=device)
            logmask = torch.as_tensor(np.where(self.mask, 0.0, -np.inf), dtype=dtype, device=device)
            t = self._torch[key] = (lat, logmask)
        return t

    def _arrays(self, alpha: "torch.Tensor") -> tuple[np.ndarray | None, np.ndarray | None]:
        """numpy copies of `_tensors` in ``alpha``'s dtype for CPU float32/64 alphas, else (None, None)."""
        if alpha.device.type != "cpu":
            return None, None
        key = alpha.dtype
        a = self._np.get(key)
        if a is None:
            import torch

            dt = {torch.float32: np.float32, torch.float64: np.float64}.get(key)
            a = (None, None) if dt is None else (np.where(self.mask, self.lat, 0.0).astype(dt),
                                                 np.where(self.mask, 0.0, -np.inf).astype(dt))
            self._np[key] = a
        return a

    def expected(self, alpha: "torch.Tensor", probs: bool = False) -> "torch.Tensor":
        """Differentiable E[lat] = sum_b sum_k p_bk * lat_bk + fixed (ms), p = softmax(alpha) per block.

        ``alpha`` is (..., blocks, candidates) logits (missing candidates are masked out), or the
        probabilities themselves with ``probs=True``. Returns a tensor of shape ``alpha.shape[:-2]``.
        """
        lat, logmask = self._tensors(alpha.dtype, alpha.device)
        if alpha.shape[-2:] != lat.shape:
            raise ValueError(f"LatencyTable.expected: alpha has shape {tuple(alpha.shape)}, expected "
                             f"(..., {lat.shape[0]}, {lat.shape[1]})")
        return _expected_fn().apply(alpha, lat, logmask, *self._arrays(alpha), self.fixed_ms, probs)

    def probabilities(self, alpha: "torch.Tensor") -> "torch.Tensor":
        """Per-block softmax of ``alpha`` over the present candidates (0 for missing ones)."""
        _, logmask = self._tensors(alpha.dtype, alpha.device)
        return (alpha + logmask).softmax(-1)

    def index(self, choices: Sequence[str | int]) -> list[int]:
        """Candidate index per block from op names (or indices, passed through)."""
        if len(choices) != self.n_blocks:
            raise ValueError(f"LatencyTable: {len(choices)} choices for {self.n_blocks} blocks")
        out = []
        for b, c in enumerate(choices):
            if isinstance(c, str):
                try:
                    out.append(self._index[b][c])
                except KeyError:
                    raise ValueError(f"LatencyTable: block {b} has no candidate {c!r} "
                                     f"(has: {', '.join(self.ops[b])})") from None
            else:
                k = int(c)
                if not 0 <= k < len(self.ops[b]):
                    raise ValueError(f"LatencyTable: block {b} has no candidate index {k}")
                out.append(k)
        return out

    def exact(self, choices: Sequence[str | int]) -> float:
        """Latency (ms) of one architecture: its candidates' table entries plus the fixed part."""
        return self.fixed_ms + sum(self._lat_list[b][k] for b, k in enumerate(self.index(choices)))

    def one_hot(self, choices: Sequence[str | int]) -> np.ndarray:
        """(blocks, candidates) one-hot probabilities of an architecture (for `expected` with probs)."""
        p = np.zeros(self.lat.shape)
        p[np.arange(self.n_blocks), self.index(choices)] = 1.0
        return p

    def extremes(self) -> tuple[float, float]:
        """Latency (ms) of the fastest and of the slowest architecture in the table."""
        lo = np.where(self.mask, self.lat, np.inf).min(1).sum()
        hi = np.where(self.mask, self.lat, -np.inf).max(1).sum()
        return float(lo + self.fixed_ms), float(hi + self.fixed_ms)

    # -- plain-data I/O ---------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready plain data (ragged per-block op names and latencies)."""
        return {"schema": TABLE_SCHEMA, "schema_version": TABLE_SCHEMA_VERSION, "platform": self.platform,
                "fixed_ms": self.fixed_ms, "meta": self.meta,
                "blocks": [{"ops": o, "lat_ms": l} for o, l in zip(self.ops, self._lat_list)]}

    @classmethod
    def from_dict(cls, d: Any) -> "LatencyTable":
        """Validate and rebuild a table written by `to_dict`."""
        if not isinstance(d, Mapping) or d.get("schema") != TABLE_SCHEMA:
            raise AnnetteError(f"latency table: expected schema {TABLE_SCHEMA!r}")
        if int(d.get("schema_version", 0)) > TABLE_SCHEMA_VERSION:
            raise AnnetteError(f"latency table: schema_version {d.get('schema_version')} is newer than this "
                               "annette-torch understands")
        blocks = d.get("blocks")
        if not isinstance(blocks, list) or not blocks:
            raise AnnetteError("latency table: blocks: expected a non-empty list")
        K = max(len(b["lat_ms"]) for b in blocks)
        lat = np.full((len(blocks), K), np.inf)
        for i, b in enumerate(blocks):
            if len(b["ops"]) != len(b["lat_ms"]):
                raise AnnetteError(f"latency table: blocks[{i}]: ops and lat_ms differ in length")
            lat[i, : len(b["lat_ms"])] = [float(v) for v in b["lat_ms"]]
        return cls(lat, float(d.get("fixed_ms", 0.0)), [b["ops"] for b in blocks], str(d.get("platform", "")),
                   d.get("meta") or {})

    def save(self, path: str | os.PathLike) -> None:
        """Write the table as JSON."""
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.to_dict(), f, indent=1)
            f.write("\n")

    @classmethod
    def load(cls, path: str | os.PathLike) -> "LatencyTable":
        """Read a table written by `save`."""
        with open(path, encoding="utf-8") as f:
            return cls.from_dict(json.load(f))

    def __repr__(self) -> str:
        lo, hi = self.extremes()
        return (f"LatencyTable({self.platform or '?'}: {self.n_blocks} blocks x {self.lat.shape[1]} candidates, "
                f"{lo:.3f}..{hi:.3f} ms)")
