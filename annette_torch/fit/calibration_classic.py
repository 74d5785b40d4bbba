"""Convolutional end-to-end calibration networks of the families NAS cells and MobileNetV2-space networks lack:
squeeze-excitation with hard-swish or SiLU, grouped convolutions, channel shuffle, dense concatenation, large
fully connected heads, bottleneck residuals and an encoder-decoder for dense prediction (leaky ReLU, Mish,
transposed convolutions, resize).

Fitted on cells, MobileNetV2-space and transformer networks alone, the network-level terms (and `annette adapt`'s
check of them by family) never saw a network whose time sits in a 100 MB classifier, in SE gates or in grouped
convolutions (ort-cpu on an Intel Xeon, in-run calibration: zoo CNNs 9.3% without them, 6.9% with them). These
are built from the zoo's blocks (`annette_torch.zoo`) with other widths, depths and input sizes than any
validation network, so none is a validation network (a test compares their weighted layers); they are measured
through ``torch.onnx.export`` of the module, as the transformer-era ones (`calibration_modern`).
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["CLASSIC_CALIBRATION", "PREFIX", "spec"]

PREFIX = "calib-classic-"

#: MobileNetV3-Large (Howard et al. 2019, Table 1): kernel, expansion size, out channels, SE, activation, stride
_V3_LARGE = ((3, 16, 16, False, "RE", 1), (3, 64, 24, False, "RE", 2), (3, 72, 24, False, "RE", 1),
             (5, 72, 40, True, "RE", 2), (5, 120, 40, True, "RE", 1), (5, 120, 40, True, "RE", 1),
             (3, 240, 80, False, "HS", 2), (3, 200, 80, False, "HS", 1), (3, 184, 80, False, "HS", 1),
             (3, 184, 80, False, "HS", 1), (3, 480, 112, True, "HS", 1), (3, 672, 112, True, "HS", 1),
             (5, 672, 160, True, "HS", 2), (5, 960, 160, True, "HS", 1), (5, 960, 160, True, "HS", 1))


def _mobilenet_v3_large() -> Any:
    import torch.nn as nn

    from .. import zoo as Z

    class MobileNetV3Large(Z.MobileNetV3Small):
        SETTINGS = tuple((k, e, c, se, nn.ReLU if a == "RE" else nn.Hardswish, s) for k, e, c, se, a, s in _V3_LARGE)

    return MobileNetV3Large(last_channel=1280)


def _efficientnet_small() -> Any:
    from .. import zoo as Z

    class EfficientNetSmall(Z.EfficientNetB0):  # B0's stages with fewer repeats
        STAGES = ((1, 3, 1, 16, 1), (6, 3, 2, 24, 1), (6, 5, 2, 40, 2), (6, 3, 2, 80, 2), (6, 5, 1, 112, 2),
                  (6, 5, 2, 192, 2), (6, 3, 1, 320, 1))

    return EfficientNetSmall()


def _unet_resnext() -> Any:
    """A U-Net (Ronneberger et al. 2015) for 21-class segmentation: a ResNeXt encoder (Xie et al. 2017: grouped
    3x3 convolutions) with leaky ReLU as Darknet, a decoder upsampling by 2x2 transposed convolutions with Mish
    (``x * tanh(softplus(x))``, as YOLOv4 writes it), and bilinear resize of the logits to the input."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    def cba(cin: int, cout: int, k: int = 3, s: int = 1, groups: int = 1) -> nn.Sequential:
        return nn.Sequential(nn.Conv2d(cin, cout, k, s, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout),
                             nn.LeakyReLU(0.1))

    class XBlock(nn.Module):  # ResNeXt bottleneck, stride 2, projection shortcut
        def __init__(self, cin: int, cout: int) -> None:
            super().__init__()
            self.body = nn.Sequential(cba(cin, cout // 2, 1), cba(cout // 2, cout // 2, 3, 2, groups=8),
                                      nn.Conv2d(cout // 2, cout, 1, bias=False), nn.BatchNorm2d(cout))
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, 2, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.leaky_relu(self.body(x) + self.short(x), 0.1)

    class Up(nn.Module):  # transposed convolution, skip concatenation, 3x3 convolution with Mish
        def __init__(self, cin: int, cskip: int, cout: int) -> None:
            super().__init__()
            self.up = nn.ConvTranspose2d(cin, cout, 2, 2)
            self.conv = nn.Conv2d(cout + cskip, cout, 3, 1, 1, bias=False)
            self.bn = nn.BatchNorm2d(cout)

        def forward(self, x: torch.Tensor, skip: torch.Tensor) -> torch.Tensor:
            y = self.bn(self.conv(torch.cat([self.up(x), skip], 1)))
            return y * torch.tanh(F.softplus(y))

    class UNetResNeXt(nn.Module):
        def __init__(self, widths: tuple[int, ...] = (32, 64, 128, 256), classes: int = 21) -> None:
            super().__init__()
            self.stem = cba(3, widths[0], 3, 2)
            self.down = nn.ModuleList(XBlock(a, b) for a, b in zip(widths, widths[1:]))
            self.up = nn.ModuleList(Up(b, a, a) for a, b in zip(widths[::-1][1:], widths[::-1]))
            self.head = nn.Conv2d(widths[0], classes, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            size = x.shape[-2:]
            skips = [self.stem(x)]
            for d in self.down:
                skips.append(d(skips[-1]))
            y = skips.pop()
            for u in self.up:
                y = u(y, skips.pop())
            return F.interpolate(self.head(y), size=size, mode="bilinear", align_corners=False)

    return UNetResNeXt()


def spec() -> dict[str, tuple[Callable[[], Any], tuple[int, ...]]]:
    """name -> (module factory, input shape); ordered so that any first few span the families."""
    from .. import zoo as Z

    def f(build: Callable[[], Any]) -> Callable[[], Any]:
        return lambda: Z._finish(build())

    return {
        "mobilenetv3-large-224": (f(_mobilenet_v3_large), (1, 3, 224, 224)),
        "regnetx-200mf-224": (f(lambda: Z.RegNetX(13, 24.0, 36.44, 2.49, 8)), (1, 3, 224, 224)),
        "vgg-fc-224": (f(lambda: Z.VGG((32, "M", 64, "M", 128, 128, "M", 256, 256, "M", 256, 256, "M"))),
                       (1, 3, 224, 224)),
        "shufflenet-x1-224": (f(lambda: Z.ShuffleNetV2((4, 8, 4), (24, 116, 232, 464, 1024))), (1, 3, 224, 224)),
        "densenet-4-8-12-8-160": (f(lambda: Z.DenseNet(32, (4, 8, 12, 8), 64, 4)), (1, 3, 160, 160)),
        "efficientnet-small-192": (f(_efficientnet_small), (1, 3, 192, 192)),
        "regnetx-800mf-192": (f(lambda: Z.RegNetX(16, 56.0, 35.73, 2.28, 16)), (1, 3, 192, 192)),
        "resnet26-bottleneck-160": (f(lambda: Z.ResNet(Z.Bottleneck, (2, 2, 2, 2))), (1, 3, 160, 160)),
        "unet-resnext-160": (f(_unet_resnext), (1, 3, 160, 160)),
    }


#: names (without `PREFIX`) of the classic-family calibration architectures, in the order they are taken
CLASSIC_CALIBRATION: tuple[str, ...] = (
    "mobilenetv3-large-224", "regnetx-200mf-224", "vgg-fc-224", "shufflenet-x1-224", "densenet-4-8-12-8-160",
    "efficientnet-small-192", "regnetx-800mf-192", "resnet26-bottleneck-160", "unet-resnext-160")
