"""A small model zoo: common image-classification architectures written from their papers.

Every constructor returns an ``nn.Module`` in eval mode; default arguments give the standard ImageNet
configuration (1000 classes). The models use plain ``torch.nn`` modules plus ``torch.cat``, ``+``,
``chunk``, ``view`` and ``transpose``, have no data-dependent control flow, and are traceable by
``torch.fx.symbolic_trace`` and exportable by ``torch.onnx.export``. Weights are random: the zoo exists
to give the estimator, the benchmarks and the tests realistic layer mixes, not to classify images.

``ZOO`` maps a name to its constructor, ``INPUT_SHAPES`` gives each name's default input shape and
``get(name)`` builds one (raising :class:`~annette_torch.errors.ModelLoadError` for unknown names).

Notes on fidelity (parameter counts equal the usual published figures):

* ``googlenet`` has no auxiliary heads and, like the widely used reference implementation (whose
  parameter count, 6.62M, is the one usually quoted), uses a 3x3 convolution in the "5x5" branch.
* ``regnetx_400mf`` follows the RegNet design-space recipe (d=22, w0=24, wa=24.48, wm=2.54, g=16).
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import torch
import torch.nn as nn

from .errors import ModelLoadError
from .zoo_blocks import ConvBNAct, SqueezeExcite
from .zoo_modern import MODERN, MODERN_INPUT_SHAPES

__all__ = ["ZOO", "INPUT_SHAPES", "get", "names"]


# ---------------------------------------------------------------------------------------------- helpers

def _make_divisible(v: float, divisor: int = 8, min_value: int | None = None) -> int:
    """Round ``v`` to a multiple of ``divisor`` without going more than 10% below it (MobileNet rule)."""
    min_value = divisor if min_value is None else min_value
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


def _finish(m: nn.Module) -> nn.Module:
    """Standard random initialisation (keeps activations finite through deep nets) and eval mode."""
    for mod in m.modules():
        if isinstance(mod, nn.Conv2d):
            nn.init.kaiming_normal_(mod.weight, mode="fan_out", nonlinearity="relu")
            if mod.bias is not None:
                nn.init.zeros_(mod.bias)
        elif isinstance(mod, nn.BatchNorm2d):
            nn.init.ones_(mod.weight)
            nn.init.zeros_(mod.bias)
        elif isinstance(mod, nn.Linear):
            nn.init.normal_(mod.weight, 0.0, 0.01)
            nn.init.zeros_(mod.bias)
    return m.eval()


# ------------------------------------------------------------------------------------------------ ResNet
# He et al., "Deep Residual Learning for Image Recognition" (2015); v1.5 (stride in the 3x3 conv).

class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        cout = planes * self.expansion
        self.conv1 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(planes, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu2 = nn.ReLU()
        self.downsample: nn.Module = nn.Identity()
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu1(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu2(out + self.downsample(x))


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        cout = planes * self.expansion
        self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.relu2 = nn.ReLU()
        self.conv3 = nn.Conv2d(planes, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.relu3 = nn.ReLU()
        self.downsample: nn.Module = nn.Identity()
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu1(self.bn1(self.conv1(x)))
        out = self.relu2(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu3(out + self.downsample(x))


class ResNet(nn.Module):
    def __init__(self, block: type[BasicBlock] | type[Bottleneck], layers: Sequence[int],
                 num_classes: int = 1000, widths: Sequence[int] = (64, 128, 256, 512), stem: int = 64,
                 small_input: bool = False) -> None:
        super().__init__()
        if small_input:  # CIFAR-style stem: 3x3 stride 1, no max pool
            self.stem = nn.Sequential(nn.Conv2d(3, stem, 3, 1, 1, bias=False), nn.BatchNorm2d(stem), nn.ReLU())
        else:
            self.stem = nn.Sequential(nn.Conv2d(3, stem, 7, 2, 3, bias=False), nn.BatchNorm2d(stem), nn.ReLU(),
                                      nn.MaxPool2d(3, 2, 1))
        cin = stem
        stages = []
        for i, (planes, n) in enumerate(zip(widths, layers)):
            blocks = []
            for j in range(n):
                blocks.append(block(cin, planes, 2 if (i > 0 and j == 0) else 1))
                cin = planes * block.expansion
            stages.append(nn.Sequential(*blocks))
        self.layers = nn.Sequential(*stages)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet18(num_classes: int = 1000) -> nn.Module:
    return _finish(ResNet(BasicBlock, (2, 2, 2, 2), num_classes))


def resnet34(num_classes: int = 1000) -> nn.Module:
    return _finish(ResNet(BasicBlock, (3, 4, 6, 3), num_classes))


def resnet50(num_classes: int = 1000) -> nn.Module:
    return _finish(ResNet(Bottleneck, (3, 4, 6, 3), num_classes))


def tiny_resnet(num_classes: int = 1000) -> nn.Module:
    """Two basic blocks (16 -> 16, 16 -> 32 with stride 2 and a projection shortcut); 32x32 input."""
    return _finish(ResNet(BasicBlock, (1, 1), num_classes, widths=(16, 32), stem=16, small_input=True))


# ----------------------------------------------------------------------------------------------- tiny CNN

def tiny_cnn(num_classes: int = 1000) -> nn.Module:
    """Three conv layers (conv-BN-ReLU, strided conv-BN-ReLU, max pool, conv-ReLU), global pool, linear."""
    return _finish(nn.Sequential(
        nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
        nn.Conv2d(16, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
        nn.MaxPool2d(2, 2),
        nn.Conv2d(32, 64, 3, 1, 1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(1),
        nn.Linear(64, num_classes),
    ))


# ------------------------------------------------------------------------------------------- MobileNetV2
# Sandler et al., "MobileNetV2: Inverted Residuals and Linear Bottlenecks" (2018).

class InvertedResidual(nn.Module):
    """Expand 1x1 (skipped when t = 1), depthwise kxk, linear project 1x1; residual when shapes match."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int, kernel: int = 3,
                 act: type[nn.Module] = nn.ReLU6) -> None:
        super().__init__()
        hidden = int(round(cin * expand))
        self.use_res = stride == 1 and cin == cout
        layers: list[nn.Module] = []
        if expand != 1:
            layers.append(ConvBNAct(cin, hidden, 1, act=act))
        layers += [ConvBNAct(hidden, hidden, kernel, stride, groups=hidden, act=act),
                   ConvBNAct(hidden, cout, 1, act=None)]
        self.conv = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.use_res:  # fixed at construction, not data-dependent
            return x + self.conv(x)
        return self.conv(x)


class MobileNetV2(nn.Module):
    SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                (6, 320, 1, 1))  # (expansion t, channels c, repeats n, first stride s)

    def __init__(self, num_classes: int = 1000, width_mult: float = 1.0, dropout: float = 0.2) -> None:
        super().__init__()
        cin = _make_divisible(32 * width_mult)
        last = _make_divisible(1280 * max(1.0, width_mult))
        layers: list[nn.Module] = [ConvBNAct(3, cin, 3, 2, act=nn.ReLU6)]
        for t, c, n, s in self.SETTINGS:
            cout = _make_divisible(c * width_mult)
            for i in range(n):
                layers.append(InvertedResidual(cin, cout, s if i == 0 else 1, t))
                cin = cout
        layers.append(ConvBNAct(cin, last, 1, act=nn.ReLU6))
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Dropout(dropout), nn.Linear(last, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


def mobilenet_v2(num_classes: int = 1000, width_mult: float = 1.0) -> nn.Module:
    return _finish(MobileNetV2(num_classes, width_mult))


# ------------------------------------------------------------------------------------- MobileNetV3-Small
# Howard et al., "Searching for MobileNetV3" (2019), Table 2.

class MBConvV3(nn.Module):
    def __init__(self, cin: int, kernel: int, exp: int, cout: int, se: bool, act: type[nn.Module],
                 stride: int) -> None:
        super().__init__()
        self.use_res = stride == 1 and cin == cout
        layers: list[nn.Module] = []
        if exp != cin:
            layers.append(ConvBNAct(cin, exp, 1, act=act, eps=1e-3))
        layers.append(ConvBNAct(exp, exp, kernel, stride, groups=exp, act=act, eps=1e-3))
        if se:
            layers.append(SqueezeExcite(exp, _make_divisible(exp // 4), nn.ReLU, nn.Hardsigmoid))
        layers.append(ConvBNAct(exp, cout, 1, act=None, eps=1e-3))
        self.block = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.use_res:
            return x + self.block(x)
        return self.block(x)


class MobileNetV3Small(nn.Module):
    RE, HS = nn.ReLU, nn.Hardswish
    SETTINGS = (  # kernel, expansion size, out channels, SE, activation, stride
        (3, 16, 16, True, RE, 2), (3, 72, 24, False, RE, 2), (3, 88, 24, False, RE, 1),
        (5, 96, 40, True, HS, 2), (5, 240, 40, True, HS, 1), (5, 240, 40, True, HS, 1),
        (5, 120, 48, True, HS, 1), (5, 144, 48, True, HS, 1), (5, 288, 96, True, HS, 2),
        (5, 576, 96, True, HS, 1), (5, 576, 96, True, HS, 1),
    )

    def __init__(self, num_classes: int = 1000, last_channel: int = 1024, dropout: float = 0.2) -> None:
        super().__init__()
        layers: list[nn.Module] = [ConvBNAct(3, 16, 3, 2, act=nn.Hardswish, eps=1e-3)]
        cin = 16
        for k, exp, cout, se, act, s in self.SETTINGS:
            layers.append(MBConvV3(cin, k, exp, cout, se, act, s))
            cin = cout
        layers.append(ConvBNAct(cin, 6 * cin, 1, act=nn.Hardswish, eps=1e-3))
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Linear(6 * cin, last_channel), nn.Hardswish(), nn.Dropout(dropout),
                                        nn.Linear(last_channel, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


def mobilenet_v3_small(num_classes: int = 1000) -> nn.Module:
    return _finish(MobileNetV3Small(num_classes))


# --------------------------------------------------------------------------------------------------- VGG
# Simonyan & Zisserman, "Very Deep Convolutional Networks for Large-Scale Image Recognition" (2014).

_VGG_CFG = {
    "A": (64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"),
    "D": (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"),
    "E": (64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M", 512, 512, 512, 512, "M"),
}


class VGG(nn.Module):
    def __init__(self, cfg: Sequence[int | str], num_classes: int = 1000, dropout: float = 0.5) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        cin = 3
        for v in cfg:
            if v == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers += [nn.Conv2d(cin, int(v), 3, 1, 1), nn.ReLU()]
                cin = int(v)
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(7)
        self.classifier = nn.Sequential(
            nn.Linear(cin * 7 * 7, 4096), nn.ReLU(), nn.Dropout(dropout),
            nn.Linear(4096, 4096), nn.ReLU(), nn.Dropout(dropout),
            nn.Linear(4096, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


def vgg11(num_classes: int = 1000) -> nn.Module:
    return _finish(VGG(_VGG_CFG["A"], num_classes))


def vgg16(num_classes: int = 1000) -> nn.Module:
    return _finish(VGG(_VGG_CFG["D"], num_classes))


def vgg19(num_classes: int = 1000) -> nn.Module:
    return _finish(VGG(_VGG_CFG["E"], num_classes))


# ------------------------------------------------------------------------------------------------ AlexNet
# Krizhevsky et al. (2012), single-tower variant ("One weird trick", Krizhevsky 2014).

class AlexNet(nn.Module):
    def __init__(self, num_classes: int = 1000, dropout: float = 0.5) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 11, 4, 2), nn.ReLU(), nn.MaxPool2d(3, 2),
            nn.Conv2d(64, 192, 5, 1, 2), nn.ReLU(), nn.MaxPool2d(3, 2),
            nn.Conv2d(192, 384, 3, 1, 1), nn.ReLU(),
            nn.Conv2d(384, 256, 3, 1, 1), nn.ReLU(),
            nn.Conv2d(256, 256, 3, 1, 1), nn.ReLU(), nn.MaxPool2d(3, 2))
        self.avgpool = nn.AdaptiveAvgPool2d(6)
        self.classifier = nn.Sequential(
            nn.Dropout(dropout), nn.Linear(256 * 6 * 6, 4096), nn.ReLU(),
            nn.Dropout(dropout), nn.Linear(4096, 4096), nn.ReLU(),
            nn.Linear(4096, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


def alexnet(num_classes: int = 1000) -> nn.Module:
    return _finish(AlexNet(num_classes))


# --------------------------------------------------------------------------------------------- SqueezeNet
# Iandola et al., "SqueezeNet" (2016); v1.1 (3x3 stem with 64 channels, earlier pooling).

class Fire(nn.Module):
    def __init__(self, cin: int, squeeze: int, e1: int, e3: int) -> None:
        super().__init__()
        self.squeeze = nn.Conv2d(cin, squeeze, 1)
        self.squeeze_act = nn.ReLU()
        self.expand1 = nn.Conv2d(squeeze, e1, 1)
        self.expand1_act = nn.ReLU()
        self.expand3 = nn.Conv2d(squeeze, e3, 3, padding=1)
        self.expand3_act = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = self.squeeze_act(self.squeeze(x))
        return torch.cat([self.expand1_act(self.expand1(s)), self.expand3_act(self.expand3(s))], 1)


class SqueezeNet11(nn.Module):
    def __init__(self, num_classes: int = 1000, dropout: float = 0.5) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 3, 2), nn.ReLU(), nn.MaxPool2d(3, 2, ceil_mode=True),
            Fire(64, 16, 64, 64), Fire(128, 16, 64, 64), nn.MaxPool2d(3, 2, ceil_mode=True),
            Fire(128, 32, 128, 128), Fire(256, 32, 128, 128), nn.MaxPool2d(3, 2, ceil_mode=True),
            Fire(256, 48, 192, 192), Fire(384, 48, 192, 192), Fire(384, 64, 256, 256), Fire(512, 64, 256, 256))
        self.classifier = nn.Sequential(nn.Dropout(dropout), nn.Conv2d(512, num_classes, 1), nn.ReLU(),
                                        nn.AdaptiveAvgPool2d(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.flatten(self.classifier(self.features(x)), 1)


def squeezenet1_1(num_classes: int = 1000) -> nn.Module:
    m = SqueezeNet11(num_classes)
    _finish(m)
    nn.init.normal_(m.classifier[1].weight, 0.0, 0.01)  # small final conv, as the paper's setup
    return m


# ----------------------------------------------------------------------------------------------- DenseNet
# Huang et al., "Densely Connected Convolutional Networks" (2017); DenseNet-BC.

class DenseLayer(nn.Module):
    def __init__(self, cin: int, growth: int, bn_size: int) -> None:
        super().__init__()
        self.norm1 = nn.BatchNorm2d(cin)
        self.relu1 = nn.ReLU()
        self.conv1 = nn.Conv2d(cin, bn_size * growth, 1, bias=False)
        self.norm2 = nn.BatchNorm2d(bn_size * growth)
        self.relu2 = nn.ReLU()
        self.conv2 = nn.Conv2d(bn_size * growth, growth, 3, 1, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv2(self.relu2(self.norm2(self.conv1(self.relu1(self.norm1(x))))))


class DenseBlock(nn.Module):
    def __init__(self, n: int, cin: int, growth: int, bn_size: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(DenseLayer(cin + i * growth, growth, bn_size) for i in range(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        feats = [x]
        for layer in self.layers:  # fixed-length module loop: unrolled by tracing
            feats.append(layer(torch.cat(feats, 1)))
        return torch.cat(feats, 1)


class Transition(nn.Sequential):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__(nn.BatchNorm2d(cin), nn.ReLU(), nn.Conv2d(cin, cout, 1, bias=False), nn.AvgPool2d(2, 2))


class DenseNet(nn.Module):
    def __init__(self, growth: int = 32, blocks: Sequence[int] = (6, 12, 24, 16), init: int = 64,
                 bn_size: int = 4, num_classes: int = 1000) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Conv2d(3, init, 7, 2, 3, bias=False), nn.BatchNorm2d(init), nn.ReLU(),
                                   nn.MaxPool2d(3, 2, 1)]
        c = init
        for i, n in enumerate(blocks):
            layers.append(DenseBlock(n, c, growth, bn_size))
            c += n * growth
            if i != len(blocks) - 1:
                layers.append(Transition(c, c // 2))
                c //= 2
        layers += [nn.BatchNorm2d(c), nn.ReLU()]
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(c, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


def densenet121(num_classes: int = 1000) -> nn.Module:
    return _finish(DenseNet(32, (6, 12, 24, 16), 64, 4, num_classes))


# ------------------------------------------------------------------------------------------ EfficientNet
# Tan & Le, "EfficientNet: Rethinking Model Scaling for CNNs" (2019), B0 (Table 1).

class MBConv(nn.Module):
    """Expand 1x1, depthwise kxk, SE (squeeze = block input channels / 4), project 1x1; SiLU throughout."""

    def __init__(self, cin: int, cout: int, kernel: int, stride: int, expand: int, se_ratio: float = 0.25) -> None:
        super().__init__()
        hidden = cin * expand
        self.use_res = stride == 1 and cin == cout
        layers: list[nn.Module] = []
        if expand != 1:
            layers.append(ConvBNAct(cin, hidden, 1, act=nn.SiLU, eps=1e-3))
        layers += [ConvBNAct(hidden, hidden, kernel, stride, groups=hidden, act=nn.SiLU, eps=1e-3),
                   SqueezeExcite(hidden, max(1, int(cin * se_ratio)), nn.SiLU, nn.Sigmoid),
                   ConvBNAct(hidden, cout, 1, act=None, eps=1e-3)]
        self.block = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.use_res:  # stochastic depth is the identity at inference
            return x + self.block(x)
        return self.block(x)


class EfficientNetB0(nn.Module):
    STAGES = ((1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3), (6, 5, 1, 112, 3),
              (6, 5, 2, 192, 4), (6, 3, 1, 320, 1))  # expansion, kernel, first stride, channels, repeats

    def __init__(self, num_classes: int = 1000, dropout: float = 0.2) -> None:
        super().__init__()
        layers: list[nn.Module] = [ConvBNAct(3, 32, 3, 2, act=nn.SiLU, eps=1e-3)]
        cin = 32
        for e, k, s, c, n in self.STAGES:
            for i in range(n):
                layers.append(MBConv(cin, c, k, s if i == 0 else 1, e))
                cin = c
        layers.append(ConvBNAct(cin, 1280, 1, act=nn.SiLU, eps=1e-3))
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Dropout(dropout), nn.Linear(1280, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


def efficientnet_b0(num_classes: int = 1000) -> nn.Module:
    return _finish(EfficientNetB0(num_classes))


# ------------------------------------------------------------------------------------------------ MNASNet
# Tan et al., "MnasNet: Platform-Aware Neural Architecture Search for Mobile" (2019): the B1 variant
# (no squeeze-excitation) with depth multiplier alpha.

class MnasBlock(nn.Module):
    def __init__(self, cin: int, cout: int, kernel: int, stride: int, expand: int) -> None:
        super().__init__()
        mid = cin * expand
        self.use_res = stride == 1 and cin == cout
        self.layers = nn.Sequential(
            ConvBNAct(cin, mid, 1), ConvBNAct(mid, mid, kernel, stride, groups=mid), ConvBNAct(mid, cout, 1, act=None))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.use_res:
            return x + self.layers(x)
        return self.layers(x)


def _mnas_round(v: float, divisor: int = 8) -> int:
    """Round to a multiple of ``divisor``, rounding up when rounding down would lose more than 10%."""
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new_v if new_v >= 0.9 * v else new_v + divisor


class MNASNet(nn.Module):
    STACKS = ((3, 2, 3, 3), (5, 2, 3, 3), (5, 2, 6, 3), (3, 1, 6, 2), (5, 2, 6, 4), (3, 1, 6, 1))
    # kernel, first stride, expansion, repeats

    def __init__(self, alpha: float, num_classes: int = 1000, dropout: float = 0.2) -> None:
        super().__init__()
        d = [_mnas_round(c * alpha) for c in (32, 16, 24, 40, 80, 96, 192, 320)]
        layers: list[nn.Module] = [ConvBNAct(3, d[0], 3, 2), ConvBNAct(d[0], d[0], 3, 1, groups=d[0]),
                                   ConvBNAct(d[0], d[1], 1, act=None)]
        cin = d[1]
        for (k, s, e, n), cout in zip(self.STACKS, d[2:]):
            for i in range(n):
                layers.append(MnasBlock(cin, cout, k, s if i == 0 else 1, e))
                cin = cout
        layers.append(ConvBNAct(cin, 1280, 1))
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Dropout(dropout), nn.Linear(1280, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


def mnasnet0_5(num_classes: int = 1000) -> nn.Module:
    return _finish(MNASNet(0.5, num_classes))


# --------------------------------------------------------------------------------------------- ShuffleNetV2
# Ma et al., "ShuffleNet V2: Practical Guidelines for Efficient CNN Architecture Design" (2018).

class ShuffleUnit(nn.Module):
    """Stride 1: split channels in half, transform one half, concat, shuffle. Stride 2: two branches."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.stride = stride
        self.channels = cout
        half = cout // 2
        if stride > 1:
            self.branch1: nn.Module = nn.Sequential(
                ConvBNAct(cin, cin, 3, stride, groups=cin, act=None), ConvBNAct(cin, half, 1))
        else:
            self.branch1 = nn.Identity()
        self.branch2 = nn.Sequential(
            ConvBNAct(cin if stride > 1 else half, half, 1),
            ConvBNAct(half, half, 3, stride, groups=half, act=None),
            ConvBNAct(half, half, 1))

    def _shuffle(self, x: torch.Tensor) -> torch.Tensor:
        """Channel shuffle with 2 groups: (N, 2, C/2, H, W) -> transpose -> (N, C, H, W)."""
        n, _, h, w = x.size()
        x = x.view(n, 2, self.channels // 2, h, w).transpose(1, 2).contiguous()
        return x.view(n, self.channels, h, w)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.stride == 1:  # fixed at construction
            x1, x2 = x.chunk(2, dim=1)
            out = torch.cat([x1, self.branch2(x2)], 1)
        else:
            out = torch.cat([self.branch1(x), self.branch2(x)], 1)
        return self._shuffle(out)


class ShuffleNetV2(nn.Module):
    def __init__(self, repeats: Sequence[int], channels: Sequence[int], num_classes: int = 1000) -> None:
        super().__init__()
        self.stem = nn.Sequential(ConvBNAct(3, channels[0], 3, 2), nn.MaxPool2d(3, 2, 1))
        cin = channels[0]
        stages = []
        for n, cout in zip(repeats, channels[1:-1]):
            stages.append(nn.Sequential(*[ShuffleUnit(cin if i == 0 else cout, cout, 2 if i == 0 else 1)
                                          for i in range(n)]))
            cin = cout
        self.stages = nn.Sequential(*stages)
        self.conv5 = ConvBNAct(cin, channels[-1], 1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(channels[-1], num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv5(self.stages(self.stem(x)))
        return self.fc(torch.flatten(self.pool(x), 1))


def shufflenet_v2_x0_5(num_classes: int = 1000) -> nn.Module:
    return _finish(ShuffleNetV2((4, 8, 4), (24, 48, 96, 192, 1024), num_classes))


# ------------------------------------------------------------------------------------------------ GoogLeNet
# Szegedy et al., "Going Deeper with Convolutions" (2014), Table 1; BN after every conv, no aux heads.

class Inception(nn.Module):
    def __init__(self, cin: int, c1: int, c3r: int, c3: int, c5r: int, c5: int, pool_proj: int) -> None:
        super().__init__()
        self.branch1 = ConvBNAct(cin, c1, 1, eps=1e-3)
        self.branch2 = nn.Sequential(ConvBNAct(cin, c3r, 1, eps=1e-3), ConvBNAct(c3r, c3, 3, eps=1e-3))
        # the "5x5" branch uses a 3x3 kernel, as the common reference implementation does
        self.branch3 = nn.Sequential(ConvBNAct(cin, c5r, 1, eps=1e-3), ConvBNAct(c5r, c5, 3, eps=1e-3))
        self.branch4 = nn.Sequential(nn.MaxPool2d(3, 1, 1, ceil_mode=True), ConvBNAct(cin, pool_proj, 1, eps=1e-3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.branch1(x), self.branch2(x), self.branch3(x), self.branch4(x)], 1)


class GoogLeNet(nn.Module):
    def __init__(self, num_classes: int = 1000, dropout: float = 0.2) -> None:
        super().__init__()
        self.features = nn.Sequential(
            ConvBNAct(3, 64, 7, 2, eps=1e-3), nn.MaxPool2d(3, 2, ceil_mode=True),
            ConvBNAct(64, 64, 1, eps=1e-3), ConvBNAct(64, 192, 3, eps=1e-3), nn.MaxPool2d(3, 2, ceil_mode=True),
            Inception(192, 64, 96, 128, 16, 32, 32), Inception(256, 128, 128, 192, 32, 96, 64),
            nn.MaxPool2d(3, 2, ceil_mode=True),
            Inception(480, 192, 96, 208, 16, 48, 64), Inception(512, 160, 112, 224, 24, 64, 64),
            Inception(512, 128, 128, 256, 24, 64, 64), Inception(512, 112, 144, 288, 32, 64, 64),
            Inception(528, 256, 160, 320, 32, 128, 128), nn.MaxPool2d(2, 2, ceil_mode=True),
            Inception(832, 256, 160, 320, 32, 128, 128), Inception(832, 384, 192, 384, 48, 128, 128))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.dropout = nn.Dropout(dropout)
        self.fc = nn.Linear(1024, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.dropout(torch.flatten(self.pool(self.features(x)), 1)))


def googlenet(num_classes: int = 1000) -> nn.Module:
    return _finish(GoogLeNet(num_classes))


# ------------------------------------------------------------------------------------------------- RegNetX
# Radosavovic et al., "Designing Network Design Spaces" (2020): X block = ResNeXt bottleneck, ratio 1.

def _regnet_stages(depth: int, w0: float, wa: float, wm: float, group: int, quant: int = 8
                   ) -> list[tuple[int, int, int]]:
    """Per-stage (width, depth, group width) from the quantised linear width rule."""
    widths = []
    for i in range(depth):
        u = w0 + wa * i                          # continuous width
        s = round(math.log(u / w0) / math.log(wm))  # step index
        widths.append(int(round(w0 * wm ** s / quant) * quant))
    stages: list[list[int]] = []
    for w in widths:
        if stages and stages[-1][0] == w:
            stages[-1][1] += 1
        else:
            stages.append([w, 1])
    out = []
    for w, d in stages:
        g = min(group, w)
        out.append((_make_divisible(w, g), d, g))  # make the width a multiple of the group width
    return out


class XBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, group_width: int) -> None:
        super().__init__()
        self.a = ConvBNAct(cin, cout, 1)
        self.b = ConvBNAct(cout, cout, 3, stride, groups=cout // group_width)
        self.c = ConvBNAct(cout, cout, 1, act=None)
        self.proj: nn.Module = nn.Identity()
        if stride != 1 or cin != cout:
            self.proj = ConvBNAct(cin, cout, 1, stride, act=None)
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.proj(x) + self.c(self.b(self.a(x))))


class RegNetX(nn.Module):
    def __init__(self, depth: int, w0: float, wa: float, wm: float, group: int, num_classes: int = 1000,
                 stem: int = 32) -> None:
        super().__init__()
        self.stem = ConvBNAct(3, stem, 3, 2)
        cin = stem
        stages = []
        for w, d, g in _regnet_stages(depth, w0, wa, wm, group):
            stages.append(nn.Sequential(*[XBlock(cin if i == 0 else w, w, 2 if i == 0 else 1, g) for i in range(d)]))
            cin = w
        self.stages = nn.Sequential(*stages)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.stages(self.stem(x))), 1))


def regnetx_400mf(num_classes: int = 1000) -> nn.Module:
    return _finish(RegNetX(22, 24.0, 24.48, 2.54, 16, num_classes))


# ------------------------------------------------------------------------ TF-slim / TPU model definitions
# The Vitis AI model zoo's TensorFlow networks follow the TF-slim definitions (tensorflow/models,
# research/slim/nets) and the TPU EfficientNet builders; they differ from the torchvision-style ones above
# in where ResNet blocks downsample, the pre-activation units of ResNet v2 and the logits as 1x1 convolutions.

class SlimBottleneckV1(nn.Module):
    """TF-slim ``resnet_v1.bottleneck``: 1x1, 3x3 (carrying the stride), 1x1; the shortcut subsamples (a 1x1
    max pool with the stride) when depths match, else a strided 1x1 projection; ReLU after the sum."""

    def __init__(self, cin: int, depth: int, bottleneck: int, stride: int) -> None:
        super().__init__()
        if cin == depth:
            self.shortcut: nn.Module = nn.MaxPool2d(1, stride) if stride > 1 else nn.Identity()
        else:
            self.shortcut = ConvBNAct(cin, depth, 1, stride, act=None)
        self.conv1 = ConvBNAct(cin, bottleneck, 1)
        self.conv2 = ConvBNAct(bottleneck, bottleneck, 3, stride)
        self.conv3 = ConvBNAct(bottleneck, depth, 1, act=None)
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.shortcut(x) + self.conv3(self.conv2(self.conv1(x))))


class SlimBottleneckV2(nn.Module):
    """TF-slim ``resnet_v2.bottleneck`` (pre-activation): BN + ReLU first; the shortcut subsamples the input
    (depths match) or projects the pre-activation; 1x1, 3x3 (stride), 1x1 without BN / activation; no ReLU
    after the sum."""

    def __init__(self, cin: int, depth: int, bottleneck: int, stride: int) -> None:
        super().__init__()
        self.preact = nn.Sequential(nn.BatchNorm2d(cin), nn.ReLU())
        self.project = cin != depth
        if self.project:
            self.shortcut: nn.Module = nn.Conv2d(cin, depth, 1, stride)
        else:
            self.shortcut = nn.MaxPool2d(1, stride) if stride > 1 else nn.Identity()
        self.conv1 = ConvBNAct(cin, bottleneck, 1)
        self.conv2 = ConvBNAct(bottleneck, bottleneck, 3, stride)
        self.conv3 = nn.Conv2d(bottleneck, depth, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pre = self.preact(x)
        short = self.shortcut(pre) if self.project else self.shortcut(x)
        return short + self.conv3(self.conv2(self.conv1(pre)))


class SlimResNet(nn.Module):
    """TF-slim ``resnet_v1`` / ``resnet_v2``: 7x7 stride-2 root, 3x3 stride-2 max pool, four blocks of
    bottlenecks (256, 512, 1024, 2048 deep) whose *last* unit carries the stride (2, 2, 2, 1), global average
    pool, logits as a 1x1 convolution; v2 has a bare root convolution and BN + ReLU after the last block."""

    def __init__(self, units: Sequence[int], v2: bool = False, num_classes: int = 1000) -> None:
        super().__init__()
        unit = SlimBottleneckV2 if v2 else SlimBottleneckV1
        root: list[nn.Module] = ([nn.Conv2d(3, 64, 7, 2, 3)] if v2 else [ConvBNAct(3, 64, 7, 2)])
        layers: list[nn.Module] = root + [nn.MaxPool2d(3, 2, 1)]
        cin = 64
        for i, n in enumerate(units):
            depth, stride = 256 * 2 ** i, (2 if i < 3 else 1)
            for j in range(n):
                layers.append(unit(cin, depth, depth // 4, stride if j == n - 1 else 1))
                cin = depth
        if v2:
            layers += [nn.BatchNorm2d(cin), nn.ReLU()]
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.logits = nn.Conv2d(cin, num_classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.flatten(self.logits(self.pool(self.features(x))), 1)


def resnet_v1_50(num_classes: int = 1000) -> nn.Module:
    return _finish(SlimResNet((3, 4, 6, 3), num_classes=num_classes))


def resnet_v1_101(num_classes: int = 1000) -> nn.Module:
    return _finish(SlimResNet((3, 4, 23, 3), num_classes=num_classes))


def resnet_v2_50(num_classes: int = 1000) -> nn.Module:
    return _finish(SlimResNet((3, 4, 6, 3), v2=True, num_classes=num_classes))


def inception_v1(num_classes: int = 1000) -> nn.Module:
    """TF-slim ``inception_v1``: GoogLeNet with BN, a 3x3 convolution in the "5x5" branch, no auxiliary heads
    (the `googlenet` above), logits as a 1x1 convolution."""
    return _finish(_SlimInceptionV1(GoogLeNet(num_classes), num_classes))


class _SlimInceptionV1(nn.Module):
    def __init__(self, g: GoogLeNet, num_classes: int) -> None:
        super().__init__()
        self.features, self.pool = g.features, g.pool
        self.logits = nn.Conv2d(1024, num_classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.flatten(self.logits(self.pool(self.features(x))), 1)


def _cba(cin: int, cout: int, k: int | tuple[int, int], s: int = 1, valid: bool = False) -> nn.Sequential:
    """Conv (no bias) + BN + ReLU with TF 'SAME' (default) or 'VALID' padding, any (kh, kw) kernel."""
    kh, kw = (k, k) if isinstance(k, int) else k
    pad = (0, 0) if valid else ((kh - 1) // 2, (kw - 1) // 2)
    return nn.Sequential(nn.Conv2d(cin, cout, (kh, kw), s, pad, bias=False), nn.BatchNorm2d(cout, eps=1e-3), nn.ReLU())


class _Branches(nn.Module):
    """Parallel branches concatenated along channels (an Inception "Mixed" module)."""

    def __init__(self, *branches: nn.Module) -> None:
        super().__init__()
        self.branches = nn.ModuleList(branches)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([b(x) for b in self.branches], 1)


class _Split(nn.Module):
    """A stem followed by two parallel convolutions concatenated (Inception v3's 1x3 / 3x1 pairs)."""

    def __init__(self, stem: nn.Module, a: nn.Module, b: nn.Module) -> None:
        super().__init__()
        self.stem, self.a, self.b = stem, a, b

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.stem(x)
        return torch.cat([self.a(y), self.b(y)], 1)


def _pool_proj(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(nn.AvgPool2d(3, 1, 1, count_include_pad=False), _cba(cin, cout, 1))


class InceptionV3(nn.Module):
    """TF-slim ``inception_v3`` (Szegedy et al. 2015) at 299x299, without the auxiliary head."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        stem = [_cba(3, 32, 3, 2, True), _cba(32, 32, 3, valid=True), _cba(32, 64, 3), nn.MaxPool2d(3, 2),
                _cba(64, 80, 1), _cba(80, 192, 3, valid=True), nn.MaxPool2d(3, 2)]
        blocks: list[nn.Module] = []
        cin = 192
        for pool in (32, 64, 64):  # Mixed_5b..5d
            blocks.append(_Branches(_cba(cin, 64, 1), nn.Sequential(_cba(cin, 48, 1), _cba(48, 64, 5)),
                                    nn.Sequential(_cba(cin, 64, 1), _cba(64, 96, 3), _cba(96, 96, 3)),
                                    _pool_proj(cin, pool)))
            cin = 224 + pool
        blocks.append(_Branches(_cba(cin, 384, 3, 2, True),  # Mixed_6a
                                nn.Sequential(_cba(cin, 64, 1), _cba(64, 96, 3), _cba(96, 96, 3, 2, True)),
                                nn.MaxPool2d(3, 2)))
        cin = 768
        for c in (128, 160, 160, 192):  # Mixed_6b..6e
            blocks.append(_Branches(
                _cba(cin, 192, 1),
                nn.Sequential(_cba(cin, c, 1), _cba(c, c, (1, 7)), _cba(c, 192, (7, 1))),
                nn.Sequential(_cba(cin, c, 1), _cba(c, c, (7, 1)), _cba(c, c, (1, 7)), _cba(c, c, (7, 1)),
                              _cba(c, 192, (1, 7))),
                _pool_proj(cin, 192)))
        blocks.append(_Branches(nn.Sequential(_cba(cin, 192, 1), _cba(192, 320, 3, 2, True)),  # Mixed_7a
                                nn.Sequential(_cba(cin, 192, 1), _cba(192, 192, (1, 7)), _cba(192, 192, (7, 1)),
                                              _cba(192, 192, 3, 2, True)),
                                nn.MaxPool2d(3, 2)))
        cin = 1280
        for _ in range(2):  # Mixed_7b, 7c
            blocks.append(_Branches(
                _cba(cin, 320, 1),
                _Split(_cba(cin, 384, 1), _cba(384, 384, (1, 3)), _cba(384, 384, (3, 1))),
                _Split(nn.Sequential(_cba(cin, 448, 1), _cba(448, 384, 3)), _cba(384, 384, (1, 3)),
                       _cba(384, 384, (3, 1))),
                _pool_proj(cin, 192)))
            cin = 2048
        self.features = nn.Sequential(*stem, *blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.logits = nn.Conv2d(cin, num_classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.flatten(self.logits(self.pool(self.features(x))), 1)


def inception_v3(num_classes: int = 1000) -> nn.Module:
    return _finish(InceptionV3(num_classes))


class MobileNetV1(nn.Module):
    """TF-slim ``mobilenet_v1`` (Howard et al. 2017): 3x3 stride-2 conv, 13 depthwise-separable layers (BN,
    ReLU6), global average pool, logits as a 1x1 convolution; ``depth_multiplier`` scales every width (min 8)."""

    SPEC = ((64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), (512, 1), (512, 1), (512, 1), (512, 1),
            (512, 1), (1024, 2), (1024, 1))

    def __init__(self, depth_multiplier: float = 1.0, num_classes: int = 1000) -> None:
        super().__init__()
        d = lambda c: max(int(c * depth_multiplier), 8)  # noqa: E731 - slim's depth()
        cin = d(32)
        layers: list[nn.Module] = [ConvBNAct(3, cin, 3, 2, act=nn.ReLU6, eps=1e-3)]
        for c, s in self.SPEC:
            layers += [ConvBNAct(cin, cin, 3, s, groups=cin, act=nn.ReLU6, eps=1e-3),
                       ConvBNAct(cin, d(c), 1, act=nn.ReLU6, eps=1e-3)]
            cin = d(c)
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.logits = nn.Conv2d(cin, num_classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.flatten(self.logits(self.pool(self.features(x))), 1)


def mobilenet_v1_1_0(num_classes: int = 1000) -> nn.Module:
    return _finish(MobileNetV1(1.0, num_classes))


def mobilenet_v1_0_5(num_classes: int = 1000) -> nn.Module:
    return _finish(MobileNetV1(0.5, num_classes))


def mobilenet_v2_1_4(num_classes: int = 1000) -> nn.Module:
    """MobileNetV2 with width multiplier 1.4 (stem 48, last layer 1792 channels), as TF-slim builds it."""
    return _finish(MobileNetV2(num_classes, 1.4))


class FusedMBConv(nn.Module):
    """EdgeTPU's fused inverted bottleneck: a k x k expansion convolution (carrying the stride) in place of the
    1x1 expansion and the depthwise convolution, then the 1x1 projection; residual when shapes match.
    ``expand`` = None: no expansion convolution (projection only), as slim's expanded_conv does when the
    expanded width does not exceed the input's."""

    def __init__(self, cin: int, cout: int, kernel: int, stride: int, hidden: int | None,
                 residual: bool = True) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        if hidden is not None:
            layers.append(ConvBNAct(cin, hidden, kernel, stride, eps=1e-3))
        layers.append(ConvBNAct(hidden or cin, cout, 1, act=None, eps=1e-3))
        self.block = nn.Sequential(*layers)
        self.use_res = residual and stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.use_res:
            return x + self.block(x)
        return self.block(x)


class _EdgeNet(nn.Module):
    """Stem conv, a list of blocks, 1x1 head conv, global average pool, classifier."""

    def __init__(self, stem: int, blocks: list[nn.Module], cin: int, head: int, num_classes: int,
                 act: type[nn.Module] = nn.ReLU, conv_logits: bool = False) -> None:
        super().__init__()
        self.features = nn.Sequential(ConvBNAct(3, stem, 3, 2, act=act, eps=1e-3), *blocks,
                                      ConvBNAct(cin, head, 1, act=act, eps=1e-3))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.conv_logits = conv_logits
        self.classifier: nn.Module = nn.Conv2d(head, num_classes, 1) if conv_logits else nn.Linear(head, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.features(x))
        if self.conv_logits:
            return torch.flatten(self.classifier(x), 1)
        return self.classifier(torch.flatten(x, 1))


def efficientnet_lite0(num_classes: int = 1000) -> nn.Module:
    """EfficientNet-Lite0 (TPU ``efficientnet_lite_builder``): B0's blocks without squeeze-excitation, ReLU6,
    stem and head kept at 32 and 1280 channels."""
    blocks: list[nn.Module] = []
    cin = 32
    for e, k, s, c, n in EfficientNetB0.STAGES:
        for i in range(n):
            blocks.append(InvertedResidual(cin, c, s if i == 0 else 1, e, k, act=nn.ReLU6))
            cin = c
    return _finish(_EdgeNet(32, blocks, cin, 1280, num_classes, nn.ReLU6))


def efficientnet_edgetpu_s(num_classes: int = 1000) -> nn.Module:
    """EfficientNet-EdgeTPU-S (TPU ``efficientnet_edgetpu_builder``): fused MBConv in the first three stages,
    ReLU, no squeeze-excitation; block strings r1_k3_s11_e4_i24_o24_c1_noskip, r2_k3_s22_e8_i24_o32_c1,
    r4_k3_s22_e8_i32_o48_c1, r5_k5_s22_e8_i48_o96, r4_k5_s11_e8_i96_o144, r2_k5_s22_e8_i144_o192 (the expanded
    width is the block string's input width times e)."""
    spec = ((1, 3, 1, 4, 24, 24, True, False), (2, 3, 2, 8, 24, 32, True, True), (4, 3, 2, 8, 32, 48, True, True),
            (5, 5, 2, 8, 48, 96, False, True), (4, 5, 1, 8, 96, 144, False, True),
            (2, 5, 2, 8, 144, 192, False, True))  # repeats, kernel, stride, expansion, in, out, fused, skip
    blocks: list[nn.Module] = []
    cin = 32
    for r, k, s, e, i_str, o, fused, skip in spec:
        for j in range(r):
            width = (i_str if j == 0 else o) * e
            stride = s if j == 0 else 1
            if fused:
                blocks.append(FusedMBConv(cin, o, k, stride, width, residual=skip))
            else:
                blocks.append(InvertedResidual(cin, o, stride, width / cin, k, act=nn.ReLU))
            cin = o
    return _finish(_EdgeNet(32, blocks, cin, 1280, num_classes, nn.ReLU))


def mobilenet_edgetpu_1_0(num_classes: int = 1000) -> nn.Module:
    """MobileNet-EdgeTPU (TF-slim ``mobilenet_v3.V3_EDGETPU``, depth multiplier 1.0): fused expanded convolutions
    at 16-48 channels, inverted residuals with depthwise convolutions at 96-192, ReLU, no squeeze-excitation,
    a 1x1 conv to 1280, logits as a 1x1 convolution."""
    fused = ((1, 16, 1), (8, 32, 2), (4, 32, 1), (4, 32, 1), (4, 32, 1), (8, 48, 2), (4, 48, 1), (4, 48, 1),
             (4, 48, 1))  # expansion, channels, stride (3x3 kernels)
    mb = ((3, 8, 96, 2, True), (3, 4, 96, 1, True), (3, 4, 96, 1, True), (3, 4, 96, 1, True),
          (3, 8, 96, 1, False), (3, 4, 96, 1, True), (3, 4, 96, 1, True), (3, 4, 96, 1, True),
          (5, 8, 160, 2, True), (5, 4, 160, 1, True), (5, 4, 160, 1, True), (5, 4, 160, 1, True),
          (3, 8, 192, 1, True))  # kernel, expansion, channels, stride, residual
    blocks: list[nn.Module] = []
    cin = 32
    for e, c, s in fused:
        hidden = cin * e
        blocks.append(FusedMBConv(cin, c, 3, s, hidden if hidden > cin else None))
        cin = c
    for k, e, c, s, res in mb:
        blk = InvertedResidual(cin, c, s, e, k, act=nn.ReLU)
        blk.use_res = blk.use_res and res
        blocks.append(blk)
        cin = c
    return _finish(_EdgeNet(32, blocks, cin, 1280, num_classes, nn.ReLU, conv_logits=True))


# ----------------------------------------------------------------------------------------------- registry

ZOO: dict[str, Callable[..., nn.Module]] = {
    "resnet18": resnet18,
    "resnet34": resnet34,
    "resnet50": resnet50,
    "mobilenet_v2": mobilenet_v2,
    "mobilenet_v3_small": mobilenet_v3_small,
    "vgg11": vgg11,
    "vgg16": vgg16,
    "vgg19": vgg19,
    "squeezenet1_1": squeezenet1_1,
    "densenet121": densenet121,
    "efficientnet_b0": efficientnet_b0,
    "mnasnet0_5": mnasnet0_5,
    "shufflenet_v2_x0_5": shufflenet_v2_x0_5,
    "googlenet": googlenet,
    "alexnet": alexnet,
    "regnetx_400mf": regnetx_400mf,
    "tiny_cnn": tiny_cnn,
    "tiny_resnet": tiny_resnet,
    # the Vitis AI 3.0 model zoo's TensorFlow networks (TF-slim / TPU definitions)
    "resnet_v1_50": resnet_v1_50,
    "resnet_v1_101": resnet_v1_101,
    "resnet_v2_50": resnet_v2_50,
    "inception_v1": inception_v1,
    "inception_v3": inception_v3,
    "mobilenet_v1_1.0": mobilenet_v1_1_0,
    "mobilenet_v1_0.5": mobilenet_v1_0_5,
    "mobilenet_v2_1.4": mobilenet_v2_1_4,
    "efficientnet_lite0": efficientnet_lite0,
    "efficientnet_edgetpu_s": efficientnet_edgetpu_s,
    "mobilenet_edgetpu_1.0": mobilenet_edgetpu_1_0,
}

INPUT_SHAPES: dict[str, tuple[int, ...]] = {name: (1, 3, 224, 224) for name in ZOO}
# the architectures of the 2020s (vision transformers, Swin, ConvNeXt, hybrids, ...): their own module
ZOO.update(MODERN)
INPUT_SHAPES.update(MODERN_INPUT_SHAPES)
INPUT_SHAPES.update({"tiny_cnn": (1, 3, 32, 32), "tiny_resnet": (1, 3, 32, 32), "inception_v3": (1, 3, 299, 299),
                     "resnet_v2_50": (1, 3, 299, 299), "mobilenet_v1_0.5": (1, 3, 160, 160)})


def names() -> list[str]:
    """The zoo's model names, sorted."""
    return sorted(ZOO)


def get(name: str, **kwargs) -> nn.Module:
    """Build the named model (eval mode, random weights); unknown names raise ModelLoadError."""
    try:
        ctor = ZOO[name]
    except (KeyError, TypeError):
        raise ModelLoadError(f"unknown zoo model {name!r}; known: {', '.join(names())}") from None
    return ctor(**kwargs)
