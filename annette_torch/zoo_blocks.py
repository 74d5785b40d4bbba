"""Building blocks the zoo's architectures share (`annette_torch.zoo`, `annette_torch.zoo_modern`)."""

from __future__ import annotations

import torch
import torch.nn as nn

__all__ = ["ConvBNAct", "SqueezeExcite"]


class ConvBNAct(nn.Sequential):
    """Conv2d (no bias) + BatchNorm2d + optional activation; 'same' padding for odd kernels."""

    def __init__(self, cin: int, cout: int, kernel: int = 3, stride: int = 1, groups: int = 1,
                 act: type[nn.Module] | None = nn.ReLU, eps: float = 1e-5, padding: int | None = None) -> None:
        pad = (kernel - 1) // 2 if padding is None else padding
        layers: list[nn.Module] = [nn.Conv2d(cin, cout, kernel, stride, pad, groups=groups, bias=False),
                                   nn.BatchNorm2d(cout, eps=eps)]
        if act is not None:
            layers.append(act())
        super().__init__(*layers)


class SqueezeExcite(nn.Module):
    """Squeeze-and-excitation: global pool, 1x1 conv down, activation, 1x1 conv up, gate, multiply."""

    def __init__(self, channels: int, squeeze: int, act: type[nn.Module] = nn.ReLU,
                 gate: type[nn.Module] = nn.Sigmoid) -> None:
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(channels, squeeze, 1)
        self.act = act()
        self.fc2 = nn.Conv2d(squeeze, channels, 1)
        self.gate = gate()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = self.gate(self.fc2(self.act(self.fc1(self.pool(x)))))
        return x * s
