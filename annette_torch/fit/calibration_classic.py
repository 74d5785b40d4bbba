"""Convolutional end-to-end calibration networks of the families NAS cells and MobileNetV2-space networks lack:
squeeze-excitation with hard-swish or SiLU, grouped convolutions, channel shuffle, dense concatenation, large
fully connected heads and bottleneck residuals.

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
    }


#: names (without `PREFIX`) of the classic-family calibration architectures, in the order they are taken
CLASSIC_CALIBRATION: tuple[str, ...] = (
    "mobilenetv3-large-224", "regnetx-200mf-224", "vgg-fc-224", "shufflenet-x1-224", "densenet-4-8-12-8-160",
    "efficientnet-small-192", "regnetx-800mf-192", "resnet26-bottleneck-160")
