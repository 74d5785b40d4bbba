"""Parameter values the suites share: the paper's ranges (spatial 1..224, channels 3..2048, kernels 1/3/5/7,
strides 1/2, pools 2..10), the widths of common networks, and the activation kinds."""

from __future__ import annotations

__all__ = ["SPATIAL", "ODD_SPATIAL", "CHANNELS", "KERNELS", "STEM_SPATIAL", "STRIDES", "POOL_KERNELS", "FEATURES",
           "FC_INPUTS", "GROUP_CHANNELS", "GROUPS", "ACTIVATIONS", "ACT_KINDS", "PW_ACTIVATIONS"]

# 1 (squeeze-excite blocks) to 224; the sizes of common networks (7, 14, 28, 56, 112) included
SPATIAL = [1, 2, 4, 7, 8, 12, 14, 16, 24, 28, 32, 48, 56, 64, 96, 112, 128, 192, 224]
#: odd map sizes of networks fed 227, 299, 300 or 416 px (AlexNet / SqueezeNet 55, 27, 13; Inception 73, 35, 17;
#: SSD 38, 19): a CPU kernel's width blocks end part-filled there, where SPATIAL's sizes mostly fill them
ODD_SPATIAL = [13, 17, 19, 27, 35, 38, 55, 73]
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
#: grouped convolutions (gconv, gconv_same, gconv_bn_relu suites): ResNeXt / RegNet widths and group counts
#: (group widths 4..64 channels), not just powers of 2
GROUP_CHANNELS = [16, 24, 32, 48, 64, 96, 128, 160, 192, 240, 256, 384, 400, 512, 640, 768, 1024, 2048]
GROUPS = [2, 4, 5, 8, 10, 16, 20, 25, 32, 40, 64]
ACTIVATIONS = ["relu", "relu6", "leaky", "sigmoid", "silu", "hardswish", "tanh", "gelu"]
#: the ``act`` suite measures these too: activations that follow no convolution in the fused suites, but whose
#: runtime kernels differ (ONNX Runtime's Softplus is scalar code, ~40x the time of its Tanh per element:
#: YOLOv4's Mish)
ACT_KINDS = ACTIVATIONS + ["softplus", "hardsigmoid"]
#: activations behind the pointwise (1x1) convolutions of mobile networks (the ``pw_act`` suite)
PW_ACTIVATIONS = ["relu", "relu6", "hardswish", "silu"]
#: activations of the ``fc_act`` suite: a classifier's (AlexNet, VGG: ReLU; MobileNetV3: HardSwish)
FC_ACTIVATIONS = ["relu", "relu6", "hardswish", "sigmoid", "gelu"]
