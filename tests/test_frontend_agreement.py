"""The same network through torch.fx, through an ONNX export, and through its ANNETTE JSON graph gives the
same layer types, shapes and operations (and so the same estimate)."""

from __future__ import annotations

import io
from collections import Counter

import numpy as np
import onnx
import pytest
import torch

import annette_torch as at
from annette_torch import zoo


def _export(model, shape) -> onnx.ModelProto:
    buf = io.BytesIO()
    # no constant folding: keeps BatchNorm as its own node, as in the module (folding is the toolchain's job)
    torch.onnx.export(model, torch.zeros(shape), buf, dynamo=False, opset_version=17, do_constant_folding=False)
    return onnx.load_from_string(buf.getvalue())


def _signature(net):
    """Multiset of (type, input shape, output shape, ops, weights) over all layers."""
    return Counter((net.type_labels()[i], net.in_shape(i), net.out_shape(i), float(net.ops[i]), float(net.weights[i]))
                   for i in range(len(net)))


@pytest.mark.parametrize("name", ["tiny_resnet", "resnet18", "squeezenet1_1", "mobilenet_v2"])
def test_fx_and_onnx_agree(name):
    model, shape = zoo.get(name), zoo.INPUT_SHAPES[name]
    fx = at.trace(model, shape)
    ox = at.from_onnx(_export(model, shape))
    assert _signature(fx) == _signature(ox)
    assert len(fx.edges) == len(ox.edges)
    for p in ("zcu102-dnndk", "ncs2"):
        assert at.estimate(fx, p).device_ms == pytest.approx(at.estimate(ox, p).device_ms, rel=1e-12)


@pytest.mark.parametrize("name, graph", [("resnet18", "resnet18"), ("resnet50", "pt_resnet50"),
                                         ("squeezenet1_1", "squeezenet1_1")])
def test_fx_and_annette_json_agree(ref_dir, name, graph):
    fx = at.trace(zoo.get(name), zoo.INPUT_SHAPES[name])
    js = at.from_annette_json(ref_dir / "graphs" / f"{graph}.json")
    # the JSON graphs do not record padding or the stride of pools the same way; compare what estimation uses
    sig = lambda n: Counter((n.type_labels()[i], n.out_shape(i), float(n.ops[i]), float(n.weights[i]),
                             float(n.in_elems[i])) for i in range(len(n)))
    assert sig(fx) == sig(js)
    for p in ("zcu102-dnndk", "ncs2"):
        np.testing.assert_allclose(at.estimate(fx, p).device_ms, at.estimate(js, p).device_ms, rtol=1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["tiny_resnet", "resnet18", "squeezenet1_1", "mobilenet_v2", "shufflenet_v2_x0_5"])
def test_onnx_fallback_probe_equals_full_size_export(monkeypatch, name):
    """The fallback for untraceable modules exports a large input at small probe sizes: for real architectures
    the network scaled back by shape inference is the one the full-size export gives, layer by layer."""
    import annette_torch.frontends.fx.onnx_fallback as fx_mod

    model, shape = zoo.get(name).eval(), (1, 3, 517, 389)
    exported: list[tuple[int, ...]] = []
    real = torch.onnx.export

    def spy(module, args, *a, **k):
        exported.append(tuple(args[0].shape))
        return real(module, args, *a, **k)

    monkeypatch.setattr(torch.onnx, "export", spy)
    probed = fx_mod._onnx_fallback(model, [shape], name, "forced for the test")
    assert exported and all(max(s[2:]) <= 256 for s in exported)
    monkeypatch.setattr(fx_mod, "_PROBE_ABOVE", 10**9)
    full = fx_mod._onnx_fallback(model, [shape], name, "forced for the test")
    assert probed.names == full.names and probed.edges.tolist() == full.edges.tolist()
    assert probed.types.tolist() == full.types.tolist() and probed.attrs == full.attrs
    for c in full.cols:
        assert probed.cols[c].tolist() == full.cols[c].tolist(), c
    assert probed.out_shape(0) == shape
    assert at.estimate(probed, "zcu102-dnndk").device_ms == at.estimate(full, "zcu102-dnndk").device_ms
