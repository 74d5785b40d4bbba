"""The paper's convolution table (``paper35k.csv`` of the reference data) as configs of the ``paper_conv`` suite."""

from __future__ import annotations

from .reference import load_sweep_table, reference_dir

__all__ = ["PAPER_SPATIAL", "PAPER_CHANNELS", "paper_table"]

#: The paper's value lists (paper35k.csv).
PAPER_SPATIAL = [8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024]
PAPER_CHANNELS = [3, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 1024, 1536, 2048, 4096]

_PAPER_CACHE: dict[str, list[dict]] = {}  # reference folder -> its rows, read once


def _paper_rows() -> list[dict]:
    """The table's rows as conv configs; dilation and batch only where they differ from 1."""
    rows = load_sweep_table("paper35k")
    out = []
    for r in rows:
        c = {"h": int(r["height"]), "w": int(r["width"]), "c": int(r["channels"]), "f": int(r["filters"]),
             "k": int(r["k_size"]), "s": int(r.get("stride", 1) or 1)}
        if int(r.get("dilation", 1) or 1) != 1:
            c["d"] = int(r["dilation"])
        if int(r.get("batch_size", 1) or 1) != 1:
            c["n"] = int(r["batch_size"])
        out.append(c)
    return out


def paper_table() -> list[dict]:
    """The ``paper_conv`` suite's configs (fresh copies; read once per reference folder)."""
    ref = reference_dir()
    key = str(ref)
    if key not in _PAPER_CACHE:
        _PAPER_CACHE[key] = _paper_rows()
    return [dict(r) for r in _PAPER_CACHE[key]]
