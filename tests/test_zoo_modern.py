"""The modern zoo (architectures of the 2020s): parameter counts pinned, shapes at full size on the meta device,
real forward passes at reduced inputs agree with their torch.fx trace and their ONNX export, both front ends
read them without Unknown layers and agree on their work, and the building blocks with tricky indexing
(shifted windows, block/grid partitions, stochastic depth) do what the papers describe.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
import torch.fx

from annette_torch import zoo, zoo_modern
from annette_torch.zoo_modern import MODERN, MODERN_INPUT_SHAPES

# exact counts of the reference configurations (1000 classes; deeplabv3 21, segformer 150); the paper figures
# they round to are in the module docstring
PARAMS = {
    "vit_ti16": 5_717_416,
    "vit_s16": 22_050_664,
    "vit_b16": 86_567_656,
    "swin_t": 28_288_354,
    "convnext_t": 28_589_128,
    "maxvit_t": 30_919_624,
    "mobilevit_s": 5_578_632,
    "efficientformer_l1": 12_289_928,
    "levit_128s": 7_777_058,
    "efficientnet_v2_s": 21_458_488,
    "deeplabv3_resnet50": 39_638_869,
    "poolformer_s12": 11_915_176,
    "segformer_b0": 3_752_694,
}
# paper figures in millions as printed; a count must round to it (or lie within 1% of it). DeiT-Ti's paper
# prints 5M, its authors' released model 5.72M; EfficientNetV2-S's paper prints 22M (24M in one table), the
# reference implementation 21.5M; DeepLabV3 prints none (reference implementation: 39.6M).
PAPER_M = {"vit_ti16": "5.72", "vit_s16": "22", "vit_b16": "86", "swin_t": "28", "convnext_t": "28.6",
           "maxvit_t": "31", "mobilevit_s": "5.6", "efficientformer_l1": "12.3", "levit_128s": "7.8",
           "efficientnet_v2_s": "21.5", "deeplabv3_resnet50": "39.6", "poolformer_s12": "12", "segformer_b0": "3.8"}

# constructor arguments and input shapes for cheap real forward passes (token grids / partitions shrunk)
SMALL_KWARGS = {"vit_ti16": {"img_size": 64}, "vit_s16": {"img_size": 64}, "vit_b16": {"img_size": 64},
                "maxvit_t": {"partition": 2}, "efficientformer_l1": {"img_size": 64}, "levit_128s": {"img_size": 64}}
SMALL_SHAPE = {name: (1, 3, 64, 64) for name in MODERN}
SMALL_SHAPE["deeplabv3_resnet50"] = (1, 3, 65, 65)  # odd size: the final resize must restore it exactly
# real forward well under 2 s
FAST = ["mobilevit_s", "efficientformer_l1", "levit_128s", "poolformer_s12", "segformer_b0"]


def _n_params(m: torch.nn.Module) -> int:
    return sum(p.numel() for p in m.parameters())


def _out_shape(name: str, shape: tuple[int, ...]) -> tuple[int, ...]:
    if name == "deeplabv3_resnet50":
        return (shape[0], 21, *shape[2:])
    if name == "segformer_b0":
        return (shape[0], 150, *shape[2:])
    return (shape[0], 1000)


def _small(name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    return MODERN[name](**SMALL_KWARGS.get(name, {}))


def test_registry_is_consistent_and_registered_in_the_zoo():
    assert len(MODERN) >= 12
    assert set(MODERN) == set(MODERN_INPUT_SHAPES) == set(PARAMS)
    assert set(MODERN) <= set(zoo.ZOO) and all(zoo.INPUT_SHAPES[n] == MODERN_INPUT_SHAPES[n] for n in MODERN)
    assert all(len(s) == 4 and s[:2] == (1, 3) for s in MODERN_INPUT_SHAPES.values())


@pytest.mark.parametrize("name", sorted(MODERN))
def test_parameter_count_is_pinned_and_matches_the_paper(name):
    with torch.device("meta"):
        m = MODERN[name]()
    n = _n_params(m)
    assert n == PARAMS[name], f"{name}: {n:,} parameters"
    printed = PAPER_M[name]
    decimals = len(printed.partition(".")[2])
    tol = max(0.01 * float(printed), 0.5 * 10.0 ** -decimals)
    assert abs(n / 1e6 - float(printed)) <= tol, f"{name}: {n / 1e6:.2f}M vs the paper's {printed}M"
    assert not m.training and not any(mod.training for mod in m.modules())


@pytest.mark.parametrize("name", sorted(MODERN))
def test_full_size_shapes_and_fx_trace_on_meta(name):
    """At the published input size (no arithmetic: meta device) the model and its fx trace give the output."""
    with torch.device("meta"):
        m = MODERN[name]()
    gm = torch.fx.symbolic_trace(m)
    x = torch.empty(MODERN_INPUT_SHAPES[name], device="meta")
    with torch.no_grad():
        assert m(x).shape == gm(x).shape == _out_shape(name, MODERN_INPUT_SHAPES[name])


def test_attention_forms_appear_as_the_front_end_meets_them():
    """The three ViTs carry nn.MultiheadAttention, hand-written matmul attention and SDPA respectively; MaxViT
    uses einsum; Swin calls the wrapped shifted_window_attention and stochastic_depth as single fx nodes."""
    def targets(name: str) -> set:
        with torch.device("meta"):
            gm = torch.fx.symbolic_trace(MODERN[name]())
        return {n.target for n in gm.graph.nodes}

    with torch.device("meta"):
        assert any(isinstance(m, torch.nn.MultiheadAttention) for m in MODERN["vit_ti16"]().modules())
    assert {"matmul", "softmax"} <= {getattr(t, "__name__", t) for t in targets("vit_s16")} | targets("vit_s16")
    assert torch.nn.functional.scaled_dot_product_attention in targets("vit_b16")
    assert torch.einsum in targets("maxvit_t")
    swin = targets("swin_t")
    assert zoo_modern.shifted_window_attention in swin and zoo_modern.stochastic_depth in swin


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n == "swin_t" else n
                                  for n in sorted(MODERN)])
def test_front_end_traces_without_unknown_layers(name):
    """The fx front end reads every network at its published size into known layer types (swin_t's wrapped
    shifted-window function goes through the ONNX leaf path: slow); the IR ends in the model's output size."""
    from annette_torch import trace
    from annette_torch.ir import LayerType

    with torch.device("meta"):
        m = MODERN[name]()
    net = trace(m, MODERN_INPUT_SHAPES[name])
    assert not (net.types == LayerType.UNKNOWN).any(), net.unknown_ops()
    sinks = sorted(set(range(len(net))) - set(net.edges[:, 0].tolist()))
    assert len(sinks) == 1 and net.out_elems[sinks[0]] == int(np.prod(_out_shape(name, MODERN_INPUT_SHAPES[name])))


@pytest.mark.parametrize("name", FAST)
def test_real_forward_at_reduced_input(name):
    m = _small(name)
    x = torch.randn(SMALL_SHAPE[name])
    with torch.no_grad():
        y = m(x)
    assert y.shape == _out_shape(name, SMALL_SHAPE[name]) and torch.isfinite(y).all()


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MODERN))
def test_real_forward_agrees_with_fx_trace(name):
    m = _small(name)
    x = torch.randn(SMALL_SHAPE[name])
    with torch.no_grad():
        y = m(x)
        y_fx = torch.fx.symbolic_trace(m)(x)
    assert y.shape == _out_shape(name, SMALL_SHAPE[name]) and torch.isfinite(y).all()
    torch.testing.assert_close(y_fx, y)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::torch.jit.TracerWarning", "ignore::UserWarning")
@pytest.mark.parametrize("name", sorted(MODERN))
def test_onnx_export_runs_in_onnxruntime_and_agrees(name):
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    m = _small(name)
    x = torch.randn(SMALL_SHAPE[name])
    buf = io.BytesIO()
    torch.onnx.export(m, x, buf, dynamo=False, opset_version=17)
    onnx.checker.check_model(onnx.load_from_string(buf.getvalue()))
    sess = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
    got = sess.run(None, {sess.get_inputs()[0].name: x.numpy()})[0]
    with torch.no_grad():
        want = m(x).numpy()
    scale = max(float(np.abs(want).max()), 1e-30)
    assert got.shape == want.shape and np.abs(got - want).max() <= 1e-4 * scale
    # both front ends read the same work from the model and its export
    from annette_torch import from_onnx, trace

    via_onnx, via_fx = from_onnx(onnx.load_from_string(buf.getvalue())), trace(m, SMALL_SHAPE[name])
    assert via_onnx.unknown_ops() == via_fx.unknown_ops() == []
    assert via_onnx.total_ops == pytest.approx(via_fx.total_ops, rel=0.01)


# ------------------------------------------------------------------------------------------ building blocks

def test_stochastic_depth_is_identity_in_eval_and_drops_whole_samples_in_training():
    torch.manual_seed(0)
    x = torch.randn(64, 3, 4, 4) + 5.0
    assert zoo_modern.stochastic_depth(x, 0.5, False) is x
    y = zoo_modern.stochastic_depth(x, 0.5, True)
    per_sample = [(torch.equal(a, torch.zeros_like(a)), torch.allclose(a, 2 * b)) for a, b in zip(y, x)]
    assert all(dropped or scaled for dropped, scaled in per_sample)
    assert 0 < sum(d for d, _ in per_sample) < 64
    dp = zoo_modern.DropPath(0.5)
    assert dp.eval()(x) is x


def _swa(x: torch.Tensor, shift: int, heads: int = 2) -> torch.Tensor:
    torch.manual_seed(0)
    attn = zoo_modern.ShiftedWindowAttention(x.shape[-1], 7, shift, heads)
    torch.nn.init.normal_(attn.relative_position_bias_table)
    with torch.no_grad():
        return attn(x)


def test_shifted_window_attention_pads_and_crops_to_the_input_size():
    x = torch.randn(1, 10, 12, 8)
    assert _swa(x, 3).shape == x.shape
    # a single window covering the whole (padded) map: the shift is dropped
    y = torch.randn(1, 7, 7, 8)
    torch.testing.assert_close(_swa(y, 3), _swa(y, 0))


def test_shifted_window_mask_keeps_rolled_in_regions_apart():
    """On a 14x14 map shifted by 3, pixel (0, 0) shares its shifted window with (1, 1) but is masked from
    (13, 13), which the roll brings into the same window from the opposite edge."""
    x = torch.randn(1, 14, 14, 8)
    base = _swa(x, 3)
    far, near = x.clone(), x.clone()
    far[0, 13, 13] += 10.0 * torch.randn(8)
    near[0, 1, 1] += 10.0 * torch.randn(8)
    torch.testing.assert_close(_swa(far, 3)[0, 0, 0], base[0, 0, 0])
    assert not torch.allclose(_swa(near, 3)[0, 0, 0], base[0, 0, 0])
    # without the shift, (0, 0) and (13, 13) lie in different windows as well
    base0, far0 = _swa(x, 0), _swa(far, 0)
    torch.testing.assert_close(far0[0, 0, 0], base0[0, 0, 0])


@pytest.mark.parametrize("grid", [False, True])
def test_maxvit_partitions_are_inverse_and_mix_the_right_tokens(grid):
    torch.manual_seed(0)
    layer = zoo_modern.PartitionAttention(8, 4, 2, grid, 0.0).eval()
    x = torch.randn(1, 8, 4, 4)
    identity = zoo_modern.PartitionAttention(8, 4, 2, grid, 0.0).eval()
    for lin in (identity.attn.merge, identity.mlp.fc2):
        torch.nn.init.zeros_(lin.weight)
        torch.nn.init.zeros_(lin.bias)
    with torch.no_grad():
        torch.testing.assert_close(identity(x), x)  # partition then departition gives the map back
        base = layer(x)
        x2 = x.clone()
        x2[0, :, 0, 0] += 5.0 * torch.randn(8)  # not constant over channels: LayerNorm would remove that
        moved = layer(x2)
    changed = ~torch.isclose(moved, base).all(dim=1)[0]  # (4, 4) map of pixels whose output changed
    # window 2x2: (0,0) mixes with its window (0..1, 0..1); grid 2x2 of stride 2: with (0,2), (2,0), (2,2)
    group = {(0, 0), (0, 1), (1, 0), (1, 1)} if not grid else {(0, 0), (0, 2), (2, 0), (2, 2)}
    assert {(i, j) for i in range(4) for j in range(4) if changed[i, j]} == group


def test_deeplab_uses_dilated_convolutions_at_output_stride_16():
    with torch.device("meta"):
        m = MODERN["deeplabv3_resnet50"]()
    dilations = sorted({c.dilation[0] for c in m.modules() if isinstance(c, torch.nn.Conv2d)})
    assert dilations == [1, 2, 6, 12, 18]
    feats = m.backbone(m.stem(torch.empty(1, 3, 512, 512, device="meta")))
    assert feats.shape == (1, 2048, 32, 32)
