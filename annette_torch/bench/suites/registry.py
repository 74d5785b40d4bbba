"""The registry of benchmark suites: every suite's name, description, parameter space, builder and costs, in
listing order, and the look-ups by name."""

from __future__ import annotations

from .base import Suite, SuiteError
from .blocks import (SE_CHANNELS, SE_GATES, SE_PROJECT, SE_REDUCE, SE_SPATIAL, SHUFFLE_CHANNELS, build_head,
                     build_se, build_shuffle, cost_head, cost_se, cost_shuffle, valid_head, valid_shuffle)
from .context import (COLD_FLUSH_MB, COLD_LAYERS, COLD_MAX_ACT_BYTES, build_cold_weights, cost_cold_weights,
                      valid_cold_weights)
from .elementwise import (CONST_OPS, build_act, build_add, build_bn, build_eltwise_const, cost_add, cost_bn,
                          cost_elementwise)
from .fused import (CONV_MUL_KINDS, PREACT_GROWTH, STRIDE_MIDS, build_concat_branches, build_conv_act, build_conv_bn_relu,
                    build_conv_mul, build_conv_pool, build_dw_act, build_dwsep, build_gconv_bn_relu, build_residual,
                    build_stem, build_stride_prop, cost_concat_branches, cost_conv_act, cost_conv_bn_relu,
                    cost_conv_mul, cost_conv_pool, cost_dw_act, cost_dwsep, cost_gconv_bn_relu, cost_residual,
                    cost_stem, cost_stride_prop, valid_conv_pool, valid_residual, build_preact, cost_preact,
                    build_pad_conv, cost_pad_conv)
from .paper import PAPER_CHANNELS, PAPER_SPATIAL, paper_table
from .pool import build_avgpool, build_maxpool, cost_pool, valid_pool
from .tokens import (DIL_SPATIAL, DILATIONS, EMBED, HEAD_DIMS, HEAD_KINDS, HEADS, HIDDEN, INTERP_MODES,
                     MATMUL_KINDS, PICK_WINDOWS, TOKENS, build_dilconv, build_gelu, build_heads, build_interp,
                     build_layernorm, build_linear, build_matmul, build_pick, build_softmax, cost_dilconv, cost_gelu,
                     cost_heads, cost_interp, cost_layernorm, cost_linear, cost_matmul, cost_pick, cost_softmax)
from .transformer import (CONVNEXT_CHANNELS, CONVNEXT_SPATIAL, MLP_RATIOS, WINDOWS, build_attention, build_convnext,
                          build_linear_bn, build_mlp, build_window_attention, cost_attention, cost_convnext,
                          cost_linear_bn, cost_mlp, cost_window_attention)
from .tensor import (REDUCE_AXES, build_concat, build_reduce, build_resize, build_slice, cost_concat, cost_reduce,
                     cost_resize, cost_slice, valid_reduce)
from .values import (ACT_KINDS, ACTIVATIONS, CHANNELS, FC_ACTIVATIONS, FC_INPUTS, FEATURES, GROUP_CHANNELS, GROUPS,
                     KERNELS, ODD_SPATIAL, POOL_KERNELS, PW_ACTIVATIONS, SPATIAL, STEM_SPATIAL, STRIDES)
from .weighted import (DECONV, build_conv, build_convtranspose, build_dwconv, build_fc, build_fc_act,
                       build_gconv, build_gconv_same, cost_conv, cost_convtranspose, cost_dwconv, cost_fc,
                       cost_fc_act, cost_gconv, cost_gconv_same, valid_gconv, valid_gconv_same)

__all__ = ["SUITES", "get_suite", "list_suites"]


def _suites() -> dict[str, Suite]:
    hw = {"h": SPATIAL, "w": SPATIAL}
    sq = {"hw": SPATIAL}
    ch = CHANNELS
    ch_g = GROUP_CHANNELS
    s = [
        Suite("conv", "2-D convolution (h, w, c, f, kernel, stride)", {**hw, "c": ch, "f": ch, "k": KERNELS,
              "s": STRIDES}, build_conv, cost=cost_conv, optional={"d": 1, "n": 1, "lead": "none"}),
        Suite("conv_odd", "2-D convolution at the odd map sizes of networks fed 227-416 px, where a CPU kernel's "
              "width blocks end part-filled (h, w of " + "/".join(map(str, ODD_SPATIAL)) + ", c, f, kernel, stride)",
              {"h": ODD_SPATIAL, "w": ODD_SPATIAL, "c": ch, "f": ch, "k": KERNELS, "s": STRIDES}, build_conv,
              cost=cost_conv, optional={"lead": "none"}),
        Suite("dwconv", "depthwise convolution (h, w, c, kernel, stride)", {**hw, "c": ch, "k": KERNELS,
              "s": STRIDES}, build_dwconv, cost=cost_dwconv, optional={"lead": "none"}),
        Suite("gconv", "grouped convolution (h, w, c, f, groups, kernel, stride)",
              {**hw, "c": ch_g, "f": ch_g, "g": GROUPS, "k": KERNELS, "s": STRIDES}, build_gconv,
              cost=cost_gconv, valid=valid_gconv, optional={"lead": "none"}),
        Suite("gconv_same", "grouped convolution keeping the channel count, as in ResNeXt / RegNet "
              "(h, w, c = f, groups, kernel, stride)",
              {**hw, "c": ch_g, "g": GROUPS, "k": KERNELS, "s": STRIDES},
              build_gconv_same, cost=cost_gconv_same, valid=valid_gconv_same, optional={"lead": "none"}),
        Suite("convtranspose", "transposed convolution, the upsampling of decoders (h, w, c, f, kernel x stride "
              "2x2 / 4x2 / 3x1, output s times the input)", {**hw, "c": ch, "f": ch, "ks": DECONV},
              build_convtranspose, cost=cost_convtranspose, optional={"lead": "none"}),
        Suite("maxpool", "max pooling (h, w, c, kernel 2..10, stride)", {**hw, "c": ch, "k": POOL_KERNELS,
              "s": STRIDES}, build_maxpool, cost=cost_pool, valid=valid_pool, optional={"lead": "none"}),
        Suite("avgpool", "average pooling (h, w, c, kernel 2..10, stride)", {**hw, "c": ch, "k": POOL_KERNELS,
              "s": STRIDES}, build_avgpool, cost=cost_pool, valid=valid_pool, optional={"lead": "none"}),
        Suite("fc", "fully connected (batch rows n, in features c, out features f)",
              {"n": [1, 4, 16], "c": FC_INPUTS, "f": FEATURES}, build_fc, cost=cost_fc, max_weight_bytes=512 * 2**20),
        Suite("fc_act", "classifier fully connected layer + activation (batch rows n, in features c, out features f, "
              "kind " + "/".join(FC_ACTIVATIONS) + "): whether a runtime fuses it, and how fast the fused kernel runs",
              {"n": [1, 2, 4], "c": FEATURES, "f": FEATURES, "act": FC_ACTIVATIONS}, build_fc_act, kind="multi",
              cost=cost_fc_act),
        Suite("add", "element-wise add of two inputs (h, w, c)", {**hw, "c": ch}, build_add, cost=cost_add),
        Suite("eltwise_const", "element-wise op of a tensor and a per-channel constant (h, w, c, op: "
              + "/".join(CONST_OPS) + ")", {**hw, "c": ch, "op": list(CONST_OPS)}, build_eltwise_const,
              cost=cost_elementwise),
        Suite("concat", "channel concat of 2-4 inputs (h, w, c per input)", {**hw, "c": ch, "inputs": [2, 3, 4]},
              build_concat, cost=cost_concat, optional={"lead": "none"}),
        Suite("slice", "leading channels of a tensor (h, w, c, drop % of the channels, at least one)",
              {**hw, "c": [c for c in ch if c >= 2], "drop": [0, 25, 50, 75]}, build_slice, cost=cost_slice,
              optional={"lead": "none"}),
        Suite("reduce", "mean over one axis of a feature map, kept as 1 (h, w, c, axis " + "/".join(REDUCE_AXES) + ")",
              {**hw, "c": ch, "axis": REDUCE_AXES}, build_reduce, cost=cost_reduce, valid=valid_reduce),
        Suite("act", "activation (h, w, c, kind: " + "/".join(ACT_KINDS) + ")",
              {**hw, "c": ch, "act": ACT_KINDS}, build_act, cost=cost_elementwise),
        Suite("bn", "batch normalization (h, w, c)", {**hw, "c": ch}, build_bn, cost=cost_bn),
        Suite("resize", "nearest upsampling x2/x4 (h, w, c, scale)", {**hw, "c": ch, "scale": [2, 4]},
              build_resize, cost=cost_resize),
        Suite("linear", "fully connected layer over the rows of a token tensor (1, l, e) -> (1, l, f), as "
              "nn.Linear in a transformer", {"l": TOKENS, "e": EMBED, "f": HIDDEN}, build_linear, cost=cost_linear),
        Suite("matmul", "batched product of two activations in attention shapes: scores q k^T (1, heads, l, d) x "
              "(1, heads, s, d) or context p v (1, heads, l, s) x (1, heads, s, d) (heads, query tokens l, key "
              "tokens s, head dim d, kind)", {"h": HEADS, "l": TOKENS, "s": TOKENS, "d": HEAD_DIMS,
                                             "kind": MATMUL_KINDS}, build_matmul, cost=cost_matmul,
              optional={"windows": 1}),
        Suite("softmax", "softmax over the last axis of attention scores (1, heads, l, s)",
              {"h": HEADS, "l": TOKENS, "s": TOKENS}, build_softmax, cost=cost_softmax, optional={"windows": 1}),
        Suite("layernorm", "LayerNorm over the channels of a token tensor (1, l, e)", {"l": TOKENS, "e": EMBED},
              build_layernorm, cost=cost_layernorm),
        Suite("gelu", "GELU of a token tensor (1, l, e)", {"l": TOKENS, "e": HIDDEN}, build_gelu, cost=cost_gelu),
        Suite("heads", "attention head split (1, l, h*d) -> (1, h, l, d) or merge (reshape + transpose) "
              "(l, heads, head dim d, kind)", {"l": TOKENS, "h": HEADS, "d": HEAD_DIMS, "kind": HEAD_KINDS},
              build_heads, cost=cost_heads),
        Suite("pick", "q, k and v of a fused projection: (w, l, 3*h*d) viewed (w, l, 3, h, d), permuted to "
              "(3, w, h, l, d), picked qkv[i] (tokens l, heads h, head dim d, windows w)",
              {"l": TOKENS, "h": HEADS, "d": HEAD_DIMS, "w": PICK_WINDOWS}, build_pick, cost=cost_pick),
        Suite("interp", "nearest / bilinear upsampling x2/x4 (hw, c, scale, mode)",
              {"hw": SPATIAL, "c": ch, "scale": [2, 4], "mode": INTERP_MODES}, build_interp, cost=cost_interp,
              optional={"lead": "none"}, max_act_bytes=256 * 2**20),
        Suite("dilconv", "dilated 3x3 convolution, same padding (hw, c, f, dilation 2-18)",
              {"hw": DIL_SPATIAL, "c": ch, "f": ch, "d": DILATIONS}, build_dilconv, cost=cost_dilconv),
        Suite("conv_bn_relu", "conv-bn-relu chains of 1-3 blocks (hw, c, f, kernel, stride of the first)",
              {**sq, "c": ch, "f": ch, "k": KERNELS, "s": STRIDES, "depth": [1, 2, 3]}, build_conv_bn_relu,
              kind="multi", cost=cost_conv_bn_relu),
        Suite("conv_pool", "conv followed by max/avg pool (hw, c, f, kernel, pool kind, pool size 2-4, stride)",
              {**sq, "c": ch, "f": ch, "k": KERNELS, "pool": ["max", "avg"], "pk": [2, 3, 4], "ps": STRIDES},
              build_conv_pool, kind="multi", cost=cost_conv_pool, valid=valid_conv_pool),
        Suite("preact", "pre-activation (DenseNet) layer: input and a 3x3 growth conv concatenated, bn, relu, "
              "conv (hw, c, growth g, f, kernel)", {**sq, "c": ch, "g": PREACT_GROWTH, "f": ch, "k": [1, 3]},
              build_preact, kind="multi", cost=cost_preact),
        Suite("residual", "conv-bn-relu-conv-bn + add (identity or 1x1 projection shortcut) + relu; option post=relu: "
              "each path ends in a relu before the add (NAS-Bench-101 cells)",
              {**sq, "c": ch, "f": ch, "k": [1, 3], "s": STRIDES, "shortcut": ["identity", "projection"]},
              build_residual, kind="multi", cost=cost_residual, valid=valid_residual, optional={"post": "none"}),
        Suite("concat_branches", "2-4 parallel convs (kernels 1/3/5/7) concatenated (hw, c, f per branch)",
              {**sq, "c": ch, "f": ch, "branches": [2, 3, 4]}, build_concat_branches, kind="multi",
              cost=cost_concat_branches),
        Suite("pad_conv", "1x1 conv, explicit Pad (TensorFlow 'same' padding), unpadded conv or depthwise conv "
              "(hw, c, f, kernel, stride, dw)", {**sq, "c": ch, "f": ch, "k": [3, 5, 7], "s": STRIDES, "dw": [0, 1]},
              build_pad_conv, kind="multi", cost=cost_pad_conv),
        Suite("dwsep", "depthwise-separable block dw-bn-relu6-pw1x1-bn-relu6 (hw, c, f, dw kernel, stride)",
              {**sq, "c": ch, "f": ch, "k": [3, 5], "s": STRIDES}, build_dwsep, kind="multi", cost=cost_dwsep),
        Suite("conv_act", "conv (stride 1) + activation (hw, c, f, kernel, kind)",
              {**sq, "c": ch, "f": ch, "k": KERNELS, "act": ACTIVATIONS}, build_conv_act, kind="multi",
              cost=cost_conv_act, optional={"tail": "none"}),
        Suite("pw_act", "pointwise (1x1) conv + activation, as in MobileNetV2/V3 and EfficientNet blocks: whether "
              "a runtime fuses the activation can depend on the shape (hw, c, f, kind "
              + "/".join(PW_ACTIVATIONS) + ")", {**sq, "c": ch, "f": ch, "k": [1], "act": PW_ACTIVATIONS},
              build_conv_act, kind="multi", cost=cost_conv_act, optional={"tail": "none"}),
        Suite("conv_mul", "conv (stride 1) times its sigmoid (SiLU written out), times a parallel 1x1 conv, or "
              "hard-swish written out (y * relu6(y + 3) / 6): a same-shape Mul inside a network (hw, c, f, kernel, "
              "kind " + "/".join(CONV_MUL_KINDS) + ")",
              {**sq, "c": ch, "f": ch, "k": KERNELS, "kind": CONV_MUL_KINDS}, build_conv_mul, kind="multi",
              cost=cost_conv_mul),
        Suite("stride_prop", "3x3 conv -> middle layer (none, activation, bn, add, mul) -> 1x1 conv with stride 2, "
              "next to the same path with stride 1: does the toolchain compute only the pixels the strided conv "
              "reads (hw, c, f, mid)", {"hw": [14, 28, 56], "c": [16, 32, 64, 128], "f": [16, 32, 64, 128],
                                        "mid": STRIDE_MIDS}, build_stride_prop, kind="multi", cost=cost_stride_prop),
        Suite("dw_act", "depthwise conv (stride 1) + activation (hw, c, kernel, kind)",
              {**sq, "c": ch, "k": KERNELS, "act": ACTIVATIONS}, build_dw_act, kind="multi", cost=cost_dw_act,
              optional={"tail": "none"}),
        Suite("stem", "a network's first conv on an image: 1-4 input channels (hw, c, f, kernel, stride) + bn "
              "+ activation", {"hw": STEM_SPATIAL, "c": [1, 3, 4], "f": [8, 16, 24, 32, 48, 64, 96],
                               "k": [3, 5, 7], "s": STRIDES, "act": ["relu", "relu6", "silu", "hardswish"]},
              build_stem, kind="multi", cost=cost_stem, optional={"tail": "none"}),
        Suite("shuffle", "ShuffleNet V2 units after a 1x1 conv: split, conv-dw-conv branch, concat, channel shuffle "
              "(hw, c, groups g, stride of the first unit, units)",
              {"hw": [7, 14, 28, 56, 112], "c": SHUFFLE_CHANNELS, "g": [2, 4], "s": [1, 2], "depth": [1, 2, 3]},
              build_shuffle, kind="multi", cost=cost_shuffle, valid=valid_shuffle),
        Suite("se", "squeeze-excite block: dw3x3-act, pool, 1x1 squeeze-act, 1x1 excite-gate, channel product, 1x1 "
              "project (hw, c, squeeze reduction r, project width f, act relu/silu, gate sigmoid/hardsigmoid)",
              {"hw": SE_SPATIAL, "c": SE_CHANNELS, "r": SE_REDUCE, "f": SE_PROJECT, "act": ["relu", "silu"],
               "gate": list(SE_GATES)}, build_se, kind="multi", cost=cost_se),
        Suite("gconv_bn_relu", "grouped conv (c = f, as in RegNet / ResNeXt) + bn + relu (hw, c, groups, kernel, "
              "stride)", {**sq, "c": ch_g, "g": GROUPS, "k": [1, 3, 5], "s": STRIDES}, build_gconv_bn_relu,
              kind="multi", cost=cost_gconv_bn_relu, valid=valid_gconv_same),
        Suite("head", "classifier head: 1x1 conv + relu, optional 2x2 max pool, flatten, FC (hw, c, f, pool)",
              {"hw": [1, 2, 4, 5, 6, 7, 8, 10, 12, 14], "c": [32, 64, 96, 128, 160, 256, 384, 512],
               "f": [10, 16, 32, 64, 128, 256], "pool": ["none", "max"]}, build_head, kind="multi", cost=cost_head,
              valid=valid_head),
        Suite("attention", "multi-head self-attention over (1, l, h*d) tokens: q/k/v projections, head split, "
              "scores, softmax, context, head merge, output projection (l, heads, head dim d; option style "
              "sdpa / manual: key transpose and scale as layers / qkv: one fused projection, permuted and picked)",
              {"l": TOKENS, "h": HEADS, "d": HEAD_DIMS}, build_attention, kind="multi", cost=cost_attention,
              optional={"style": "sdpa"}),
        Suite("mlp", "transformer MLP block Linear - GELU - Linear over (1, l, e) tokens, hidden r*e (l, e, r)",
              {"l": TOKENS, "e": EMBED, "r": MLP_RATIOS}, build_mlp, kind="multi", cost=cost_mlp),
        Suite("convnext", "ConvNeXt block: 7x7 depthwise, permute, LayerNorm, Linear 4c - GELU - Linear, permute, "
              "residual add (hw, c)", {"hw": CONVNEXT_SPATIAL, "c": CONVNEXT_CHANNELS}, build_convnext,
              kind="multi", cost=cost_convnext),
        Suite("window_attention", "Swin window attention on a channels-last (1, nw*w, nw*w, h*d) map: window "
              "partition (reshape, transpose), attention per window, window reverse (windows per side nw, window "
              "w, heads, head dim d; option style as attention's)",
              {"nw": [1, 2, 4, 8, 16], "w": WINDOWS, "h": HEADS, "d": [16, 32, 64]},
              build_window_attention, kind="multi", cost=cost_window_attention, optional={"style": "sdpa"}),
        Suite("linear_bn", "LeViT's Linear + BatchNorm over (1, l, e) tokens: Linear to f, flatten the tokens to "
              "rows, BatchNorm, view back (l, e, f)", {"l": [16, 49, 64, 196, 256, 784], "e": EMBED, "f": HIDDEN},
              build_linear_bn, kind="multi", cost=cost_linear_bn),
        Suite("cold_weights", "FC / 1x1 / 3x3 conv (c, f, spatial s; s sets only the pooled input's rounding for "
              "fc) after a pool reading ~flush MB of input: weights pushed out of the caches as inside a network",
              {"layer": list(COLD_LAYERS), "c": [128, 256, 512, 1024, 2048, 4096, 8192, 16384],
               "f": [128, 256, 512, 1000, 2048, 4096], "s": [1, 2, 4, 7], "flush": COLD_FLUSH_MB},
              build_cold_weights, kind="multi", default_sampler="random", cost=cost_cold_weights,
              valid=valid_cold_weights, max_weight_bytes=256 * 2**20, max_act_bytes=COLD_MAX_ACT_BYTES,
              optional={"act": "none"}),
        Suite("paper_conv", "the paper's conv configurations (paper35k.csv of the ANNETTE reference data)",
              {"h": PAPER_SPATIAL, "w": PAPER_SPATIAL, "c": PAPER_CHANNELS, "f": PAPER_CHANNELS, "k": KERNELS,
               "s": [1]}, build_conv, default_sampler="table", cost=cost_conv, optional={"d": 1, "n": 1},
              table=paper_table),
    ]
    return {x.name: x for x in s}


#: every suite by name, in listing order
SUITES: dict[str, Suite] = _suites()


def get_suite(name: str) -> Suite:
    """The suite called ``name`` (`SuiteError` listing the names if unknown)."""
    try:
        return SUITES[name]
    except KeyError:
        raise SuiteError(f"unknown suite {name!r}; choose from {', '.join(SUITES)}") from None


def list_suites() -> dict[str, str]:
    """Suite name -> description with its number of feasible configs."""
    out = {}
    for name, s in SUITES.items():
        try:
            what = "rows" if s.default_sampler == "table" else "configs"
            out[name] = f"{s.description} [{s.kind}; {s.count():,} {what}]"
        except SuiteError as e:
            out[name] = f"{s.description} [{s.kind}; unavailable: {e}]"
    return out
