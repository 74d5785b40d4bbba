"""The ZCU102 platform of Vitis AI 3.x (``zcu102-vai3``), fitted from whole-network latencies measured on the board.

Data: the Accel-NASBench candidates' VART latency (``device_ms``: one thread, inputs already pre-processed;
`load_nas_candidates`) and the Vitis AI 3.0 model zoo's end-to-end latency of 13 classification networks
(``latency_ms``: one thread, with pre- and post-processing; `load_zoo_published`). Only whole networks were
measured, so the layer models keep their roofline form and their parameters are fitted so that the sum over a
network's executed layers reproduces its latency (`fit_device`):

* per layer type a (refined) roofline -- convolutions and depthwise convolutions with the DPU's unrolling
  (`UNROLL`: 8 pixels x 16 input x 16 output channels per cycle for B4096; fully connected layers run on the
  convolution engine as 1x1 convolutions, UG1414 v3.0), global pooling, element-wise add and multiply, other
  pooling -- whose peak rates and unrolling efficiencies are the fitted parameters (`PARAMS`);
* a launch cost per executed layer and one per inference (the platform's ``overhead``).

The layer models are fitted on the NAS candidates and the zoo networks together (a zoo network's residual is
taken against its published latency less the end-to-end terms, `e2e_terms`), so that big 3x3 convolutions,
max pools, concatenations and weight-heavy fully connected layers -- which no NAS candidate has -- are priced
by the same data. The end-to-end terms (pre-processing per input pixel, a constant per inference, the
host's work after the last convolution) map the device time to the zoo's ``latency_ms``.

Cross-validation refits everything without the held-out networks: k folds over the NAS candidates
(`cross_validate_nas`), leave-one-out over the zoo networks (`leave_one_out_zoo`).
"""

from __future__ import annotations

import csv
import logging
import os
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import AnnetteError
from ..ir import LayerType, Network
from ..mapping import MappingModel
from ..mapping.model import FusionRule
from ..models import RefinedRoofline, Roofline
from ..models.calibration import Calibration
from ..prediction import Run, network_terms, run, totals
from ..platform import Platform

__all__ = ["SUPPORT", "RULES", "PARAMS", "UNROLL", "E2E_TERMS", "load_nas_candidates", "load_zoo_published",
           "ZOO_NETWORKS", "Dataset", "build_platform", "fit_device", "fit_all", "cross_validate_nas",
           "leave_one_out_zoo", "FitResult", "metrics", "macs_proxy"]

log = logging.getLogger(__name__)
T = LayerType

#: clock of the ZCU102 board image's DPUCZDX8G (Vitis AI 3.0 model zoo: 3 x B4096 @ 281 MHz)
CLOCK_HZ = 281e6
#: B4096: pixel parallelism 8, input and output channel parallelism 16 (PG338: peak ops per cycle 4096)
PEAK_OPS = 4096 * CLOCK_HZ

# ------------------------------------------------------------------------------------------------ support
_CP = 16  # channel_parallel of DPUCZDX8G_ISA1_B4096 (UG1414 v3.0, Table "Currently Supported Operators")
_CH = 256 * _CP
#: activations DPUCZDX8G_ISA1 applies in a convolution's epilogue (UG1414 v3.0); Sigmoid and SiLU are listed
#: because Vitis AI's quantizers replace them by hard-sigmoid / hard-swish by default (UG1414 v3.0,
#: vai_q_tensorflow2 supported layers: "If 'activation' is 'sigmoid' or 'swish', will be converted to
#: hard-sigmoid or hard-swish and then be quantized by default")
_ACT = ["Relu", "Relu6", "LeakyRelu", "HardSwish", "HardSigmoid", "Sigmoid", "SiLU", "Clip"]
_CONV = {"kernel": [1, 16], "stride": [1, 8], "c_in": [1, _CH], "c_out": [1, _CH], "dilation_x_c_in": [1, _CH],
         "activations": _ACT}
_A53 = ("one Arm Cortex-A53 core of the ZCU102's XCZU9EG (UG1182) at 1.2 GHz, as in the single-thread "
        "measurements")


def a53_host(core: str, transcendental: Sequence[str]) -> dict[str, Any]:
    """The ZCU102's Arm host as a platform's `support.host`: one A53 core (``core`` says which, at what clock) running
    FP32 layers at 2 operations per cycle and 2 GB/s, the ``transcendental`` types at 25 cycles per element."""
    return {
        "device": f"Arm Cortex-A53 (ZCU102 processing system), {core}",
        "layers": {
            "Base": {"model": "roofline", "op_s": 2.4e9, "bandwidth": 2.0e9, "bit_act": 32, "bit_weights": 32,
                     "origin": f"assumed: {core}; FP32, 2 operations per cycle (half the NEON FMA peak), 2 GB/s "
                               "streamed by one core"},
            **{t: {"model": "roofline", "op_s": 4.8e7, "bandwidth": 2.0e9, "bit_act": 32, "bit_weights": 32,
                   "origin": f"assumed: {core}; 25 cycles per element (a scalar expf and a division)"}
               for t in transcendental},
        },
    }


SUPPORT: dict[str, Any] = {
    "origin": (
        "Xilinx UG1414 v3.0 (Vitis AI User Guide, 2023-02-24), table 'Currently Supported Operators', column "
        "DPUCZDX8G_ISA1_B4096 (ZCU102, ZCU104; channel_parallel 16, bank_depth 2048, bank_num 8): conv2d kernel "
        "w, h [1, 16], strides w, h [1, 8], dilation * input_channel <= 256 * channel_parallel, input and output "
        "channels <= 256 * channel_parallel = 4096, activations ReLU, LeakyReLU, ReLU6, Hard-Swish, "
        "Hard-Sigmoid; depthwise-conv2d kernel w, h [1, 256]. Operators beyond a limit are assigned to the CPU. "
        "UG1414 v3.0 (vai_q_tensorflow2 supported layers): sigmoid and swish activations are converted to "
        "hard-sigmoid and hard-swish by default, so they run on the DPU as those. Xilinx PG338 v3.4 and v4.0 "
        "(DPUCZDX8G product guide, the IP of the Vitis AI 2.x / 3.0 board images): Elementwise-Sum and "
        "Elementwise-Multiply, max and average pooling, reorg, fully connected, softmax (optional core), concat "
        "and batch normalization (by the tool chain). Readings of prose, not table entries: the depthwise "
        "stride range [1, 8] (the conv2d strides; the v3.0 table's depthwise stride cell is read as the same), "
        "depthwise activations (the conv2d list, as the ISA1 engine shares the epilogue), the pooling kernel "
        "range [1, 256] (the depthwise kernel range; ISA1's pooling runs on the same engine), a global average "
        "pool of any size (the zoo's networks pool 7x7 to 10x10 on the DPU), element-wise multiply of a feature "
        "map by a per-channel vector (squeeze-excitation; PG338 lists Elementwise-Multiply without a shape "
        "rule), Softmax of a vector of class scores on the DPU's optional softmax core (the ZCU102 board "
        "image's B4096 has it enabled in the Vitis AI 3.0 DPU TRD; without it Softmax runs on the host; a softmax "
        "over a feature map, attention's scores, runs on the host), Resize (nearest / bilinear upsampling, "
        "UG1414 v3.0 lists it for vai_q_pytorch and vai_q_tensorflow as DPU-supported 'upsample'). Not on the "
        "DPU: GELU, Tanh, Softplus, LRN, LayerNorm, transposes, grouped convolutions other than depthwise "
        "(UG1414 v3.0: 'Group* (Caffe): group == 1'), the product of two feature maps (MatMul: attention's "
        "scores and context; PG338 lists fully connected layers, whose second operand is constant weights)."),
    "accelerator": {
        "Conv": _CONV,
        "ConvPool": _CONV,
        "DepthwiseConv": {"kernel": [1, 256], "stride": [1, 8], "c_in": [1, _CH], "c_out": [1, _CH],
                          "dilation_x_c_in": [1, _CH], "activations": _ACT},
        "ConvTranspose": {"kernel": [1, 16], "stride": [1, 16], "c_in": [1, _CH], "c_out": [1, _CH],
                          "activations": _ACT},
        "FullyConnected": {"c_in": [1, 2048 * _CP]},
        "MaxPool": {"kernel": [1, 256], "stride": [1, 8]},
        "AvgPool": {"kernel": [1, 256], "stride": [1, 8]},
        "GlobalPool": {},
        "ReduceMean": {"h_out": [1, 1], "w_out": [1, 1]},
        "Add": {"c_out": [1, _CH], "activations": ["Relu"]},
        "Mul": {"c_out": [1, _CH]},
        "Concat": {},
        "BatchNorm": {},
        "Relu": {}, "Relu6": {}, "LeakyRelu": {}, "Clip": {},
        "HardSwish": {}, "HardSigmoid": {}, "Sigmoid": {}, "SiLU": {},
        "Softmax": {"h_out": [1, 1], "w_out": [1, 1]},
        "Pad": {},
        "Resize": {},
    },
    "host": a53_host(_A53, ("Tanh", "GELU", "Softplus")),
    "switch": {"ms": 0.1, "bandwidth": 2.5e8, "bit_act": 8,
               "origin": "assumed: the DPU subgraph split in two, one more VART runner call (0.1 ms), and the "
                         "crossing INT8 tensor converted to or from FP32 by one A53 core (4 ns per element)"},
}

# ------------------------------------------------------------------------------------------------ mapping
_VIEWS = ("Reshape", "Flatten", "Dropout")
_PRODUCERS = tuple(t.label for t in LayerType if t.label not in _VIEWS + ("Input", "Unknown"))
_EPILOGUE = ["BatchNorm", "Relu", "Relu6", "LeakyRelu", "Clip", "HardSwish", "HardSigmoid", "Sigmoid", "SiLU"]
#: the Vitis AI compiler's fusions (UG1414 v3.0: batch normalization folded into the convolution, activations
#: applied in the convolution engine's epilogue, views of a buffer and concatenation written in place)
RULES: list[FusionRule] = [
    FusionRule("ConvEpilogue", ("Conv", "GroupConv", "DepthwiseConv", "ConvTranspose", "FullyConnected"),
               tuple(_EPILOGUE),
               origin="UG1414 v3.0: BN folded into the preceding convolution by the quantizer; ReLU, ReLU6, "
                      "LeakyReLU, Hard-Swish, Hard-Sigmoid applied by the convolution engine"),
    FusionRule("AddRelu", ("Add",), ("Relu",), origin="UG1414 v3.0: eltwise with ReLU"),
    FusionRule("ViewFold", _PRODUCERS, _VIEWS,
               origin="reshape / flatten / dropout: no DPU instruction (a view of the same buffer; dropout removed "
                      "by the quantizer)"),
    FusionRule("ConcatInPlace", _PRODUCERS, ("Concat",), multi_input=True,
               origin="the compiler writes concatenated branches into one buffer (no instruction of its own)"),
]

# ------------------------------------------------------------------------------------------------ layer models
#: unrolling of the refined rooflines: (dimension, parallel units); DPUCZDX8G B4096 computes 8 output pixels
#: (along the width) x 16 input channels x 16 output channels per cycle (PG338: pixel_parallel 8,
#: input_channel_parallel 16, output_channel_parallel 16); a depthwise convolution has one input channel per
#: group, its channels run 16 wide as output channels
UNROLL: dict[str, tuple[tuple[str, int], ...]] = {"Conv": (("w", 8), ("c", 16), ("f", 16)),
                                                   "DepthwiseConv": (("w", 8), ("f", 16))}
#: fitted parameters: (name, initial value, kind); ``rate``: positive (fitted in log space), ``alpha``: in [0, 1],
#: ``ms``: non-negative time
PARAMS: tuple[tuple[str, float, str], ...] = (
    ("conv.op_s", 0.8e12, "rate"), ("conv.bandwidth", 8e9, "rate"),
    ("conv.alpha.w", 0.5, "alpha"), ("conv.alpha.c", 0.5, "alpha"), ("conv.alpha.f", 0.5, "alpha"),
    ("dw.op_s", 0.1e12, "rate"), ("dw.bandwidth", 4e9, "rate"),
    ("dw.alpha.w", 0.5, "alpha"), ("dw.alpha.f", 0.5, "alpha"),
    ("gpool.op_s", 5e10, "rate"), ("gpool.bandwidth", 4e9, "rate"),
    ("pool.op_s", 5e10, "rate"), ("pool.bandwidth", 4e9, "rate"),
    ("add.bandwidth", 4e9, "rate"), ("mul.bandwidth", 4e9, "rate"),
    ("per_layer_ms", 0.02, "ms"), ("per_network_ms", 0.3, "ms"),
    ("host.gpool.bandwidth", 1e9, "rate"), ("switch.ms", 0.02, "ms"), ("switch.bandwidth", 2e9, "rate"),
)
_NAMES = [p[0] for p in PARAMS]
#: end-to-end terms of the zoo's ``latency_ms`` (`annette_torch.models.calibration.TERMS`): the device time
#: (``layers``), a constant per inference (image decode, resize, normalisation, softmax and top-k on the A53) and
#: the host's work on the elements after the last convolution / fully connected layer
E2E_TERMS = ("layers", "constant", "cpu_tail")
#: op_s of layers whose time is their memory traffic (element-wise): never the binding roof
_UNBOUND = 1e18


def _theta0() -> np.ndarray:
    return np.array([_to_free(v, k) for _, v, k in PARAMS])


def _to_free(v: float, kind: str) -> float:
    if kind == "rate":
        return float(np.log(v))
    if kind == "alpha":
        v = min(max(v, 1e-6), 1 - 1e-6)
        return float(np.log(v / (1 - v)))
    return float(np.log(max(v, 1e-9)))


def _from_free(theta: np.ndarray) -> dict[str, float]:
    out = {}
    for (name, _, kind), x in zip(PARAMS, theta):
        out[name] = float(1 / (1 + np.exp(-x))) if kind == "alpha" else float(np.exp(x))
    return out


def _refined(p: dict[str, float], key: str, prefix: str, origin: str) -> RefinedRoofline:
    unroll = {d: {"s": float(s), "alpha": p[f"{prefix}.alpha.{d}"], "replicate": False} for d, s in UNROLL[key]}
    m = RefinedRoofline(p[f"{prefix}.op_s"], p[f"{prefix}.bandwidth"], 8, 8, unroll)
    m.origin = origin  # type: ignore[attr-defined]
    return m


def _roof(op_s: float, bw: float, origin: str) -> Roofline:
    m = Roofline(op_s, bw, 8, 8)
    m.origin = origin  # type: ignore[attr-defined]
    return m


def layer_models(p: dict[str, float], origin: str = "fitted") -> dict[str, Any]:
    """The platform's layer models from fitted parameter values ``p`` (`PARAMS` names)."""
    o = origin
    return {
        "Conv": _refined(p, "Conv", "conv", f"{o}: refined roofline of the convolution engine (w 8, c 16, f 16)"),
        "DepthwiseConv": _refined(p, "DepthwiseConv", "dw", f"{o}: refined roofline of depthwise convolutions "
                                                            "(w 8, channels 16)"),
        "FullyConnected": _refined(p, "Conv", "conv", f"{o}: the convolution engine's model (the compiler runs a "
                                                      "fully connected layer as a 1x1 convolution)"),
        "GlobalPool": _roof(p["gpool.op_s"], p["gpool.bandwidth"], f"{o}: roofline of global average pooling"),
        "Pool": _roof(p["pool.op_s"], p["pool.bandwidth"], f"{o}: roofline of max / average pooling"),
        "Add": _roof(_UNBOUND, p["add.bandwidth"], f"{o}: element-wise sum, memory-bound"),
        "Mul": _roof(_UNBOUND, p["mul.bandwidth"], f"{o}: element-wise multiply (squeeze-excitation scale), "
                                                   "memory-bound"),
        "Input": _roof(_UNBOUND, 1e18, "assumed: inputs are already in the DPU's memory (VART runner with "
                                      "pre-processed inputs); the zoo's pre-processing is an end-to-end term"),
        "Base": _roof(_UNBOUND, p["add.bandwidth"], f"{o}: other element-wise layers (Resize, Softmax, ...) at "
                                                    "the element-wise sum's bandwidth"),
    }


def mapping_model() -> MappingModel:
    """The Vitis AI compiler's fusions (`RULES`) after the swish / hard-swish folds."""
    return MappingModel(RULES, folds=("swish", "hardswish"))


def support(pool_kernel: int | None = None, p: dict[str, float] | None = None) -> dict[str, Any]:
    """`SUPPORT`, with global pools above ``pool_kernel`` on the host (None: all on the DPU) at the fitted host
    and switch parameters of ``p``."""
    sup = {**SUPPORT, "accelerator": dict(SUPPORT["accelerator"]), "host": dict(SUPPORT["host"])}
    if pool_kernel is not None and p is not None:
        sup["accelerator"]["GlobalPool"] = {"kernel": [1, pool_kernel]}
        sup["host"]["layers"] = {**SUPPORT["host"]["layers"], "GlobalPool": {
            "model": "roofline", "op_s": 1e18, "bandwidth": p["host.gpool.bandwidth"], "bit_act": 8,
            "bit_weights": 8, "origin": "fitted: INT8 feature map summed by the A53"}}
        sup["switch"] = {"ms": p["switch.ms"], "bandwidth": p["switch.bandwidth"], "bit_act": 8,
                         "origin": "fitted: the feature map read by the A53 (bandwidth) and a fixed cost per crossing "
                                   "(ms)"}
    return sup


def build_platform(p: dict[str, float], meta: dict[str, Any] | None = None, origin: str = "fitted",
                   name: str = "zcu102-vai3", pool_kernel: int | None = None) -> Platform:
    """A platform from fitted parameter values ``p``: layer models, mapping, per-layer and per-inference
    launch costs (``overhead``), plus ``meta`` (description, end_to_end ...); the operator support of
    `support` (``pool_kernel``: the largest global pool the DPU runs)."""
    m = dict(meta or {})
    m["overhead"] = {"scale": 1.0, "per_layer_ms": p["per_layer_ms"], "per_network_ms": p["per_network_ms"]}
    m["support"] = support(pool_kernel, p)
    return Platform(name, layer_models(p, origin), mapping_model(), str(m.pop("description", "")), m)


# ------------------------------------------------------------------------------------------------ data
def load_nas_candidates(path: str | os.PathLike) -> tuple[list[str], list[Network], np.ndarray]:
    """(source file, network, measured ``latency_zcu102`` in ms) of every row of an Accel-NASBench CSV."""
    from ..search.spaces import anb

    if not os.path.isfile(path):
        raise AnnetteError(f"{path}: Accel-NASBench candidates not found")
    names, nets, y = [], [], []
    with open(path, encoding="utf-8") as f:
        for row in csv.DictReader(f):
            try:
                arch = anb.from_row(row)
                ms = float(row["latency_zcu102"])
            except (KeyError, ValueError) as e:
                raise AnnetteError(f"{path}: row {row.get('source_file', '?')}: {e}") from None
            names.append(row.get("source_file", f"row{len(names)}"))
            nets.append(anb.build_network(arch))
            y.append(ms)
    return names, nets, np.array(y)


#: the Vitis AI 3.0 model zoo's networks of ``zcu102_vitis_ai_3.0_published.csv`` -> (zoo builder name, input side)
ZOO_NETWORKS: dict[str, tuple[str, int]] = {
    "tf_resnetv1_50_imagenet_224_224_6.97G": ("resnet_v1_50", 224),
    "tf_resnetv1_101_imagenet_224_224_14.4G": ("resnet_v1_101", 224),
    "tf_inceptionv1_imagenet_224_224_3G": ("inception_v1", 224),
    "tf_inceptionv3_imagenet_299_299_11.45G": ("inception_v3", 299),
    "tf_mobilenetv1_1.0_imagenet_224_224_1.14G": ("mobilenet_v1_1.0", 224),
    "tf_mobilenetv1_0.5_imagenet_160_160_150M": ("mobilenet_v1_0.5", 160),
    "tf_mobilenetv2_1.4_imagenet_224_224_1.16G": ("mobilenet_v2_1.4", 224),
    "tf2_Efficientnet-lite_imagenet_224_224_0.77G": ("efficientnet_lite0", 224),
    "tf_efficientnet-edgetpu-S_imagenet_224_224_4.72G": ("efficientnet_edgetpu_s", 224),
    "tf_vgg16_imagenet_224_224_30.96G": ("vgg16", 224),
    "pt_squeezenet_imagenet_224_224_703.5M": ("squeezenet1_1", 224),
    "tf_resnetv2_50_imagenet_299_299_13.1G": ("resnet_v2_50", 299),
    "tf_mobilenetEdge1.0_imagenet_224_224_990M": ("mobilenet_edgetpu_1.0", 224),
}


def load_zoo_published(path: str | os.PathLike) -> tuple[list[str], list[Network], np.ndarray]:
    """(zoo model, network, published one-thread latency in ms) of the Vitis AI 3.0 model-zoo table."""
    from .. import zoo
    from ..estimator import to_network

    if not os.path.isfile(path):
        raise AnnetteError(f"{path}: published Vitis AI 3.0 latencies not found")
    names, nets, y = [], [], []
    with open(path, encoding="utf-8") as f:
        for row in csv.DictReader(f):
            model = row["zoo_model"]
            if model not in ZOO_NETWORKS:
                raise AnnetteError(f"{path}: no architecture for zoo model {model!r} (known: "
                                   f"{', '.join(ZOO_NETWORKS)})")
            key, side = ZOO_NETWORKS[model]
            net = to_network(zoo.get(key), (1, 3, side, side))
            net.name = model
            names.append(model)
            nets.append(net)
            y.append(float(row["latency_ms_1thread"]))
    return names, nets, np.array(y)


# ------------------------------------------------------------------------------------------------ fitting
@dataclass
class Dataset:
    """Networks with their measured latency, stacked and mapped once for all parameter values.

    ``zoo``: per network, whether its figure is the zoo's end-to-end latency (else the VART device time).
    """

    names: list[str]
    nets: list[Network]
    y: np.ndarray
    zoo: np.ndarray

    def __post_init__(self) -> None:
        self.big, self.seg = Network.concat(self.nets, keep_names=False)
        self.mapped = mapping_model().apply(self.big, light=True)
        self.mseg = self.seg[self.mapped.kept]

    @classmethod
    def of(cls, nas: tuple[list[str], list[Network], np.ndarray] | None,
           zoo: tuple[list[str], list[Network], np.ndarray] | None) -> "Dataset":
        parts = [(p, flag) for p, flag in ((nas, False), (zoo, True)) if p is not None]
        return cls([n for p, _ in parts for n in p[0]], [x for p, _ in parts for x in p[1]],
                   np.concatenate([p[2] for p, _ in parts]),
                   np.concatenate([np.full(len(p[2]), flag) for p, flag in parts]))

    def run(self, plat: Platform) -> Run:
        """The prediction passes on all networks at once, after the mapping done once."""
        return run(plat, self.big, self.seg, len(self.nets), mapped=self.mapped, light=True)

    def device_ms(self, plat: Platform) -> np.ndarray:
        """Every network's predicted device time (the layer sum) on ``plat``."""
        return totals(self.run(plat), "device")

    def terms(self, plat: Platform) -> dict[str, np.ndarray]:
        """Every network's end-to-end terms (`annette_torch.prediction.network_terms`)."""
        return network_terms(self.run(plat))


def _e2e_matrix(ds: Dataset, plat: Platform) -> np.ndarray:
    terms = ds.terms(plat)
    return np.stack([terms[k] for k in E2E_TERMS], axis=1)


def _residuals(theta: np.ndarray, ds: Dataset, rows: np.ndarray, pool_kernel: int | None) -> np.ndarray:
    """Relative errors of the rows' networks: device time against the NAS figures; for zoo rows the device time
    mapped end to end by the non-negative least-squares combination of `E2E_TERMS` on the zoo rows in ``rows``;
    each set weighs as much in total as the other."""
    from scipy.optimize import nnls

    plat = build_platform(_from_free(theta), pool_kernel=pool_kernel)
    dev = ds.device_ms(plat)
    out = []
    nas = rows[~ds.zoo[rows]]
    if nas.size:
        out.append((dev[nas] / ds.y[nas] - 1) / np.sqrt(nas.size))
    zoo = rows[ds.zoo[rows]]
    if zoo.size:
        A = _e2e_matrix(ds, plat)[zoo] / ds.y[zoo, None]
        coef, _ = nnls(A, np.ones(zoo.size))
        out.append((A @ coef - 1) / np.sqrt(zoo.size))
    return np.concatenate(out)


def _bounds() -> tuple[np.ndarray, np.ndarray]:
    lo, hi = [], []
    for _, v, kind in PARAMS:
        if kind == "rate":
            lo.append(np.log(v) - 6), hi.append(np.log(v) + 6)
        elif kind == "alpha":
            lo.append(-8), hi.append(8)
        else:
            lo.append(np.log(1e-6)), hi.append(np.log(5.0))
    return np.array(lo), np.array(hi)


def fit_device(ds: Dataset, rows: np.ndarray | None = None, theta0: np.ndarray | None = None,
               max_nfev: int = 400, pool_kernel: int | None = None) -> dict[str, float]:
    """Layer-model and launch-cost parameters (`PARAMS` -> value) fitted on the networks ``rows`` of ``ds``
    (default all): bounded least squares on relative error (`_residuals`)."""
    from scipy.optimize import least_squares

    rows = np.arange(len(ds.nets)) if rows is None else np.asarray(rows)
    x0 = _theta0() if theta0 is None else theta0
    lo, hi = _bounds()
    x0 = np.clip(x0, lo + 1e-9, hi - 1e-9)
    res = least_squares(_residuals, x0, bounds=(lo, hi), args=(ds, rows, pool_kernel), max_nfev=max_nfev, x_scale=1.0,
                        diff_step=1e-4, ftol=1e-10, xtol=1e-10, gtol=1e-10)
    log.info("zcu102-vai3 fit on %d networks: cost %.5f after %d evaluations", rows.size, res.cost, res.nfev)
    p = _from_free(res.x)
    p["_theta"] = res.x  # type: ignore[assignment]
    return p


def fit_end_to_end(ds: Dataset, plat: Platform, rows: np.ndarray | None = None) -> Calibration:
    """The end-to-end terms (`E2E_TERMS`) fitted on the zoo networks ``rows`` of ``ds`` (default all of them)."""
    from .calibrate_network import fit_calibration

    zoo = np.flatnonzero(ds.zoo) if rows is None else np.asarray(rows)
    terms = ds.terms(plat)
    t = [{k: float(terms[k][i]) for k in E2E_TERMS} for i in zoo]
    return fit_calibration(t, ds.y[zoo], E2E_TERMS, [ds.names[i] for i in zoo])


#: the largest global average pool the DPU runs in the fitted platform: squeeze-excitation pools over 112x112
#: maps cost about twice per element what 7x7 to 56x56 ones do on the board (2.8 vs 0.6-1.4 ns), which the model
#: prices as the A53 summing the feature map (`support`); a reading of the measurements, not of a document
POOL_KERNEL = 56
#: folds of the NAS candidates' cross-validation and the seed of their assignment
FOLDS, SEED = 5, 0


@dataclass
class FitResult:
    """Fitted parameters, the platform, and the figures of one fit (in sample) or cross-validation."""

    params: dict[str, float]
    platform: Platform
    calibration: Calibration


def fit_all(ds: Dataset, rows: np.ndarray | None = None, max_nfev: int = 400,
            pool_kernel: int | None = POOL_KERNEL) -> FitResult:
    """Layer models on the networks ``rows`` (NAS and zoo), then the end-to-end terms on their zoo networks
    (the device time unchanged when there are too few of them)."""
    rows = np.arange(len(ds.nets)) if rows is None else np.asarray(rows)
    p = fit_device(ds, rows, max_nfev=max_nfev, pool_kernel=pool_kernel)
    plat = build_platform(p, pool_kernel=pool_kernel)
    zoo = rows[ds.zoo[rows]]
    # too few zoo networks to fit the end-to-end terms: latency_ms is the device time as it is
    cal = fit_end_to_end(ds, plat, zoo) if zoo.size > len(E2E_TERMS) else Calibration({"layers": 1.0})
    return FitResult(p, plat, cal)


def predict(ds: Dataset, fit: FitResult) -> tuple[np.ndarray, np.ndarray]:
    """(device ms, end-to-end ms) of every network of ``ds`` under ``fit``."""
    dev = ds.device_ms(fit.platform)
    terms = ds.terms(fit.platform)
    return dev, fit.calibration.predict_many({k: terms[k] for k in E2E_TERMS})


def cross_validate_nas(ds: Dataset, folds: int = FOLDS, seed: int = SEED, max_nfev: int = 400,
                       progress: Callable[[str], None] | None = None) -> np.ndarray:
    """Out-of-fold device-time predictions of the NAS candidates of ``ds``: k folds, each predicted by a fit on
    the other folds and all zoo networks (NaN for the zoo rows)."""
    nas = np.flatnonzero(~ds.zoo)
    out = np.full(len(ds.nets), np.nan)
    parts = np.array_split(np.random.default_rng(seed).permutation(nas), folds)
    for i, test in enumerate(parts):
        train = np.setdiff1d(np.arange(len(ds.nets)), test)
        fit = fit_all(ds, train, max_nfev)
        out[test] = ds.device_ms(fit.platform)[test]
        if progress is not None:
            progress(f"fold {i + 1}/{folds}")
    return out


def leave_one_out_zoo(ds: Dataset, max_nfev: int = 400,
                      progress: Callable[[str], None] | None = None) -> np.ndarray:
    """End-to-end predictions of each zoo network of ``ds`` by a fit (layer models and end-to-end terms) on all
    other networks (NaN for the NAS rows)."""
    out = np.full(len(ds.nets), np.nan)
    for i in np.flatnonzero(ds.zoo):
        train = np.setdiff1d(np.arange(len(ds.nets)), [i])
        fit = fit_all(ds, train, max_nfev)
        out[i] = predict(ds, fit)[1][i]
        if progress is not None:
            progress(ds.names[i])
    return out


def metrics(pred: np.ndarray, measured: np.ndarray) -> dict[str, float]:
    """MAPE, share within +-10 % and Spearman's rho of predictions against measurements."""
    from scipy.stats import spearmanr

    err = np.asarray(pred) / np.asarray(measured) - 1
    return {"mape": float(np.mean(np.abs(err))), "within_10": float(np.mean(np.abs(err) <= 0.10)),
            "spearman": float(spearmanr(pred, measured)[0]), "n": int(len(err))}


def macs_proxy(ds: Dataset, rows: np.ndarray, train: np.ndarray) -> np.ndarray:
    """The MACs proxy: latency as a linear function of the network's MACs (least squares on relative error over
    ``train``), predicted for ``rows``."""
    macs = np.array([n.ops[np.isin(n.types, _MAC_TYPES)].sum() / 2 for n in ds.nets])
    A = np.stack([macs, np.ones_like(macs)], axis=1)
    coef = np.linalg.lstsq(A[train] / ds.y[train, None], np.ones(len(train)), rcond=None)[0]
    return A[rows] @ coef


_MAC_TYPES = (T.CONV, T.DEPTHWISE_CONV, T.GROUP_CONV, T.FULLY_CONNECTED, T.MATMUL, T.CONV_TRANSPOSE)


def _proxy_cv(ds: Dataset, rows: np.ndarray, folds: list[np.ndarray]) -> np.ndarray:
    """Out-of-fold MACs-proxy predictions of ``rows``, one fold of ``folds`` held out at a time."""
    out = np.full(len(ds.nets), np.nan)
    for test in folds:
        out[test] = macs_proxy(ds, test, np.setdiff1d(rows, test))
    return out


def cv_report(nas_csv: str | os.PathLike, zoo_csv: str | os.PathLike, max_nfev: int = 400,
              progress: Callable[[str], None] | None = None, reference: str | Platform | None = "zcu102-dnndk"
              ) -> dict[str, Any]:
    """Cross-validated accuracy of the fitted platform on both data sets, beside the MACs proxy (a linear fit
    on MACs, validated the same way) and the ``reference`` platform (default: the DNNDK model, ``zcu102-dnndk``) on the same
    networks: NAS candidates k-fold on ``device_ms``, zoo networks leave-one-out on ``latency_ms``.

    Returns {"nas": {model: metrics}, "zoo": {model: metrics}, "zoo_rows": [...], "dataset": Dataset}.
    """
    from ..estimator import estimate_many

    ds = Dataset.of(load_nas_candidates(nas_csv), load_zoo_published(zoo_csv))
    nas, zoo = np.flatnonzero(~ds.zoo), np.flatnonzero(ds.zoo)
    oof = cross_validate_nas(ds, max_nfev=max_nfev, progress=progress)
    loo = leave_one_out_zoo(ds, max_nfev=max_nfev, progress=progress)
    nas_folds = np.array_split(np.random.default_rng(SEED).permutation(nas), FOLDS)
    px_nas = _proxy_cv(ds, nas, nas_folds)
    px_zoo = _proxy_cv(ds, zoo, [np.array([i]) for i in zoo])
    rep: dict[str, Any] = {
        "nas": {"zcu102-vai3": metrics(oof[nas], ds.y[nas]), "macs_proxy": metrics(px_nas[nas], ds.y[nas])},
        "zoo": {"zcu102-vai3": metrics(loo[zoo], ds.y[zoo]), "macs_proxy": metrics(px_zoo[zoo], ds.y[zoo])},
    }
    rows = [{"network": ds.names[i], "measured_ms": float(ds.y[i]), "loo_pred_ms": float(loo[i]),
             "macs_proxy_ms": float(px_zoo[i])} for i in zoo]
    if reference is not None:
        ref_name = reference if isinstance(reference, str) else reference.name
        dev = estimate_many([ds.nets[i] for i in nas], reference, latency="device")
        lat = estimate_many([ds.nets[i] for i in zoo], reference, latency="latency")
        rep["nas"][ref_name] = metrics(dev, ds.y[nas])
        rep["zoo"][ref_name] = metrics(lat, ds.y[zoo])
        for r, v in zip(rows, lat):
            r[f"{ref_name}_ms"] = float(v)
    rep["zoo_rows"] = rows
    rep["dataset"] = ds
    rep["nas_oof"] = oof[nas]
    return rep
