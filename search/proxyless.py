"""ProxylessNAS-style latency-aware search over the MobileNetV2 block space (`annette_torch.search.spaces.mbv2`).

A supernet holds, per searchable block, a mixed op of all its candidates (``mb{k}_e{e}``, ``zero``) and
architecture logits ``alpha[b, k]``. Training alternates a weight step (one path per block sampled from
``p = softmax(alpha)``, CE on a training batch) and an architecture step on a held-out batch with

    loss = CE + lam * latency_term(E[lat] / target),   E[lat] = sum_b sum_k p_bk * lat_bk + fixed

where ``lat`` comes from a `LatencyTable` of the **full-size** network (224x224 on the chosen platform):
accuracy is learnt on a small proxy task (a narrow, low-resolution copy of the space, e.g. 8x8 digits),
latency is that of the architecture one would deploy. ``latency_term`` is ``(r - 1)^2`` (``"squared"``)
or ``log(r)^2`` (``"log"``), ``r = E[lat] / target``: both pull the expected latency toward the target
from either side.

Path binarisation: straight-through Gumbel-softmax (as in GDAS), chosen over ProxylessNAS's two-path
BinaryConnect estimator because it needs one path per block per step (half the arch-step compute) and no
re-normalisation over sampled pairs. The arch step draws ``g = onehot(argmax(alpha + Gumbel))``, runs only
that path, and scales its output by ``g_hard - g_soft.detach() + g_soft`` (value 1, gradient of the
tempered softmax), so CE gradients reach every ``alpha`` of the block; the latency term's gradient is
exact (the table's expectation under ``p``). The temperature anneals geometrically from ``tau[0]`` to
``tau[1]``.

Proxy supernet (for CPU speed, differing from ProxylessNAS's separate weights per candidate): the
candidates of a block share one set of weights (Single-Path NAS superkernel: ``mb{k}_e{e}`` uses the centre
``k x k`` of the 7x7 depthwise kernel and the first ``c_in * e`` expanded channels), residual blocks start
as the identity (last BN scale 0), BatchNorm always uses batch statistics, and tensors are channels-last
(CPU depthwise backward is 10-30x faster). With separate weights the 21-block supernet did not learn the
digits in tens of epochs; shared, it reaches ~90% validation accuracy in about 10 epochs.

`derive` takes the argmax of ``alpha`` per block and reports the full network's predicted latency with
`annette_torch.estimate`. The expected latency reaches the target within a few epochs, the argmax
architecture later: the latency gradient first ranks every block's candidates by cost (``zero`` first),
so early argmax architectures are the fastest ones, and the CE signal separates candidates only as the
proxy trains (digits, zcu102, target 1.21 ms: argmax 0.68 ms up to epoch 12, 1.09 ms at epoch 30).
`search` runs everything on scikit-learn's digits by default (seconds on a CPU); any ``DataLoader`` (or a
``(train, val)`` pair) of ``(images, labels)`` works for real use.
"""

from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from ..errors import AnnetteError
from ..estimator import LATENCY_KINDS, estimate
from ..ir import Network
from ..lookup import LatencyTable, supernet_blocks
from ..platform import load_platform
from ..types import PlatformLike
from .spaces import mbv2

__all__ = ["ProxylessSupernet", "ChoiceSupernet", "wrap_choices", "ProxylessSearch", "EpochStats", "SearchResult", "search",
           "digits_loaders", "project"]

log = logging.getLogger(__name__)

Data = DataLoader | tuple[DataLoader, DataLoader]


# ------------------------------------------------------------------------------------------------------
# the proxy supernet


def _bn(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """BatchNorm on batch statistics (a supernet's running statistics would mix all sampled paths)."""
    return F.batch_norm(x, None, None, weight, bias, training=True)


class _SharedMBConv(nn.Module):
    """Every ``mb{k}_e{e}`` candidate of one block in one set of weights (Single-Path NAS superkernel).

    A candidate uses the first ``c_in * e`` expanded channels and the centre ``k x k`` of the largest
    depthwise kernel; structure as mbv2's MBConv: 1x1 expand-BN-ReLU6, depthwise-BN-ReLU6, 1x1 project-BN.
    """

    def __init__(self, c_in: int, c_out: int, ops: Sequence[str], stride: int, zero_init: bool) -> None:
        super().__init__()
        kes = [ke for ke in map(mbv2.parse_op, ops) if ke is not None]
        self.c_in, self.stride = c_in, stride
        self.kmax = max(k for k, _ in kes)
        mid = max(round(c_in * e) for _, e in kes)

        def conv_weight(*shape: int) -> nn.Parameter:
            w = torch.empty(*shape)
            nn.init.kaiming_uniform_(w, a=math.sqrt(5))  # nn.Conv2d's default
            return nn.Parameter(w)

        self.expand = conv_weight(mid, c_in, 1, 1)
        self.depthwise = conv_weight(mid, 1, self.kmax, self.kmax)
        self.project = conv_weight(c_out, mid, 1, 1)
        self.bn_w = nn.ParameterList([nn.Parameter(torch.ones(c)) for c in (mid, mid, c_out)])
        self.bn_b = nn.ParameterList([nn.Parameter(torch.zeros(c)) for c in (mid, mid, c_out)])
        if zero_init:  # residual blocks start as the identity: a deep supernet trains in a few steps
            nn.init.zeros_(self.bn_w[2])

    def forward(self, x: torch.Tensor, k: int, e: int) -> torch.Tensor:
        m = round(self.c_in * e)
        if e != 1:
            x = F.relu6(_bn(F.conv2d(x, self.expand[:m]), self.bn_w[0][:m], self.bn_b[0][:m]))
        o = (self.kmax - k) // 2
        w = self.depthwise[:m, :, o:o + k, o:o + k]
        x = F.relu6(_bn(F.conv2d(x, w, None, self.stride, k // 2, 1, m), self.bn_w[1][:m], self.bn_b[1][:m]))
        return _bn(F.conv2d(x, self.project[:, :m]), self.bn_w[2], self.bn_b[2])


class _MixedOp(nn.Module):
    """All candidates of one block; runs exactly one of them per call (``zero`` = identity)."""

    def __init__(self, ops: Sequence[str], c_in: int, c_out: int, stride: int, residual: bool) -> None:
        super().__init__()
        self.residual = residual
        self.ke = [mbv2.parse_op(op) for op in ops]
        if any(ke is None for ke in self.ke) and not residual:
            raise ValueError("a 'zero' candidate needs a residual block (stride 1, equal channels)")
        self.shared = _SharedMBConv(c_in, c_out, ops, stride, zero_init=residual)

    def forward(self, x: torch.Tensor, k: int, gate: torch.Tensor | None = None) -> torch.Tensor:
        ke = self.ke[k]
        if ke is None:
            return x
        y = self.shared(x, *ke)
        if gate is not None:
            y = y * gate
        return x + y if self.residual else y


class ProxylessSupernet(nn.Module):
    """Narrow, low-resolution supernet of an mbv2 block space with architecture logits ``alpha[b, k]``.

    Channels are the full network's times ``width_mult`` (at least 4); the stem keeps the resolution and
    only the first ``max_downsample`` stride-2 blocks downsample, so 8x8 inputs keep a spatial extent.
    """

    def __init__(self, blocks: Sequence[mbv2.BlockSpec] = mbv2.BLOCKS, in_channels: int = 1,
                 num_classes: int = 10, width_mult: float = 0.25, max_downsample: int = 2) -> None:
        super().__init__()
        self.blocks = list(blocks)
        self.ops = [list(b.ops) for b in self.blocks]

        def w(c: int) -> int:
            return max(4, int(round(c * width_mult)))

        stem_c, first_c = w(mbv2.STEM_CHANNELS), w(mbv2.FIRST_BLOCK_CHANNELS)
        self.stem = nn.Sequential(nn.Conv2d(in_channels, stem_c, 3, 1, 1, bias=False),
                                  nn.BatchNorm2d(stem_c, track_running_stats=False), nn.ReLU6(inplace=True))
        self.first_block = _SharedMBConv(stem_c, first_c, ["mb3_e1"], 1, zero_init=False)
        mixed, down = [], 0
        for spec in self.blocks:
            stride = spec.stride
            if stride > 1:
                down += 1
                stride = stride if down <= max_downsample else 1
            mixed.append(_MixedOp(spec.ops, w(spec.in_ch), w(spec.out_ch), stride, spec.residual))
        self.mixed = nn.ModuleList(mixed)
        last = w(mbv2.LAST_CHANNELS)
        self.head = nn.Sequential(nn.Conv2d(w(self.blocks[-1].out_ch), last, 1, bias=False),
                                  nn.BatchNorm2d(last, track_running_stats=False),
                                  nn.ReLU6(inplace=True), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                  nn.Linear(last, num_classes))
        K = max(len(o) for o in self.ops)
        self.alpha = nn.Parameter(torch.zeros(len(self.blocks), K))
        mask = torch.full((len(self.blocks), K), -math.inf)
        for b, o in enumerate(self.ops):
            mask[b, : len(o)] = 0.0
        self.register_buffer("logmask", mask)

    def weight_parameters(self) -> list[nn.Parameter]:
        """All parameters except the architecture logits."""
        return [p for n, p in self.named_parameters() if n != "alpha"]

    def probs(self) -> torch.Tensor:
        """Per-block candidate probabilities softmax(alpha) (0 for missing candidates)."""
        return (self.alpha + self.logmask).softmax(-1)

    def sample_path(self, generator: torch.Generator | None = None) -> list[int]:
        """One candidate index per block drawn from `probs` (no gradient)."""
        with torch.no_grad():  # drawn on the CPU: a CPU generator serves any device
            return torch.multinomial(self.probs().cpu(), 1, generator=generator).squeeze(1).tolist()

    def gumbel_path(self, tau: float, generator: torch.Generator | None = None) -> tuple[list[int], torch.Tensor]:
        """Straight-through Gumbel-softmax sample: path indices and per-block gates (value 1, soft grad)."""
        logits = self.alpha + self.logmask
        u = torch.rand(logits.shape, generator=generator).clamp_(1e-9, 1 - 1e-9).to(logits.device)
        soft = ((logits - torch.log(-torch.log(u))) / tau).softmax(-1)
        idx = soft.argmax(-1)
        rows = torch.arange(len(idx), device=idx.device)
        gates = 1.0 - soft[rows, idx].detach() + soft[rows, idx]
        return idx.tolist(), gates

    def argmax_path(self) -> list[int]:
        """The most likely candidate of every block."""
        return (self.alpha + self.logmask).argmax(-1).tolist()

    def choices(self, path: Sequence[int] | None = None) -> list[str]:
        """Op names of ``path`` (default: the argmax path)."""
        path = self.argmax_path() if path is None else path
        return [self.ops[b][k] for b, k in enumerate(path)]

    def forward(self, x: torch.Tensor, path: Sequence[int] | None = None,
                gates: torch.Tensor | None = None) -> torch.Tensor:
        path = self.argmax_path() if path is None else path
        # channels-last: CPU depthwise-convolution backward is 10-30x faster than in NCHW
        x = self.first_block(self.stem(x.contiguous(memory_format=torch.channels_last)), 3, 1)
        for b, (op, k) in enumerate(zip(self.mixed, path)):
            x = op(x, k, None if gates is None else gates[b])
        return self.head(x)


def wrap_choices(model: nn.Module, choices: Any) -> nn.Module:
    """Replace each block that ``choices(model)`` (or a list) names, ``[(qualified name, [candidates])]``, by a
    `Choice` of its candidates, in place, so that training reaches every candidate; returns ``model``."""
    from ..lookup import Choice

    for name, cands in supernet_blocks(model, choices):
        parent_name, _, attr = name.rpartition(".")
        try:
            parent = model.get_submodule(parent_name) if parent_name else model
            getattr(parent, attr)
        except AttributeError:
            raise AnnetteError(f"choices: the supernet has no submodule {name!r}") from None
        bad = [type(c).__name__ for c in cands if not isinstance(c, nn.Module)]
        if bad:
            raise AnnetteError(f"choices: the candidates of {name!r} must be nn.Modules, got {', '.join(bad)}")
        setattr(parent, attr, Choice(*cands))
    return model


class ChoiceSupernet(nn.Module):
    """A user's supernet (searchable blocks as `annette_torch.lookup.Choice` modules, or named by
    ``choices``, see `wrap_choices`) with architecture logits ``alpha[b, k]``: the interface of
    `ProxylessSupernet` for `ProxylessSearch`."""

    def __init__(self, model: nn.Module, choices: Any = None) -> None:
        super().__init__()
        self.model = model if choices is None else wrap_choices(model, choices)
        found = [(n, m) for n, m in model.named_modules() if getattr(m, "_annette_choice", False)]
        if not found:
            raise AnnetteError("the supernet has no searchable block: wrap each block's candidates in "
                               "annette_torch.lookup.Choice, or pass choices=function(model) -> [(name, [modules])]")
        self.block_names = [n for n, _ in found]
        self._choices = [m for _, m in found]
        self.ops = [list(m.names) if m.names else [str(k) for k in range(len(m.candidates))] for m in self._choices]
        K = max(len(o) for o in self.ops)
        self.alpha = nn.Parameter(torch.zeros(len(self.ops), K))
        mask = torch.full((len(self.ops), K), -math.inf)
        for b, o in enumerate(self.ops):
            mask[b, : len(o)] = 0.0
        self.register_buffer("logmask", mask)

    weight_parameters = ProxylessSupernet.weight_parameters
    probs = ProxylessSupernet.probs
    sample_path = ProxylessSupernet.sample_path
    gumbel_path = ProxylessSupernet.gumbel_path
    argmax_path = ProxylessSupernet.argmax_path
    choices = ProxylessSupernet.choices

    def set_path(self, path: Sequence[int], gates: torch.Tensor | None = None) -> None:
        """Select candidate ``path[b]`` in every block (and its straight-through gate)."""
        for b, (m, k) in enumerate(zip(self._choices, path)):
            m.active = int(k)
            m.gate = None if gates is None else gates[b]

    def forward(self, x: torch.Tensor, path: Sequence[int] | None = None,
                gates: torch.Tensor | None = None) -> torch.Tensor:
        self.set_path(self.argmax_path() if path is None else path, gates)
        try:
            return self.model(x)
        finally:
            for m in self._choices:
                m.gate = None


# ------------------------------------------------------------------------------------------------------
# data


def digits_loaders(batch_size: int = 128, seed: int = 0, val_fraction: float = 0.25,
                   resolution: int = 8) -> tuple[DataLoader, DataLoader]:
    """scikit-learn's digits (1797 8x8 grayscale images, 10 classes) as seeded train / val loaders.

    Pixels are scaled to [0, 1]; ``resolution`` != 8 upsamples bilinearly.
    """
    from sklearn.datasets import load_digits

    d = load_digits()
    x = torch.tensor(d.images, dtype=torch.float32).unsqueeze(1) / 16.0
    if resolution != 8:
        x = F.interpolate(x, size=(resolution, resolution), mode="bilinear", align_corners=False)
    y = torch.tensor(d.target, dtype=torch.long)
    perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))
    n_val = int(round(len(y) * val_fraction))
    val, train = perm[:n_val], perm[n_val:]
    g = torch.Generator().manual_seed(seed + 1)
    return (DataLoader(TensorDataset(x[train], y[train]), batch_size=batch_size, shuffle=True, generator=g),
            DataLoader(TensorDataset(x[val], y[val]), batch_size=batch_size, shuffle=False))


def _cycle(loader: DataLoader) -> Iterator[Any]:
    while True:
        yield from loader


# ------------------------------------------------------------------------------------------------------
# search


@dataclass
class EpochStats:
    """One epoch of a search: mean training CE, validation accuracy of the argmax path, latencies (ms)."""

    epoch: int
    ce: float
    accuracy: float
    expected_ms: float
    argmax_ms: float
    latency_loss: float
    tau: float


@dataclass
class SearchResult:
    """Derived architecture, its predicted full-size latency, the target, and the per-epoch history.

    ``choices`` is the derived architecture: the argmax of the architecture weights, or, when that misses
    the target by more than ``margin``, the most probable architecture within it (``projected``);
    ``argmax_choices`` / ``argmax_ms`` are the argmax before that step. ``latency`` says which latency
    (`Estimate.latency_ms` or the layer sum, ``"device"``) every figure is.
    """

    choices: list[str]
    predicted_ms: float
    table_ms: float
    expected_ms: float
    initial_expected_ms: float
    target_ms: float
    platform: str
    history: list[EpochStats] = field(default_factory=list)
    alpha: list[list[float]] = field(default_factory=list)
    argmax_choices: list[str] = field(default_factory=list)
    argmax_ms: float = math.nan
    projected: bool = False
    margin: float = 0.05
    latency: str = "latency"

    @property
    def latency_ms(self) -> float:
        """The derived architecture's predicted latency (ms); the same as ``predicted_ms``."""
        return self.predicted_ms

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready plain data."""
        return asdict(self)

    def __repr__(self) -> str:
        acc = f", accuracy {self.history[-1].accuracy:.3f}" if self.history else ""
        how = "projected" if self.projected else "argmax"
        arch = " ".join(self.choices)
        arch = arch if len(arch) <= 60 else arch[:57] + "..."
        return (f"SearchResult({self.platform}: {self.predicted_ms:.4f} ms predicted ({self.latency}), target "
                f"{self.target_ms:.4f} ms +-{100 * self.margin:g}%, {how} after {len(self.history)} epochs{acc}; "
                f"{arch})")


def project(table: LatencyTable, alpha: np.ndarray, latency_ms: float, margin: float) -> list[int] | None:
    """The most probable architecture (sum of per-block log-softmax of ``alpha``) whose table latency is
    within ``latency_ms * (1 +- margin)``; None if none is. Exact over the table by dynamic programming on
    latencies rounded to bins small enough that the rounding cannot leave the window."""
    lat = np.where(table.mask, table.lat, np.inf)
    z = np.where(table.mask, alpha, -np.inf)
    logp = z - z.max(1, keepdims=True)
    logp = logp - np.log(np.exp(logp).sum(1, keepdims=True))
    lo, hi = latency_ms * (1 - margin) - table.fixed_ms, latency_ms * (1 + margin) - table.fixed_ms
    n = table.n_blocks
    if hi < 0:
        return None
    for refine in (1, 4, 16):
        w = max(margin * latency_ms, 1e-12) / (2 * n * refine)
        r = np.where(table.mask, np.round(np.where(table.mask, lat, 0) / w), -1).astype(np.int64)
        err = n * 0.5  # bins the rounded sum may be off by
        top = int(math.floor(hi / w - err)) if hi / w - err < 1e7 else int(1e7)
        bottom = int(math.ceil(lo / w + err))
        if top < max(bottom, 0):
            continue
        best = np.full(top + 1, -np.inf)
        best[0] = 0.0
        back = np.zeros((n, top + 1), np.int64)
        for b in range(n):
            nxt = np.full(top + 1, -np.inf)
            arg = np.zeros(top + 1, np.int64)
            for k in np.flatnonzero(table.mask[b]):
                step = int(r[b, k])
                if step > top:
                    continue
                cand = np.full(top + 1, -np.inf)
                cand[step:] = best[: top + 1 - step] + logp[b, k]
                better = cand > nxt
                nxt[better] = cand[better]
                arg[better] = k
            best, back[b] = nxt, arg
        window = best[max(bottom, 0):]
        if not np.isfinite(window).any():
            continue
        s_ = max(bottom, 0) + int(np.argmax(window))
        path = []
        for b in range(n - 1, -1, -1):
            k = int(back[b, s_])
            path.append(k)
            s_ -= int(r[b, k])
        path.reverse()
        got = table.exact(path)
        if abs(got - latency_ms) <= margin * latency_ms * (1 + 1e-9):
            return path
    return None


class ProxylessSearch:
    """Alternating weight / architecture training of a supernet under a latency target ``latency_ms``.

    The supernet is the proxy `ProxylessSupernet` of the mbv2 space (``width_mult``, ``max_downsample``),
    whose latency table is built for the full-size space (``resolution``, ``num_classes_full``) on
    ``platform`` unless one is given; or ``supernet``, the user's own model with `Choice` blocks, whose
    table is `LatencyTable.from_supernet` at ``input_shape`` (the deployed input); with ``choices``
    (``function(model) -> [(qualified submodule name, [candidate modules])]``) the named submodules are
    replaced by `Choice` modules of their candidates first (`wrap_choices`). ``latency``:
    `Estimate.latency_ms` (default) or ``"device"`` (the layer sum). At the end (`result`) the derived
    architecture is the argmax, or the most probable architecture within ``margin`` of the target when
    the argmax misses it (`project`); its latency is estimated on ``network(ops per block)`` when given (a
    proxy supernet with the full-size ``table`` of a space, e.g. `annette_torch.search.spaces.vit`'s
    ``proxy_supernet``, ``latency_table`` and ``table_network``; ``input_shape`` is then not needed), else
    on the supernet at ``input_shape``. Every argument but ``platform`` is a keyword.
    """

    def __init__(self, platform: PlatformLike = "zcu102", *, latency_ms: float,
                 lam: float = 1.0, table: LatencyTable | None = None, blocks: Sequence[mbv2.BlockSpec] = mbv2.BLOCKS,
                 in_channels: int = 1, num_classes: int = 10, width_mult: float = 0.25, max_downsample: int = 2,
                 lr: float = 3e-3, arch_lr: float = 0.05, tau: tuple[float, float] = (5.0, 0.5),
                 latency_loss: str = "squared", warmup_epochs: int = 0, resolution: int = 224,
                 num_classes_full: int = 1000, seed: int = 0, device: str | torch.device = "cpu",
                 margin: float = 0.05, supernet: nn.Module | None = None, input_shape: Sequence[int] | None = None,
                 choices: Any = None, latency: str = "latency", progress: bool = False,
                 network: Callable[[list[str]], Network] | None = None) -> None:
        if isinstance(latency_ms, bool) or not (isinstance(latency_ms, (int, float)) and math.isfinite(latency_ms)
                                                and latency_ms > 0):
            raise AnnetteError(f"latency_ms (the target) must be a positive number of ms, got {latency_ms!r}")
        if latency_loss not in ("squared", "log"):
            raise ValueError(f"latency_loss must be 'squared' or 'log', got {latency_loss!r}")
        if not 0 <= margin < 1:
            raise AnnetteError(f"margin must be in [0, 1), got {margin!r}")
        if latency not in LATENCY_KINDS:
            raise AnnetteError(f"latency must be one of {', '.join(LATENCY_KINDS)}, got {latency!r}")
        self.platform = load_platform(platform)
        self.blocks = list(blocks)
        self.resolution, self.num_classes_full = resolution, num_classes_full
        self.latency, self.margin, self.progress = latency, float(margin), progress
        self.user_supernet = supernet
        self.network_of = network
        self.input_shape = None if input_shape is None else tuple(input_shape)
        torch.manual_seed(seed)
        if choices is not None and supernet is None:
            raise AnnetteError("choices= names the searchable blocks of your own supernet: pass supernet= too")
        if supernet is not None:
            if self.input_shape is None and (table is None or network is None):
                raise AnnetteError("a user supernet needs input_shape: the deployed input, e.g. (1, 3, 224, 224)")
            self.net = ChoiceSupernet(supernet, choices)
            self.table = table or LatencyTable.from_supernet(supernet, self.platform, self.input_shape,
                                                             latency=latency)
        else:
            self.table = table or mbv2.latency_table(self.platform, resolution, num_classes_full, self.blocks, latency)
            self.net = ProxylessSupernet(self.blocks, in_channels, num_classes, width_mult, max_downsample)
        if self.table.ops != self.net.ops:
            raise ValueError("latency table and supernet differ (ops per block)")
        lo, hi = self.table.extremes()
        if not lo * (1 - 1e-9) <= latency_ms <= hi * (1 + 1e-9):
            raise AnnetteError(f"target {latency_ms:g} ms is outside the space's range on {self.platform.name}: "
                               f"{lo:.4f} .. {hi:.4f} ms")
        self.target_ms, self.lam, self.latency_loss = float(latency_ms), float(lam), latency_loss
        self.tau, self.warmup_epochs = tau, warmup_epochs
        self.gen = torch.Generator().manual_seed(seed)
        self.device = torch.device(device)
        self.net = self.net.to(self.device)
        self.w_opt = torch.optim.Adam(self.net.weight_parameters(), lr=lr)
        self.a_opt = torch.optim.Adam([self.net.alpha], lr=arch_lr, betas=(0.0, 0.999))
        self.history: list[EpochStats] = []
        with torch.no_grad():
            self.initial_expected_ms = float(self.expected_ms())

    @property
    def latency_ms(self) -> float:
        """The latency target (ms)."""
        return self.target_ms

    def latency_term(self, expected_ms: torch.Tensor) -> torch.Tensor:
        """Penalty pulling the expected latency toward the target (0 at the target)."""
        r = expected_ms / self.target_ms
        return (r - 1.0) ** 2 if self.latency_loss == "squared" else torch.log(r) ** 2

    def expected_ms(self) -> torch.Tensor:
        """Differentiable expected full-size latency (ms) under the current architecture weights."""
        return self.table.expected(self.net.alpha)

    def _tau(self, epoch: int, epochs: int) -> float:
        t0, t1 = self.tau
        return t0 * (t1 / t0) ** (epoch / max(epochs - 1, 1))

    def fit(self, train: DataLoader, val: DataLoader, epochs: int) -> list[EpochStats]:
        """Run ``epochs`` epochs of alternating weight and architecture steps; returns the history. Each
        epoch reports the expected and the argmax (derived) architecture's latency (log, progress bar)."""
        from tqdm.auto import tqdm

        net = self.net
        val_iter = _cycle(val)
        bar = tqdm(range(epochs), desc=f"proxyless {self.platform.name}", unit="epoch", disable=not self.progress,
                   leave=False)
        for epoch in bar:
            tau = self._tau(epoch, epochs)
            net.train()
            ce_sum, n_batches, lat_sum = 0.0, 0, 0.0
            for x, y in train:
                x, y = x.to(self.device), y.to(self.device)
                # weight step: one sampled path, alpha frozen
                loss = F.cross_entropy(net(x, net.sample_path(self.gen)), y)
                self.w_opt.zero_grad(set_to_none=True)
                loss.backward()
                self.w_opt.step()
                ce_sum += float(loss.detach())
                n_batches += 1
                if epoch < self.warmup_epochs:
                    continue
                # architecture step: straight-through Gumbel path on held-out data + latency term
                xv, yv = (t.to(self.device) for t in next(val_iter))
                path, gates = net.gumbel_path(tau, self.gen)
                lat = self.latency_term(self.expected_ms())
                a_loss = F.cross_entropy(net(xv, path, gates), yv) + self.lam * lat
                # gradient w.r.t. alpha only: the weights' gradients of this step would be discarded
                (net.alpha.grad,) = torch.autograd.grad(a_loss, [net.alpha])
                self.a_opt.step()
                lat_sum += float(lat.detach())
            with torch.no_grad():
                exp_ms = float(self.expected_ms())
            argmax = net.argmax_path()
            stats = EpochStats(len(self.history), ce_sum / max(n_batches, 1), self.accuracy(val, argmax), exp_ms,
                               self.table.exact(argmax), lat_sum / max(n_batches, 1), tau)
            self.history.append(stats)
            bar.set_postfix(expected=f"{stats.expected_ms:.3f}ms", derived=f"{stats.argmax_ms:.3f}ms",
                            acc=f"{stats.accuracy:.2f}")
            log.info("proxyless epoch %d: ce %.3f acc %.3f expected %.4f ms, derived (argmax) %.4f ms "
                     "(target %.4f ms)", epoch, stats.ce, stats.accuracy, stats.expected_ms, stats.argmax_ms,
                     self.target_ms)
        return self.history

    @torch.no_grad()
    def accuracy(self, loader: DataLoader, path: Sequence[int] | None = None) -> float:
        """Accuracy of one path (default argmax) on ``loader``, BN on batch statistics.

        Batch statistics, because the supernet's running BN statistics mix the inputs of all sampled
        upstream paths.
        """
        self.net.train()
        path = self.net.argmax_path() if path is None else list(path)
        correct = total = 0
        for x, y in loader:
            x, y = x.to(self.device), y.to(self.device)
            correct += int((self.net(x, path).argmax(1) == y).sum())
            total += len(y)
        return correct / max(total, 1)

    def derived_path(self) -> tuple[list[int], bool]:
        """The derived architecture's candidate indices, and whether the projection changed the argmax."""
        argmax = self.net.argmax_path()
        if abs(self.table.exact(argmax) - self.target_ms) <= self.margin * self.target_ms:
            return argmax, False
        alpha = (self.net.alpha.detach().cpu().double()).numpy()
        path = project(self.table, alpha, self.target_ms, self.margin)
        if path is None:
            log.warning("proxyless: no architecture within %g%% of %.4f ms; keeping the argmax (%.4f ms)",
                        100 * self.margin, self.target_ms, self.table.exact(argmax))
            return argmax, False
        return path, path != argmax

    def predict(self, path: Sequence[int]) -> float:
        """The full network's predicted latency (ms) with candidate ``path[b]`` in every block."""
        if self.network_of is not None:
            est = estimate(self.network_of(self.net.choices(path)), self.platform)
        elif self.user_supernet is not None:
            self.net.set_path(path)
            est = estimate(self.user_supernet, self.platform, self.input_shape)
        else:
            est = estimate(mbv2.build_network(self.net.choices(path), self.num_classes_full, self.resolution,
                                              self.blocks), self.platform)
        return est.latency_ms if self.latency == "latency" else est.device_ms

    def derive(self) -> tuple[list[str], float]:
        """The derived architecture (op per block) and its full network's predicted latency (ms)."""
        path, _ = self.derived_path()
        return self.net.choices(path), self.predict(path)

    def result(self) -> SearchResult:
        """Current state as a `SearchResult`."""
        path, projected = self.derived_path()
        argmax = self.net.argmax_path()
        choices, predicted = self.net.choices(path), self.predict(path)
        with torch.no_grad():
            exp_ms = float(self.expected_ms())
            alpha = (self.net.alpha + self.net.logmask).tolist()
        alpha = [[a for a in row if a != -math.inf] for row in alpha]
        return SearchResult(choices, predicted, self.table.exact(path), exp_ms, self.initial_expected_ms,
                            self.target_ms, self.platform.name, list(self.history), alpha,
                            self.net.choices(argmax), self.table.exact(argmax), projected, self.margin, self.latency)


def search(platform: PlatformLike = "zcu102", *, latency_ms: float, epochs: int = 10,
           lam: float = 1.0, data: Data | None = None, seed: int = 0, batch_size: int = 128,
           progress: bool = True, **kwargs: Any) -> SearchResult:
    """Latency-targeted ProxylessNAS-style search on ``platform`` (default ``zcu102``) for a derived
    architecture within ``margin`` (default 5%) of ``latency_ms``; returns it with the history.

    ``data``: ``None`` (scikit-learn digits in batches of ``batch_size``), one ``DataLoader`` (weights and
    architecture both train on it) or a ``(train, val)`` pair; the input channels are read from the first
    batch. ``kwargs`` go to `ProxylessSearch` (``supernet`` + ``input_shape`` for your own supernet, and
    ``choices`` when its blocks are ordinary submodules rather than `Choice` modules,
    ``margin``, ``latency``, ``width_mult``, ``arch_lr``, ``latency_loss``, ``num_classes``, ``table`` ...).
    A progress bar shows the epochs (``progress=False`` hides it). Seeds numpy and torch with ``seed``.
    """
    np.random.seed(seed)
    torch.manual_seed(seed)
    if data is None:
        train, val = digits_loaders(batch_size, seed)
    elif isinstance(data, DataLoader):
        train = val = data
    else:
        train, val = data
    x0, _ = next(iter(val))
    if kwargs.get("supernet") is None:
        kwargs.setdefault("in_channels", int(x0.shape[1]))
    s = ProxylessSearch(platform, latency_ms=latency_ms, lam=lam, seed=seed, progress=progress, **kwargs)
    s.fit(train, val, epochs)
    res = s.result()
    log.info("proxyless search on %s: %s -> %.4f ms predicted (target %.4f ms)", res.platform,
             " ".join(res.choices), res.predicted_ms, res.target_ms)
    return res
