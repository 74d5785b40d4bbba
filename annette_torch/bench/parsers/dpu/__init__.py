"""Parsers for the ZCU102 DPU profilers' reports, into the standard `NodeRecord` format.

Five layouts are recognised, one module each (``detect_format`` names them); every time is converted to
milliseconds:

``dnndk`` (`dnndk`)
    the per-node table N2Cube prints for every profiled DPU task run (DNNDK v3.x, Vitis AI 1.0-1.2);
``vaitrace-csv`` (`vaitrace_csv`)
    ``profile_summary.csv`` written by Vitis AI's ``vaitrace``: min / mean / max per DPU subgraph and core;
``vaitrace-txt`` (`vaitrace_txt`)
    the ASCII table of ``vaitrace --txt_summary``;
``vaitrace-vtf`` (`vaitrace_vtf`)
    ``vart_trace.csv``, the VTF event trace: per-run durations;
``vart-timing`` (`vart_timing`)
    ``vart_timing.json`` written by the job folder's ``run_dpu.py`` when vaitrace is not available.

With vaitrace, a row is a DPU *subgraph* (usually the whole DPU part of a model); the fine-grained mode
(``vaitrace --fine_grained`` on Vitis AI 1.3-2.5 with an xmodel compiled with ``--options
'{"mode":"debug"}'``) runs the model subgraph by subgraph, so the same tables then have one row per DPU
layer. The reports do not say which mode produced them: pass ``granularity`` (the job folder records it).

A corrupt or truncated report raises `ReportError` naming the file and line; nothing partial is returned.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, NamedTuple

from ...records import NodeRecord
from . import dnndk, vaitrace_csv, vaitrace_txt, vaitrace_vtf, vart_timing
from .dnndk import parse_dnndk
from .names import candidate_layers, canonical_name, normalize_node_name
from .report import DpuReport, ReportError, UnknownLayoutError, _fail
from .vaitrace_csv import parse_vaitrace_csv
from .vaitrace_txt import parse_vaitrace_txt
from .vaitrace_vtf import merge_vtf_with_summary, parse_vaitrace_vtf
from .vart_timing import parse_vart_timing

__all__ = [
    "ReportError",
    "UnknownLayoutError",
    "DpuReport",
    "FORMATS",
    "detect_format",
    "parse_report",
    "parse_records",
    "parse_text",
    "normalize_node_name",
    "candidate_layers",
    "canonical_name",
    "read_report_text",
    "merge_vtf_with_summary",
    "parse_dnndk",
    "parse_vaitrace_csv",
    "parse_vaitrace_txt",
    "parse_vaitrace_vtf",
    "parse_vart_timing",
]

class _Layout(NamedTuple):
    """One report layout: how to recognise its text, its parser, and which options of `parse_text` it takes."""

    sniff: Callable[[str, list[str], str], bool]
    parse: Callable[..., DpuReport]
    options: tuple[str, ...]


#: The layouts in the order `detect_format` tries them (the first whose ``sniff`` says yes).
_LAYOUTS: dict[str, _Layout] = {
    "vart-timing": _Layout(vart_timing.sniff, parse_vart_timing, ("skip_runs", "granularity")),
    "dnndk": _Layout(dnndk.sniff, parse_dnndk, ("skip_runs",)),
    "vaitrace-vtf": _Layout(vaitrace_vtf.sniff, parse_vaitrace_vtf, ("skip_runs", "granularity")),
    "vaitrace-txt": _Layout(vaitrace_txt.sniff, parse_vaitrace_txt, ("include_cpu", "granularity")),
    "vaitrace-csv": _Layout(vaitrace_csv.sniff, parse_vaitrace_csv, ("include_cpu", "granularity")),
}
#: The layout names.
FORMATS = tuple(sorted(_LAYOUTS))


def detect_format(text: str, source: str = "<text>") -> str:
    """Name of the report layout (one of `FORMATS`); `ReportError` for an empty or unknown file."""
    if not text.strip():
        raise _fail(source, None, "empty report", UnknownLayoutError)
    if "\x00" in text[:4096]:
        raise _fail(source, None, "binary file, not a profiler report", UnknownLayoutError)
    stripped = [ln.strip() for ln in text.splitlines()]
    for fmt, layout in _LAYOUTS.items():
        if layout.sniff(text, stripped, source):
            return fmt
    raise _fail(source, None, "unknown report layout (expected a DNNDK profile, vaitrace profile_summary.csv, "
                              "vart_trace.csv, a vaitrace text summary or vart_timing.json)", UnknownLayoutError)


def parse_text(text: str, source: str = "<text>", *, fmt: str | None = None, include_cpu: bool = False,
               skip_runs: int = 0, granularity: str | None = None) -> DpuReport:
    """Parse report text (layout detected unless ``fmt`` is given)."""
    fmt = fmt or detect_format(text, source)
    if fmt not in FORMATS:
        raise ReportError(f"unknown report format {fmt!r} (known: {', '.join(FORMATS)})")
    if granularity not in (None, "subgraph", "layer"):
        raise ReportError(f"granularity must be 'subgraph' or 'layer', not {granularity!r}")
    options: dict[str, Any] = {"include_cpu": include_cpu, "skip_runs": skip_runs,
                               "granularity": granularity or "subgraph"}
    layout = _LAYOUTS[fmt]
    return layout.parse(text, source, **{k: options[k] for k in layout.options})


def read_report_text(path: str | os.PathLike) -> str:
    """The text of a report file (undecodable bytes replaced); `ReportError` when it cannot be read."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise ReportError(f"{p}: cannot read report ({e.strerror or e})") from None
    return data.decode("utf-8", errors="replace")


def parse_report(path: str | os.PathLike, *, fmt: str | None = None, include_cpu: bool = False,
                 skip_runs: int = 0, granularity: str | None = None) -> DpuReport:
    """Read and parse one report file (see the module docstring for the layouts)."""
    return parse_text(read_report_text(path), str(path), fmt=fmt, include_cpu=include_cpu, skip_runs=skip_runs,
                      granularity=granularity)


def parse_records(path: str | os.PathLike, **kwargs: Any) -> list[NodeRecord]:
    """`parse_report(path).records`."""
    return parse_report(path, **kwargs).records
