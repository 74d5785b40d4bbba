"""The validation set: networks never used in fitting (zoo architectures, ANNETTE reference graphs,
random NAS-Bench-101 cells), deterministic, with the fingerprints that key their cached measurements."""

from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import AnnetteError
from ..ir import INT_COLUMNS, LayerType, Network
from .errors import ValidationError

__all__ = ["ValidationNet", "validation_networks", "network_fingerprint", "layer_signature", "WEIGHTED_TYPES",
           "VALIDATION_SEED", "TINY_ZOO", "CLASSIC_ZOO", "MIN_REFERENCE_OPS"]

log = logging.getLogger(__name__)

#: Seed of the validation NAS cells; the calibration networks leave these cells out.
VALIDATION_SEED = 12345
#: Zoo models left out of the validation set (toy networks for tests).
TINY_ZOO = ("tiny_cnn", "tiny_resnet")
#: the zoo models of the classic validation set (kind ``zoo``): the same 15 in every run, whatever else the zoo
#: holds (the Vitis AI model-zoo networks calibrate zcu102-vai3 and are checked by its own benchmark)
CLASSIC_ZOO = ("alexnet", "densenet121", "efficientnet_b0", "googlenet", "mnasnet0_5", "mobilenet_v2",
               "mobilenet_v3_small", "regnetx_400mf", "resnet18", "resnet34", "resnet50", "shufflenet_v2_x0_5",
               "squeezenet1_1", "vgg11", "vgg16")
#: Reference graphs smaller than this (operations) are building blocks, not architectures.
MIN_REFERENCE_OPS = 1e7


@dataclass
class ValidationNet:
    """One validation network: ``name`` (unique, ``zoo/...``, ``ref/...``, ``nb101/...``), ``kind``
    (``zoo`` | ``reference`` | ``nb101``), its IR and input shape.

    ``source`` says how it becomes ONNX for measurement: ``"ir"`` (`annette_torch.bench.export.to_onnx`)
    or ``"torch"`` (``torch.onnx.export`` of the zoo module, for the few zoo models whose IR the exporter
    cannot express).
    """

    name: str
    kind: str
    network: Network
    input_shape: tuple[int, ...]
    source: str = "ir"
    _fp: str | None = field(default=None, repr=False, compare=False)

    @property
    def group(self) -> str:
        """``"nb101"`` for NAS cells, ``"real"`` for architectures."""
        return "nb101" if self.kind == "nb101" else "real"

    @property
    def fingerprint(self) -> str:
        """`network_fingerprint` of the IR (cached)."""
        if self._fp is None:
            self._fp = network_fingerprint(self.network)
        return self._fp

    def to_onnx(self):
        """The ONNX model that is measured (random weights, deterministic); a zoo model whose IR does not
        export falls back to ``torch.onnx.export``."""
        if self.source == "torch":
            return _torch_onnx(self.name.split("/", 1)[1], self.input_shape)
        from ..bench.export import ExportError, to_onnx
        try:
            return to_onnx(self.network)
        except ExportError:
            if self.kind not in ("zoo", "modern"):
                raise
            self.source = "torch"
            return _torch_onnx(self.name.split("/", 1)[1], self.input_shape)


def network_fingerprint(net: Network) -> str:
    """Hash (hex, 16 chars) of what determines a network's latency: layer types, every integer column and
    the edges. Layer and network names are left out, so renaming a network keeps its cached measurement."""
    h = hashlib.sha256()
    h.update(np.ascontiguousarray(net.types, dtype=np.int64).tobytes())
    for c in INT_COLUMNS:
        if c == "slow" and not net.cols[c].any():
            continue  # a network without slow-path work hashes as before the column existed
        h.update(c.encode())
        h.update(np.ascontiguousarray(net.cols[c], dtype=np.int64).tobytes())
    h.update(b"edges")
    h.update(np.ascontiguousarray(net.edges, dtype=np.int64).reshape(-1).tobytes())
    return h.hexdigest()[:16]


def _torch_onnx(zoo_name: str, input_shape: Sequence[int]):
    import torch

    from .. import zoo
    torch.manual_seed(0)
    return module_onnx(zoo.get(zoo_name).eval(), input_shape)


def module_onnx(module: Any, input_shape: Sequence[int]) -> Any:
    """The ONNX model (``torch.onnx.export``, opset 17, input ``x``) of ``module`` at ``input_shape``, the shape it
    is measured at: the tracer's warnings about shape-dependent branches (a Swin window's shift) are silenced, as
    the export is at that shape."""
    import io
    import warnings

    import onnx
    import torch

    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        # not under no_grad: there nn.MultiheadAttention takes its fused fast path, which ONNX cannot express
        torch.onnx.export(module, torch.randn(*input_shape), buf, dynamo=False, opset_version=17, input_names=["x"])
    return onnx.load_from_string(buf.getvalue())


def _exports(net: Network) -> str | None:
    """None when the IR exports to ONNX, else the exporter's message."""
    from ..bench.export import to_onnx
    try:
        to_onnx(net)
    except AnnetteError as e:
        return str(e)
    return None


#: Layer types with weights: what makes two graphs the same architecture for `validation_networks`.
WEIGHTED_TYPES = (LayerType.CONV, LayerType.DEPTHWISE_CONV, LayerType.GROUP_CONV, LayerType.CONV_TRANSPOSE,
                  LayerType.FULLY_CONNECTED, LayerType.MATMUL)


def layer_signature(net: Network, types: Sequence[LayerType] | None = None) -> str:
    """Hash of the network's layers as a multiset (type, shapes, kernel, stride, dilation, groups), order,
    padding and edges left out; with ``types`` only layers of those types count.

    Two graphs of one architecture from different sources (layer order, padding stored explicitly or as
    SAME, BatchNorm folded or not, an extra Dropout or Pad node) get the same signature with
    ``types=WEIGHTED_TYPES``.
    """
    cols = [c for c in INT_COLUMNS if c not in ("ph", "pw")]
    rows = np.column_stack([np.asarray(net.types, dtype=np.int64)] + [np.asarray(net.cols[c], np.int64) for c in cols])
    if types is not None:
        rows = rows[np.isin(net.types, np.asarray([int(t) for t in types]))]
    rows = rows[np.lexsort(rows.T[::-1])] if len(rows) else rows
    return hashlib.sha256(np.ascontiguousarray(rows).tobytes()).hexdigest()[:16]


def validation_networks(kinds: Sequence[str] = ("zoo", "reference", "nb101"), n_nb101: int = 50,
                        seed: int = VALIDATION_SEED, check_export: bool = True, max_gops: float | None = None,
                        reference: str | os.PathLike | None = None) -> list[ValidationNet]:
    """The validation set, deterministic (same names, networks and order on every call).

    - ``zoo``: the classic zoo models (`CLASSIC_ZOO`), traced at their input shapes; a model whose IR does not
      export is measured through ``torch.onnx.export`` (``source="torch"``);
    - ``modern``: the architectures of the 2020s (`annette_torch.zoo_modern`: vision transformers, Swin,
      ConvNeXt, hybrids, EfficientNetV2, segmentation heads), reported apart from the classic set;
    - ``reference``: every graph of the ANNETTE reference data (``reference`` folder, default
      `annette_torch.bench.suites.reference_dir`) that converts, has no Unknown layers and (with
      ``check_export``) exports to ONNX; building blocks under `MIN_REFERENCE_OPS` operations are left out;
    - ``nb101``: ``n_nb101`` distinct random NAS-Bench-101 cells drawn with ``seed``.

    A zoo model or reference graph with the same convolution and fully-connected layers
    (`layer_signature` over `WEIGHTED_TYPES`) as an earlier one is left out: the reference data holds
    several copies of ResNet-18, SqueezeNet, MobileNet-v1, VGG-16, DenseNet-121 (NAS cells are distinct by
    their graph hash and all kept). ``max_gops`` leaves out networks above that many giga-operations (to
    bound measurement time). Every skip is logged (INFO) with its reason.
    """
    for k in kinds:
        if k not in ("zoo", "modern", "reference", "nb101"):
            raise ValidationError(f"unknown validation kind {k!r} (known: zoo, modern, reference, nb101)")
    out: list[ValidationNet] = []
    seen: dict[str, str] = {}

    def admit(name: str, net: Network, dedupe: bool = True) -> bool:
        if max_gops is not None and net.total_ops > max_gops * 1e9:
            log.info("validation: %s skipped: %.1f GOPs > max_gops=%g", name, net.total_ops / 1e9, max_gops)
            return False
        if not dedupe:
            return True
        sig = layer_signature(net, WEIGHTED_TYPES)
        if sig in seen:
            log.info("validation: %s skipped: same conv/fc layers as %s", name, seen[sig])
            return False
        seen[sig] = name
        return True

    def forget(net: Network) -> None:
        seen.pop(layer_signature(net, WEIGHTED_TYPES), None)

    zoo_names: list[tuple[str, str]] = []
    if "zoo" in kinds:
        zoo_names += [("zoo", n) for n in CLASSIC_ZOO]
    if "modern" in kinds:
        from ..zoo_modern import MODERN
        zoo_names += [("modern", n) for n in MODERN]
    if zoo_names:
        from .. import zoo
        from ..frontends.fx import trace
        for kind, name in zoo_names:
            shape = tuple(zoo.INPUT_SHAPES[name])
            net = trace(zoo.get(name), shape)
            if not admit(f"zoo/{name}", net):
                continue
            source = "ir"
            if check_export:
                err = _exports(net)
                if err is not None:
                    log.info("validation: zoo/%s does not export through the IR (%s); measured through "
                             "torch.onnx.export", name, err)
                    source = "torch"
            out.append(ValidationNet(f"{kind}/{name}", kind, net, shape, source))
    if "reference" in kinds:
        out.extend(_reference_networks(reference, check_export, admit, forget))
    if "nb101" in kinds:
        from ..search.spaces import nb101
        specs = nb101.sample(int(n_nb101), np.random.default_rng(seed))
        for i, spec in enumerate(specs):
            net = nb101.build_network(spec.matrix, spec.ops)
            h = nb101.spec_hash(spec.matrix, spec.ops)[:8]
            net.name = f"nb101-{i:03d}-{h}"
            if admit(f"nb101/{i:03d}-{h}", net, dedupe=False):
                out.append(ValidationNet(f"nb101/{i:03d}-{h}", "nb101", net, tuple(nb101.INPUT_SHAPE)))
    log.info("validation: %d networks (%s)", len(out),
             ", ".join(f"{k}: {sum(v.kind == k for v in out)}" for k in kinds))
    return out


def _reference_networks(reference: str | os.PathLike | None, check_export: bool,
                        admit: Callable[[str, Network], bool],
                        forget: Callable[[Network], None]) -> list[ValidationNet]:
    from ..frontends.annette_json import from_annette_json
    if reference is None:
        from ..bench.suites import reference_dir
        ref = reference_dir()
        if ref is None:
            log.warning("validation: the ANNETTE reference data folder was not found; no reference graphs")
            return []
        reference = ref
    graphs = Path(reference)
    if (graphs / "graphs").is_dir():
        graphs = graphs / "graphs"
    out = []
    for p in sorted(graphs.glob("*.json")):
        name = f"ref/{p.stem}"
        try:
            net = from_annette_json(p)
        except AnnetteError as e:
            log.info("validation: %s skipped: does not convert (%s)", name, str(e).splitlines()[0])
            continue
        unknown = int((net.types == LayerType.UNKNOWN).sum())
        if unknown:
            log.info("validation: %s skipped: %d Unknown layer(s) (%s)", name, unknown,
                     ", ".join(net.unknown_ops())[:80])
            continue
        if net.total_ops < MIN_REFERENCE_OPS:
            log.info("validation: %s skipped: %.0f operations, a building block", name, net.total_ops)
            continue
        if not admit(name, net):  # size and duplicate checks first: exporting big graphs takes seconds
            continue
        if check_export:
            err = _exports(net)
            if err is not None:
                log.info("validation: %s skipped: does not export (%s)", name, err.splitlines()[0])
                forget(net)
                continue
        n0 = np.flatnonzero(net.types == LayerType.INPUT)
        shape = net.out_shape(int(n0[0])) if n0.size else net.in_shape(0)
        out.append(ValidationNet(name, "reference", net, tuple(shape)))
    return out
