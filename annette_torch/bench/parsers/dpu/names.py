"""DPU node and subgraph names as the toolchains decorate and mangle them, mapped back to candidate layer names."""

from __future__ import annotations

import re

_PAREN = re.compile(r"\([^()]*\)")
_SUFFIXES = ("_DequantizeLinear_Output", "_QuantizeLinear_Output", "_fix")


def normalize_node_name(name: str) -> str:
    """A DPU node / subgraph name with the toolchains' decorations removed.

    Removes the ``subgraph_`` prefix of xmodel subgraphs, a trailing ``*`` (DNNDK marks cut names so), a
    ``/aten::...`` tail (PyTorch-flow names), parenthesised notes such as ``(TransferMatMulToConv2d)``,
    and ``_fix`` / ONNX QDQ ``_QuantizeLinear_Output`` / ``_DequantizeLinear_Output`` suffixes.
    """
    s = name.strip()
    if s.startswith("subgraph_"):
        s = s[len("subgraph_"):]
    s = s.rstrip("*").strip()
    if "/aten::" in s:
        s = s.split("/aten::", 1)[0]
    prev = None
    while prev != s:  # nested parentheses
        prev, s = s, _PAREN.sub("", s)
    s = s.strip()
    changed = True
    while changed:
        changed = False
        for suf in _SUFFIXES:
            if s.endswith(suf) and len(s) > len(suf):
                s, changed = s[: -len(suf)], True
    return s or name.strip()


def canonical_name(name: str) -> str:
    """Name in the compilers' mangled form, for comparing across toolchains.

    DNNC and the XIR compiler replace ``/``, ``.``, ``[`` ... by ``_`` (``conv2d_1/convolution`` becomes
    ``conv2d_1_convolution``); mapping every run of non-alphanumeric characters to one ``_`` on both sides
    makes an original layer name comparable with a DPU node name.
    """
    return re.sub(r"[^0-9A-Za-z]+", "_", normalize_node_name(name)).strip("_")


def candidate_layers(name: str) -> tuple[str, ...]:
    """Candidate original layer names for a DPU node (normalised name first, then its mangled form)."""
    out: list[str] = []
    for c in (normalize_node_name(name), canonical_name(name)):
        if c and c not in out:
            out.append(c)
    return tuple(out)
