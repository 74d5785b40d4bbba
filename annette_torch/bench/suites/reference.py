"""The ANNETTE reference data folder: where it is, how a file name inside it resolves, and its sweep tables."""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Any

from .base import SuiteError

__all__ = ["REFERENCE_ENV", "reference_dir", "resolve_reference", "load_sweep_table"]

#: environment variable naming the reference data folder
REFERENCE_ENV = "ANNETTE_REFERENCE_DIR"


def reference_dir() -> Path | None:
    """The ANNETTE reference data folder: ``$ANNETTE_REFERENCE_DIR``, else ``shared/annette-reference`` next to
    the working directory or the checkout; None when absent."""
    env = os.environ.get(REFERENCE_ENV)
    cands = [Path(env)] if env else []
    cwd = Path.cwd()
    cands += [cwd.parent / "shared" / "annette-reference", cwd / "shared" / "annette-reference",
              Path(__file__).resolve().parents[4] / "shared" / "annette-reference"]
    for c in cands:
        if c.is_dir():
            return c
    return None


def resolve_reference(path: str | os.PathLike, sub: str, ext: str) -> Path:
    """``path`` itself when it is a file, else the file of that name (``ext`` optional) under the reference
    data's ``sub`` folder; `SuiteError` when neither exists."""
    p = Path(path)
    if p.is_file():
        return p
    ref = reference_dir()
    if ref is not None and not p.is_absolute():
        base = ref / sub
        stem = p.name if p.suffix == ext else p.name + ext
        for cand in [base / p.parent / stem, *sorted(base.rglob(stem))]:
            if cand.is_file():
                return cand
    where = f" (looked in {ref / sub})" if ref is not None else \
        f" (reference data not found: set ${REFERENCE_ENV})"
    raise SuiteError(f"no such file: {str(path)!r}{where}")


def load_sweep_table(path: str | os.PathLike) -> list[dict]:
    """Rows of an ANNETTE sweep table (CSV with a header, e.g. ``width,height,channels,filters,k_size,stride,
    dilation,batch_size``) as dicts of ints (floats / strings where a value is not an integer).

    ``path`` is a file or a table name of the reference data (``"paper35k"``).
    """
    p = resolve_reference(path, "benchmark-configs", ".csv")
    try:
        with open(p, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            if not reader.fieldnames:
                raise SuiteError(f"{p}: empty table (no header)")
            rows = [{k.strip(): _number(v) for k, v in row.items() if k is not None} for row in reader]
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise SuiteError(f"cannot read sweep table {p}: {e}") from None
    return rows


def _number(v: str | None) -> Any:
    """A table cell as int, else float, else the stripped text."""
    v = (v or "").strip()
    try:
        return int(v)
    except ValueError:
        try:
            return float(v)
        except ValueError:
            return v
