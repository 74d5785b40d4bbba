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
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from .errors import AnnetteError
from .ir import LayerType, Network
from .platform import Platform, load_platform
from .prediction import per_inference_ms, run, totals
from .prediction.terms import check_kind
from .types import PlatformLike

if TYPE_CHECKING:  # torch is imported lazily: building or saving a table does not need it
    import torch

    from .estimator import Estimate

__all__ = ["layer_costs", "costs_from_estimate", "LatencyTable", "Choice", "TABLE_SCHEMA", "block_latencies",
           "mean_block_traffic", "supernet_blocks"]

log = logging.getLogger(__name__)

TABLE_SCHEMA = "annette-torch/latency-table"
TABLE_SCHEMA_VERSION = 1


# ------------------------------------------------------------------------------------------------------
# per-layer cost lookup


def layer_costs(model: Any, platform: PlatformLike = "zcu102", input_shape: Sequence[int] | None = None,
                by: str = "module", depth: int | None = None) -> dict[str, float]:
    """Predicted ms per submodule qualified name (``by="module"``) or per IR layer (``"layer"``).

    Arguments in `estimate`'s order; ``platform`` defaults to ``zcu102``. A fused group's time goes to the
    module of the layer that executes it; functional layers count for the module whose ``forward`` calls
    them, and the root module's own layers (the graph input, functions called in its ``forward``) under
    ``""``, its name in ``named_modules()``. ``depth`` truncates module names to their first components
    (``depth=1``: per top-level child). Values sum to ``estimate(model, platform, input_shape).device_ms``,
    the executed layers' time: a platform whose `latency_ms` is end to end (zcu102) adds per-inference terms
    no layer carries (`Estimate.latency_definition`).
    """
    from .estimator import estimate

    est = estimate(model, platform, input_shape)
    attrs = est.network.attrs
    if by == "module" and "module" not in attrs and "scope" not in attrs and not isinstance(model, Network):
        log.warning("layer_costs(%s): the traced network carries no module names (ONNX fallback?); keys are "
                    "IR layer names", est.network.name)
    return costs_from_estimate(est, by=by, depth=depth)


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
                   context_bytes: float | None = None, count_output: bool = False,
                   latency: str = "device") -> np.ndarray:
    """Predicted ms of each network, in one run of the prediction passes over all of them, Input layers excluded.

    Input layers are excluded because a block's input is the previous block's output: the full network
    pays for it once, as its own input layer (``count_input=True`` for the part holding it); so are the
    reorders a toolchain inserts at graph inputs and outputs (a block's ends are inside the network;
    ``count_output=True`` for the part writing the network's output).
    ``context_bytes``: the traffic of the network the blocks belong to (for the platform's cache model).
    ``latency="device"``: the layer sum; ``"latency"``: each network's share of `Estimate.latency_ms` (the
    per-inference terms belong to the whole network: `annette_torch.prediction.per_inference_ms`).
    """
    check_kind(latency)
    if not nets:
        return np.zeros(0)
    big, seg = Network.concat(list(nets))
    r = run(plat, big, seg, len(nets), context_bytes=context_bytes, input_reorders=count_input,
            output_reorders=count_output, count_input=count_input)
    return totals(r, latency, per_inference=False)


def _traffic(plat: Platform, nets: Sequence[Network]) -> np.ndarray:
    """Bytes each network moves per inference on ``plat`` (after mapping), Input layers excluded."""
    if not nets:
        return np.zeros(0)
    big, seg = Network.concat(list(nets))
    mapped = plat.mapping.apply(big)
    byts = np.where(mapped.network.types == LayerType.INPUT, 0.0, plat.tables.layer_bytes(mapped.network))
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


def _looks_like_shape(x: Any) -> bool:
    """A tuple or list of ints (one input shape), as opposed to a list of shapes."""
    return isinstance(x, (tuple, list)) and all(isinstance(v, (int, np.integer)) for v in x)


def _block_shapes(input_shapes: Any, n: int) -> list[Any]:
    """One input shape per block from None, one shape for all, or a list of n shapes."""
    if input_shapes is None:
        return [None] * n
    if _looks_like_shape(input_shapes):
        return [tuple(input_shapes)] * n
    shapes = list(input_shapes)
    if len(shapes) != n:
        raise ValueError(f"LatencyTable.build: {len(shapes)} input shapes for {n} blocks")
    return [None if s is None else tuple(s) for s in shapes]


def _as_network(cand: Any, shape: Any, where: str) -> Network | None:
    """A candidate as a `Network` (None stays None: a zero op); nn.Modules are traced at ``shape``."""
    if cand is None or isinstance(cand, Network):
        return cand
    from .estimator import to_network
    try:
        return to_network(cand, shape)
    except AnnetteError as e:
        raise AnnetteError(f"LatencyTable: {where}: {e}") from None


def _submodule(model: Any, name: str) -> Any:
    return model.get_submodule(name) if name else model


def supernet_blocks(model: Any, choices: Any = None) -> list[tuple[str, list[Any]]]:
    """The searchable blocks of a supernet: ``[(qualified name, [candidate modules])]``, from its `Choice`
    modules (``model.modules()`` order) or from ``choices(model)``."""
    if choices is not None:
        out = [(str(n), list(c)) for n, c in (choices(model) if callable(choices) else choices)]
        for n, c in out:
            if not c:
                raise AnnetteError(f"supernet block {n!r} has no candidate")
        return out
    return [(n, list(m.candidates)) for n, m in model.named_modules() if getattr(m, "_annette_choice", False)]


class _blocks_at:
    """Context: every block at candidate ``k`` (a `Choice`'s ``active``; a named submodule replaced by its
    candidate), restored on exit."""

    def __init__(self, model: Any, blocks: Sequence[tuple[str, Sequence[Any]]], k: int | Sequence[int]) -> None:
        self.model, self.blocks = model, blocks
        self.path = [k] * len(blocks) if isinstance(k, int) else list(k)
        self._undo: list[Any] = []

    def __enter__(self) -> "_blocks_at":
        for (name, cands), k in zip(self.blocks, self.path):
            m = _submodule(self.model, name)
            if getattr(m, "_annette_choice", False):
                self._undo.append((m, "active", m.active))
                m.active = int(k)
            else:
                parent_name, _, attr = name.rpartition(".")
                parent = _submodule(self.model, parent_name)
                self._undo.append((parent, "module", attr, m))
                parent._modules[attr] = cands[k]
        return self

    def __exit__(self, *exc: Any) -> None:
        for u in reversed(self._undo):
            if u[1] == "active":
                u[0].active = u[2]
            else:
                u[0]._modules[u[2]] = u[3]
        self._undo.clear()


_CHOICE: Any = None


def _choice_class() -> type:
    """`Choice`, defined on first use (torch is imported then)."""
    global _CHOICE
    if _CHOICE is None:
        import torch

        class Choice(torch.nn.Module):
            """A searchable block: its candidate ops in an ``nn.ModuleList``; ``forward`` runs
            ``candidates[active]`` (times ``gate`` when one is set: the search's straight-through gate).

            ``Choice(op_a, op_b, ..., names=["a", "b"])``; `LatencyTable.from_supernet` and the
            ProxylessNAS loop find these modules in a supernet.
            """

            _annette_choice = True

            def __init__(self, *candidates: torch.nn.Module, names: Sequence[str] | None = None) -> None:
                super().__init__()
                if len(candidates) == 1 and isinstance(candidates[0], (list, tuple, torch.nn.ModuleList)):
                    candidates = tuple(candidates[0])
                if not candidates:
                    raise AnnetteError("Choice needs at least one candidate module")
                self.candidates = torch.nn.ModuleList(candidates)
                if names is not None and (len(names) != len(candidates) or len(set(names)) != len(names)):
                    raise AnnetteError("Choice: names must name each candidate once")
                self.names = None if names is None else [str(n) for n in names]
                self.active = 0
                self.gate: torch.Tensor | None = None

            def forward(self, *args: Any, **kwargs: Any) -> Any:
                y = self.candidates[self.active](*args, **kwargs)
                return y if self.gate is None else y * self.gate

            def extra_repr(self) -> str:
                return f"active={self.active}"

        Choice.__module__ = __name__
        Choice.__qualname__ = "Choice"
        _CHOICE = Choice
    return _CHOICE


def __getattr__(name: str) -> Any:
    if name == "Choice":
        return _choice_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
    def build(cls, blocks: Sequence[Sequence[Any]], platform: PlatformLike = "zcu102",
              input_shapes: Sequence[Any] | None = None, fixed: float | Sequence[Any] = 0.0,
              ops: Sequence[Sequence[str]] | None = None, meta: Mapping[str, Any] | None = None,
              context_bytes: float | None = None, latency: str = "latency") -> "LatencyTable":
        """Estimate every candidate of every block once into a table (one vectorised pass).

        ``blocks[b]`` lists block ``b``'s candidates: `Network` s, ``nn.Module`` s (traced at
        ``input_shapes[b]``, the block's input shape; one shape for all blocks is accepted too), ONNX paths,
        or ``None`` (a zero op, 0 ms). Each candidate is one block on its own input (its Input layers are
        not counted). ``fixed``: the non-searched parts, as ms or as a list of models (the first holds the
        network's input, the last its output; ``(model, input_shape)`` pairs for nn.Modules).
        ``latency="latency"`` tabulates each block's share of `Estimate.latency_ms` (on a platform with an
        end-to-end calibration its per-inference terms go to the fixed part when ``fixed`` lists models);
        ``"device"`` the layer sum. For a platform with a cache model, blocks are judged inside a network
        moving ``context_bytes`` (default: every block's mean candidate traffic, see `mean_block_traffic`).
        """
        check_kind(latency)
        plat = load_platform(platform)
        if not blocks:
            raise ValueError("LatencyTable.build: no blocks")
        shapes = _block_shapes(input_shapes, len(blocks))
        K = max(len(c) for c in blocks)
        lat = np.full((len(blocks), K), np.inf)
        grid: list[list[Network | None]] = []
        nets, where = [], []
        for b, cands in enumerate(blocks):
            if not cands:
                raise ValueError(f"LatencyTable.build: block {b} has no candidate")
            row = []
            for k, cand in enumerate(cands):
                net = _as_network(cand, shapes[b], f"block {b} candidate {k}")
                row.append(net)
                if net is None:
                    lat[b, k] = 0.0
                else:
                    nets.append(net)
                    where.append((b, k))
            grid.append(row)
        fixed_nets: list[Network] = []
        if isinstance(fixed, (int, float, np.floating)):
            fixed_ms = float(fixed)
        else:
            fixed_nets = [_as_network(*(f if isinstance(f, tuple) else (f, None)), "fixed part") for f in fixed]
            fixed_ms = 0.0
        context = context_bytes
        if context is None and (nets or fixed_nets):
            context = mean_block_traffic(plat, grid, fixed_nets)
        if nets:
            vals = block_latencies(plat, nets, context_bytes=context, latency=latency)
            rows, cols = np.array(where).T
            lat[rows, cols] = vals
        if fixed_nets:
            n = len(fixed_nets)
            for i, net in enumerate(fixed_nets):
                fixed_ms += float(block_latencies(plat, [net], count_input=i == 0, context_bytes=context,
                                                  count_output=i == n - 1, latency=latency)[0])
            fixed_ms += per_inference_ms(plat, fixed_nets[-1], latency)
        meta = {"latency": latency, **dict(meta or {})}
        table = cls(lat, fixed_ms, ops, plat.name, meta)
        log.debug("LatencyTable.build: %d blocks x %d candidates on %s (%d networks estimated)",
                  len(blocks), K, plat.name, len(nets))
        return table

    @classmethod
    def from_supernet(cls, model: Any, platform: PlatformLike = "zcu102",
                      input_shape: Sequence[int] | None = None, choices: Any = None,
                      latency: str = "latency") -> "LatencyTable":
        """The table of a supernet whose searchable blocks hold their candidate ops.

        Convention: each searchable block is a `Choice` module (``Choice(nn.Conv2d(...), nn.Identity(), ...)``,
        candidates in an ``nn.ModuleList``; ``Choice.active`` selects the one ``forward`` runs), found in
        ``model.modules()`` order; or ``choices(model)`` returns ``[(qualified submodule name, [candidate
        modules]), ...]`` for blocks that are ordinary submodules (each candidate takes that submodule's
        place). One forward pass at ``input_shape`` (the deployed input, e.g. 1x3x224x224) records each
        block's input shape; every candidate is traced there. The fixed part is the whole network with
        every block at its first candidate, traced and estimated, minus those candidates' entries, so
        ``exact([0, 0, ...])`` equals `estimate` of that network. Arguments in `estimate`'s order.
        """
        import torch

        if not isinstance(model, torch.nn.Module):
            raise AnnetteError(f"from_supernet: expected an nn.Module, got {type(model).__name__}")
        if input_shape is None:
            raise AnnetteError("from_supernet needs input_shape, e.g. input_shape=(1, 3, 224, 224)")
        plat = load_platform(platform)
        blocks = supernet_blocks(model, choices)
        if not blocks:
            raise AnnetteError("from_supernet: no searchable block: wrap each block's candidates in "
                               "annette_torch.lookup.Choice, or pass choices=function(model) -> [(name, [modules])]")
        mods = dict(model.named_modules())
        shapes: dict[str, tuple[int, ...]] = {}

        def recorder(name: str) -> Any:
            def hook(_m: Any, args: tuple) -> None:
                if name not in shapes and args and isinstance(args[0], torch.Tensor):
                    shapes[name] = tuple(args[0].shape)
            return hook

        with _blocks_at(model, blocks, 0):
            handles = [mods_now.register_forward_pre_hook(recorder(name))
                       for name, mods_now in ((n, _submodule(model, n)) for n, _ in blocks)]
            was_training = model.training
            model.eval()
            try:
                with torch.no_grad():
                    model(torch.zeros(tuple(input_shape)))
            except Exception as e:  # noqa: BLE001 - the user's supernet: one line
                raise AnnetteError(f"from_supernet: the forward pass at {tuple(input_shape)} failed: "
                                   f"{type(e).__name__}: {e}") from None
            finally:
                for h in handles:
                    h.remove()
                model.train(was_training)
            from .frontends.fx import trace
            reference = trace(model, tuple(input_shape))
        missing = [n for n, _ in blocks if n not in shapes]
        if missing:
            raise AnnetteError(f"from_supernet: block {missing[0]!r} is not called by the model's forward")
        del mods
        names = [getattr(_submodule(model, n), "names", None) for n, _ in blocks]
        ops = [list(nm) if nm else [str(k) for k in range(len(c))] for nm, (_, c) in zip(names, blocks)]
        table = cls.build([list(c) for _, c in blocks], plat, [shapes[n] for n, _ in blocks], 0.0, ops,
                          meta={"blocks": [n for n, _ in blocks], "input_shape": list(input_shape)},
                          latency=latency)
        from .estimator import estimate_many
        full = float(estimate_many([reference], plat, latency=latency)[0])
        table.fixed_ms = full - sum(row[0] for row in table._lat_list)
        table.meta["reference_ms"] = full
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
        from .atomic import atomic_write
        with atomic_write(path, "w") as f:
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
