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
import os
from dataclasses import asdict, dataclass, field
from typing import Any, Iterator, Sequence

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from ..estimator import estimate
from ..lookup import LatencyTable
from ..platform import Platform, load_platform
from .spaces import mbv2

__all__ = ["ProxylessSupernet", "ProxylessSearch", "EpochStats", "SearchResult", "search", "digits_loaders"]

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
    """Derived architecture, its predicted full-size latency, the target, and the per-epoch history."""

    choices: list[str]
    predicted_ms: float
    table_ms: float
    expected_ms: float
    initial_expected_ms: float
    target_ms: float
    platform: str
    history: list[EpochStats] = field(default_factory=list)
    alpha: list[list[float]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready plain data."""
        return asdict(self)


class ProxylessSearch:
    """Alternating weight / architecture training of a `ProxylessSupernet` under a latency target.

    The latency table is built for the full-size space (``resolution``, ``num_classes_full``) on
    ``platform`` unless one is given; the supernet is the proxy (``width_mult``, ``max_downsample``) and
    trains on ``device``.
    """

    def __init__(self, platform: str | os.PathLike | Platform = "zcu102", target_ms: float = 1.0, lam: float = 1.0,
                 table: LatencyTable | None = None, blocks: Sequence[mbv2.BlockSpec] = mbv2.BLOCKS,
                 in_channels: int = 1, num_classes: int = 10, width_mult: float = 0.25, max_downsample: int = 2,
                 lr: float = 3e-3, arch_lr: float = 0.05, tau: tuple[float, float] = (5.0, 0.5),
                 latency_loss: str = "squared", warmup_epochs: int = 0, resolution: int = 224,
                 num_classes_full: int = 1000, seed: int = 0, device: str | torch.device = "cpu") -> None:
        if target_ms <= 0:
            raise ValueError(f"target_ms must be positive, got {target_ms}")
        if latency_loss not in ("squared", "log"):
            raise ValueError(f"latency_loss must be 'squared' or 'log', got {latency_loss!r}")
        self.platform = load_platform(platform)
        self.blocks = list(blocks)
        self.resolution, self.num_classes_full = resolution, num_classes_full
        self.table = table or mbv2.latency_table(self.platform, resolution, num_classes_full, self.blocks)
        if self.table.ops != [list(b.ops) for b in self.blocks]:
            raise ValueError("latency table and block space differ (ops per block)")
        self.target_ms, self.lam, self.latency_loss = float(target_ms), float(lam), latency_loss
        self.tau, self.warmup_epochs = tau, warmup_epochs
        torch.manual_seed(seed)
        self.gen = torch.Generator().manual_seed(seed)
        self.device = torch.device(device)
        self.net = ProxylessSupernet(self.blocks, in_channels, num_classes, width_mult, max_downsample).to(self.device)
        self.w_opt = torch.optim.Adam(self.net.weight_parameters(), lr=lr)
        self.a_opt = torch.optim.Adam([self.net.alpha], lr=arch_lr, betas=(0.0, 0.999))
        self.history: list[EpochStats] = []
        with torch.no_grad():
            self.initial_expected_ms = float(self.expected_ms())

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
        """Run ``epochs`` epochs of alternating weight and architecture steps; returns the history."""
        net = self.net
        val_iter = _cycle(val)
        for epoch in range(epochs):
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
            log.info("proxyless epoch %d: ce %.3f acc %.3f E[lat] %.4f ms argmax %.4f ms (target %.4f)",
                     epoch, stats.ce, stats.accuracy, stats.expected_ms, stats.argmax_ms, self.target_ms)
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

    def derive(self) -> tuple[list[str], float]:
        """The argmax architecture (op per block) and its full network's predicted latency (ms)."""
        choices = self.net.choices()
        net = mbv2.build_network(choices, self.num_classes_full, self.resolution, self.blocks)
        return choices, estimate(net, self.platform).total_ms

    def result(self) -> SearchResult:
        """Current state as a `SearchResult`."""
        choices, predicted = self.derive()
        with torch.no_grad():
            exp_ms = float(self.expected_ms())
            alpha = (self.net.alpha + self.net.logmask).tolist()
        alpha = [[a for a in row if a != -math.inf] for row in alpha]
        return SearchResult(choices, predicted, self.table.exact(choices), exp_ms, self.initial_expected_ms,
                            self.target_ms, self.platform.name, list(self.history), alpha)


def search(platform: str | os.PathLike | Platform = "zcu102", target_ms: float = 1.0, epochs: int = 10,
           lam: float = 1.0, data: Data | None = None, seed: int = 0, batch_size: int = 128,
           **kwargs: Any) -> SearchResult:
    """Latency-targeted ProxylessNAS-style search on ``platform`` (default ``zcu102``); returns the derived
    architecture and history.

    ``data``: ``None`` (scikit-learn digits in batches of ``batch_size``), one ``DataLoader`` (weights and
    architecture both train on it) or a ``(train, val)`` pair; the input channels are read from the first
    batch. ``kwargs`` go to `ProxylessSearch` (``width_mult``, ``arch_lr``, ``latency_loss``, ``num_classes``,
    ``table`` ...). Seeds numpy and torch with ``seed``.
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
    kwargs.setdefault("in_channels", int(x0.shape[1]))
    s = ProxylessSearch(platform, target_ms, lam, seed=seed, **kwargs)
    s.fit(train, val, epochs)
    res = s.result()
    log.info("proxyless search on %s: %s -> %.4f ms predicted (target %.4f ms)", res.platform,
             " ".join(res.choices), res.predicted_ms, target_ms)
    return res
