"""Malformed models: every mutation of a reference ANNETTE graph or of a small ONNX model gives a valid
`Network` or an `AnnetteError` (one line in the CLI), never another exception (property-based, hypothesis)."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import annette_torch as at
from annette_torch.cli.app import main as cli_main
from annette_torch.errors import AnnetteError, ModelLoadError
from annette_torch.frontends.annette_json import from_annette_json
from annette_torch.frontends.onnx import from_onnx
from annette_torch.ir import Network

pytestmark = pytest.mark.slow

GRAPH_DIR = Path(__file__).resolve().parents[2] / "shared" / "annette-reference" / "graphs"
#: Reference graphs small enough to copy per example, with every layer kind the converter handles.
GRAPH_NAMES = ["resnet18", "squeezenet1_1", "cf_mobilenetv2", "tc-resnet_block", "bvlcalexnet-9", "cf_inceptionv1",
               "dk_yolov4_tiny", "mobilenetv2-7", "cf_landmark", "annette_bench1", "densenet121"]
GRAPHS: dict[str, dict] = {n: json.loads((GRAPH_DIR / f"{n}.json").read_text()) for n in GRAPH_NAMES
                           if (GRAPH_DIR / f"{n}.json").is_file()}
needs_graphs = pytest.mark.skipif(not GRAPHS, reason="../shared/annette-reference not present")

SETTINGS = {"deadline": None, "derandomize": True, "database": None,
                "suppress_health_check": [HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                       HealthCheck.data_too_large]}

FIELDS = ["type", "parents", "children", "input_shape", "output_shape", "kernel_shape", "strides", "pads",
          "dilations", "pooling_type"]
NASTY: list[Any] = [
    None, 0, -1, -7, 1, 3, 1.5, 2.0, math.nan, math.inf, -math.inf, 1e300, -1e300, 10**30, 2**63, 2**64 + 1, True,
    False, "x", "", "3", "Conv", [], [0], [-1], [1], [1, 0, 0, 1], [1, -3, 3, 1], [-1, 1e300, 1, 1],
    [1, math.nan, 2, 3], [1, math.inf, 2, 3], ["a"], [[1, 2]], [[[1]]], [[1, 2], [3, [4]]], {"a": 1}, [None],
    [1, 2, 3, 4, 5, 6, 7, 8, 9], [0, 0, 0, 0], [1, 2**62, 2**62, 1], [-1, 2**40, 2**40, 3], [True, 1, 1, 1],
    [1, 1.5, 1, 1], [1, 2, 2, 1], [3, 3, 3, 8], [0, 1, 1, 0, 0, 1, 1, 0], [0, -1, 1, 0, 0, 1, 1, 0], [1, 3],
    ["data"], ["no_such_layer"], ["data:0"], [5], [1.0, 2.0], "MAX", "AVG", 2**24 + 1,
]
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8)
VALUES = st.one_of(st.sampled_from(NASTY), JSON_VALUES,
                   st.lists(st.one_of(st.integers(-3, 2**45), st.floats(), st.sampled_from([-1, 0, 1])), max_size=9))


def check_outcome(fn: Callable[[], Network]) -> Network | None:
    """Run ``fn``: a valid `Network` (finite non-negative counts) or an `AnnetteError` with a message."""
    try:
        net = fn()
    except AnnetteError as e:
        assert str(e).strip()
        return None
    assert isinstance(net, Network) and len(net) > 0
    assert np.all(np.isfinite(net.ops)) and np.all(net.ops >= 0)
    assert np.all(np.isfinite(net.weights)) and np.all(net.weights >= 0)
    return net


@st.composite
def mutated_graph(draw) -> dict:
    """A reference graph with one to three mutations of its fields, layers or parents."""
    data = copy.deepcopy(GRAPHS[draw(st.sampled_from(sorted(GRAPHS)))])
    for _ in range(draw(st.integers(1, 3))):
        layers = data.get("layers")
        if not isinstance(layers, dict) or not layers:
            break
        keys = list(layers)
        key = draw(st.sampled_from(keys))
        layer = layers[key]
        kind = draw(st.sampled_from(["set", "set", "set", "element", "element", "drop_field", "drop_layer",
                                     "cycle", "self_parent", "rename_parent", "graph"]))
        if kind == "set" and isinstance(layer, dict):
            layer[draw(st.sampled_from(FIELDS))] = draw(VALUES)
        elif kind == "element" and isinstance(layer, dict):
            field = draw(st.sampled_from([f for f in FIELDS if isinstance(layer.get(f), list) and layer[f]] or FIELDS))
            v = layer.get(field)
            if isinstance(v, list) and v:
                v[draw(st.integers(0, len(v) - 1))] = draw(VALUES)
            else:
                layer[field] = draw(VALUES)
        elif kind == "drop_field" and isinstance(layer, dict):
            layer.pop(draw(st.sampled_from(FIELDS)), None)
        elif kind == "drop_layer":
            del layers[key]
        elif kind in ("cycle", "self_parent") and isinstance(layer, dict):
            children = layer.get("children")
            children = [c for c in children if isinstance(c, str) and c in layers] if isinstance(children, list) \
                else []
            other = key if kind == "self_parent" or not children else draw(st.sampled_from(children))
            parents = layer.get("parents")
            layer["parents"] = (parents if isinstance(parents, list) else []) + [other]
        elif kind == "rename_parent" and isinstance(layer, dict):
            layer["parents"] = [draw(st.text(max_size=6))]
        elif kind == "graph":
            data[draw(st.sampled_from(["name", "layers"]))] = draw(VALUES)
    return data


@needs_graphs
def test_reference_graphs_still_load():
    """The unmutated graphs: every one converts, except benchmark templates (placeholders) with one error."""
    for name, data in GRAPHS.items():
        if name.startswith("annette_bench"):
            with pytest.raises(ModelLoadError, match="benchmark template"):
                from_annette_json(copy.deepcopy(data))
        else:
            assert len(from_annette_json(copy.deepcopy(data))) == len(data["layers"])


@needs_graphs
@settings(max_examples=700, **SETTINGS)
@given(mutated_graph())
def test_mutated_annette_graph_api(data):
    check_outcome(lambda: from_annette_json(data))


@needs_graphs
@settings(max_examples=120, **SETTINGS)
@given(mutated_graph(), st.sampled_from(["dump", "dump", "truncate", "deep", "bytes"]))
def test_mutated_annette_graph_file(data, how):
    """Through a file: JSON with NaN/Infinity, truncated, nested deeper than the parser allows, not UTF-8."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "g.json")
        text = json.dumps(data)
        if how == "truncate":
            text = text[: len(text) // 2]
        elif how == "deep":
            text = text[:-1] + ', "deep": ' + "[" * 200_000 + "]" * 200_000 + "}"
        with open(path, "wb") as f:
            f.write(b"\xff\xfe" + text.encode() if how == "bytes" else text.encode())
        check_outcome(lambda: from_annette_json(path))


def _estimate_cli(path: str) -> tuple[int, str]:
    """``annette estimate PATH -p zcu102``: asserts exit 0, or exit 1 with exactly one ``annette: error:``
    line; returns the exit code and standard output."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli_main(["-q", "estimate", path, "-p", "zcu102-dnndk"])
    lines = err.getvalue().splitlines()
    assert rc in (0, 1), err.getvalue()
    if rc == 1:
        assert len(lines) == 1 and lines[0].startswith("annette: error: "), err.getvalue()
    return rc, out.getvalue()


@needs_graphs
@settings(max_examples=80, **SETTINGS)
@given(mutated_graph())
def test_mutated_annette_graph_cli(data):
    """``annette estimate FILE``: exit 0, or exit 1 with exactly one ``annette: error:`` line."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "g.json")
        with open(path, "w") as f:
            json.dump(data, f)
        rc, out = _estimate_cli(path)
    assert rc == 1 or "ms" in out


@pytest.mark.parametrize("mutate, words", [
    (lambda L: L["conv1"].__setitem__("kernel_shape", [3, "3", 3, 64]), "kernel_shape"),
    (lambda L: L["conv1"].__setitem__("parents", [1]), "parents"),
    (lambda L: L["conv1"].__setitem__("output_shape", [-1, math.nan, 112, 64]), "nan"),
    (lambda L: L["conv1"].__setitem__("output_shape", [-1, 1e300, 112, 64]), "2^50"),
    (lambda L: L["conv1"].__setitem__("parents", ["ghost"]), "parent 'ghost' is not a layer"),
    (lambda L: L["conv1"].__setitem__("strides", [1, 0, 0, 1]), "positive"),
    (lambda L: L["conv1"].__setitem__("kernel_shape", [0, 7, 3, 64]), "positive"),
    (lambda L: L["conv1"].__setitem__("kernel_shape", [7]), "1 entries"),
    (lambda L: L["conv1"].__setitem__("pads", [0, -3, 3, 0, 0, 3, 3, 0]), "negative"),
    (lambda L: L["conv1"].__setitem__("pads", [0, 3, 3]), "3 entries"),
    (lambda L: L["conv1"].__setitem__("type", 7), "'type'"),
    (lambda L: L["conv1"].__setitem__("input_shape", [-1, -5, 224, 3]), "negative dimension"),
    (lambda L: L["conv1"].__setitem__("input_shape", "1,224,224,3"), "expected a list"),
    (lambda L: L["conv1"].__setitem__("input_shape", [[[1, 2]]]), "nested"),
    (lambda L: L["data"].__setitem__("parents", ["fc1000_1"]), "cycle"),
])
def test_malformed_field_names_layer_and_field(ref_dir, mutate, words):
    data = json.loads((ref_dir / "graphs" / "cf_resnet18.json").read_text())
    assert {"conv1", "data", "fc1000_1"} <= set(data["layers"])
    mutate(data["layers"])
    with pytest.raises(ModelLoadError) as e:
        from_annette_json(data)
    msg = str(e.value)
    assert words.lower() in msg.lower() and "cf_resnet18" in msg
    assert "cycle" in words or "'conv1'" in msg


def test_deeply_nested_json_file(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{"layers": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(ModelLoadError, match="nested too deeply"):
        from_annette_json(path)


# --------------------------------------------------------------------------------------------------
# ONNX


def _vi(name: str, shape) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _const(name: str, arr: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(arr, name)


def _cnn() -> onnx.ModelProto:
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1], strides=[1, 1],
                              kernel_shape=[3, 3], dilations=[1, 1], group=1),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("LeakyRelu", ["p"], ["l"], name="leaky", alpha=0.1),
             helper.make_node("GlobalAveragePool", ["l"], ["g"], name="gap"),
             helper.make_node("Flatten", ["g"], ["f"], name="flat", axis=1),
             helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], name="fc", transB=1),
             helper.make_node("Softmax", ["y"], ["z"], name="softmax", axis=1)]
    inits = [_const("w", np.zeros((4, 3, 3, 3), np.float32)), _const("b", np.zeros(4, np.float32)),
             _const("fw", np.zeros((5, 4), np.float32)), _const("fb", np.zeros(5, np.float32))]
    g = helper.make_graph(nodes, "cnn", [_vi("x", [1, 3, 8, 8])], [_vi("z", None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _seq() -> onnx.ModelProto:
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv1d", group=2, kernel_shape=[3]),
             helper.make_node("AveragePool", ["c"], ["p"], name="pool1d", kernel_shape=[2], strides=[2]),
             helper.make_node("Reshape", ["p", "shape"], ["r"], name="reshape"),
             helper.make_node("MatMul", ["r", "mw"], ["m"], name="matmul"),
             helper.make_node("Clip", ["m", "lo", "hi"], ["k"], name="clip"),
             helper.make_node("ReduceMean", ["k"], ["o"], name="mean", axes=[1], keepdims=1)]
    inits = [_const("w", np.zeros((2, 2, 3), np.float32)), _const("shape", np.array([1, -1], np.int64)),
             _const("mw", np.zeros((8, 3), np.float32)), _const("lo", np.array(0, np.float32)),
             _const("hi", np.array(6, np.float32))]
    g = helper.make_graph(nodes, "seq", [_vi("x", [1, 4, 10])], [_vi("o", None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


ONNX_SEEDS = {"cnn": _cnn(), "seq": _seq()}
DIMS = [0, -1, -5, 1, 2, 3, 7, 64, 2**31, 2**40, 2**50, 2**62, 2**63 - 1, -2**63]
ATTRS = ["kernel_shape", "strides", "pads", "dilations", "group", "auto_pad", "alpha", "axes", "transB", "transA",
         "axis", "keepdims", "min", "max"]
ATTR_VALUES = st.one_of(
    st.lists(st.sampled_from(DIMS), max_size=6), st.sampled_from(DIMS), st.floats(), st.text(max_size=6),
    st.sampled_from(["SAME_UPPER", "VALID", "NOTSET", "bogus", [1.5, 2.5], [b"\xff"], b"\xff\xfe"]))
OPS = ["Relu", "Conv", "MaxPool", "Gemm", "MatMul", "Clip", "ReduceMean", "Identity", "Concat", "Reshape",
       "GlobalAveragePool", "AveragePool", "ConvTranspose", "Split", "NoSuchOp", "Flatten", "Add"]


@st.composite
def mutated_onnx(draw) -> tuple[bytes, Any]:
    """Serialized bytes of a small ONNX model with one to three mutations, and an input_shape (or None)."""
    m = copy.deepcopy(ONNX_SEEDS[draw(st.sampled_from(sorted(ONNX_SEEDS)))])
    g = m.graph
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["dim", "dim", "init_dims", "attr", "attr", "attr", "input", "op",
                                     "drop_node", "dim_param", "name"]))
        nodes = list(g.node)
        node = g.node[draw(st.integers(0, len(nodes) - 1))] if nodes else None
        if kind == "dim":
            dims = g.input[0].type.tensor_type.shape.dim
            if dims:
                dims[draw(st.integers(0, len(dims) - 1))].dim_value = draw(st.sampled_from(DIMS))
        elif kind == "dim_param":
            dims = g.input[0].type.tensor_type.shape.dim
            if dims:
                dims[draw(st.integers(0, len(dims) - 1))].dim_param = draw(st.text(max_size=3))
        elif kind == "init_dims" and g.initializer:
            t = g.initializer[draw(st.integers(0, len(g.initializer) - 1))]
            new = draw(st.lists(st.sampled_from([0, 1, 2, 3, 4, 5, 8, -1, 2**40]), max_size=4))
            del t.dims[:]
            t.dims.extend(new)
        elif kind == "attr" and node is not None:
            key, value = draw(st.sampled_from(ATTRS)), draw(ATTR_VALUES)
            keep = [a for a in node.attribute if a.name != key]
            del node.attribute[:]
            node.attribute.extend(keep)
            if not (isinstance(value, list) and not value):
                try:
                    node.attribute.append(helper.make_attribute(key, value))
                except (ValueError, TypeError, OverflowError):  # not representable in ONNX at all
                    pass
        elif kind == "input" and node is not None and node.input:
            i = draw(st.integers(0, len(node.input) - 1))
            choice = draw(st.sampled_from(["", "ghost", "drop"]))
            if choice == "drop":
                del node.input[i]
            else:
                node.input[i] = choice
        elif kind == "op" and node is not None:
            node.op_type = draw(st.sampled_from(OPS))
        elif kind == "drop_node" and node is not None:
            g.node.remove(node)
        elif kind == "name":
            which = draw(st.sampled_from(["graph", "node", "tensor"]))
            if which == "graph":
                g.name = "MARKERGRAPH"
            elif which == "node" and node is not None:
                node.name = "MARKERNODE"
            elif g.input:
                g.input[0].name = "MARKERTENS"
    data = m.SerializeToString()
    for marker in (b"MARKERGRAPH", b"MARKERNODE", b"MARKERTENS"):
        data = data.replace(marker, b"\xff\xfe" + marker[2:])  # same length, not UTF-8
    shape = draw(st.one_of(st.none(), st.none(), st.lists(st.sampled_from(DIMS + [2**70, 3, 8, 10]), max_size=5),
                           st.sampled_from([(1, 3, 8, 8), (2, 3, 8, 8), (1, 5, 8, 8), (1, 4, 10), (1, 4, 30)])))
    return data, shape


@settings(max_examples=500, **SETTINGS)
@given(mutated_onnx())
def test_mutated_onnx_api(case):
    data, shape = case
    try:
        proto = onnx.load_from_string(data)
    except Exception:  # noqa: BLE001 - protobuf refused the bytes: nothing of ours to test
        return
    check_outcome(lambda: from_onnx(proto, input_shape=shape))


@settings(max_examples=60, **SETTINGS)
@given(mutated_onnx(), st.sampled_from(["whole", "whole", "truncate", "flip"]))
def test_mutated_onnx_cli(case, how):
    data, _ = case
    if how == "truncate":
        data = data[: len(data) // 2]
    elif how == "flip":
        data = bytes(b ^ 0x55 if i % 17 == 3 else b for i, b in enumerate(data))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.onnx")
        with open(path, "wb") as f:
            f.write(data)
        _estimate_cli(path)


def test_onnx_graph_name_not_utf8():
    data = _cnn().SerializeToString().replace(b"cnn", b"\xff\xfe\xfd")
    with pytest.raises(ModelLoadError, match="graph name is not valid UTF-8"):
        from_onnx(onnx.load_from_string(data))


@pytest.mark.parametrize("dim, words", [(-5, "negative"), (0, "zero"), (2**62, "2\\^50")])
def test_onnx_absurd_input_dimension(dim, words):
    m = _cnn()
    m.graph.input[0].type.tensor_type.shape.dim[2].dim_value = dim
    with pytest.raises(ModelLoadError, match=words):
        from_onnx(m)


@pytest.mark.parametrize("shape", [(1, 3, 2**70, 8), (1, 3, 2**30, 2**30)])
def test_onnx_input_shape_beyond_int64(shape):
    with pytest.raises(ModelLoadError, match="2\\^50"):
        from_onnx(_cnn(), input_shape=shape)


@pytest.mark.parametrize("attr, value, words", [("strides", [0, 1], "positive"), ("kernel_shape", [0, 3], "positive"),
                                                ("group", 0, "group"), ("pads", [1, 1], "2 entries"),
                                                ("dilations", [-1, 1], "positive")])
def test_onnx_bad_conv_attribute_names_node(attr, value, words):
    m = _cnn()
    conv = m.graph.node[0]
    keep = [a for a in conv.attribute if a.name != attr]
    del conv.attribute[:]
    conv.attribute.extend(keep + [helper.make_attribute(attr, value)])
    with pytest.raises(ModelLoadError) as e:
        from_onnx(m)
    assert "ONNX node 'conv' (Conv)" in str(e.value) and words in str(e.value)


def test_estimate_of_seeds_is_unchanged_by_validation():
    """The unmutated seeds convert (the validation refuses nothing valid)."""
    assert len(from_onnx(_cnn())) == 9 and len(from_onnx(_seq())) == 7
    assert at.estimate(from_onnx(_cnn()), "zcu102-dnndk").device_ms > 0
