"""Regenerate ``search/spaces/nb201_index.npy``, NAS-Bench-201's own index order, from the benchmark's table
``../shared/nb201/nb201_official_index.csv`` (columns ``nb201_index``, ``arch_str``):

    python scripts/build_nb201_index.py [CSV]

The file holds, for each index 0..15624, the cell's `arch_code` (uint16), read by
`annette_torch.search.spaces.nb201` without the CSV.
"""

from __future__ import annotations

import csv
import io
import sys
from pathlib import Path

import numpy as np

from annette_torch.atomic import atomic_write
from annette_torch.search.spaces import nb201

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CSV = ROOT.parent / "shared" / "nb201" / "nb201_official_index.csv"
OUT = ROOT / "search" / "spaces" / nb201.INDEX_FILE


def read_official(path: Path) -> np.ndarray:
    """The `arch_code` of each index of the benchmark's CSV; raises ValueError unless it is a permutation."""
    codes = np.full(nb201.NUM_ARCHS, -1, np.int64)
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            i = int(row["nb201_index"])
            if not 0 <= i < nb201.NUM_ARCHS or codes[i] >= 0:
                raise ValueError(f"{path}: index {i} out of range or given twice")
            codes[i] = nb201.arch_code(row["arch_str"])
    if not np.array_equal(np.sort(codes), np.arange(nb201.NUM_ARCHS)):
        raise ValueError(f"{path}: not all {nb201.NUM_ARCHS} cells, each once")
    return codes


def main(argv: list[str]) -> int:
    src = Path(argv[0]) if argv else DEFAULT_CSV
    codes = read_official(src).astype("<u2")
    buf = io.BytesIO()
    np.save(buf, codes, allow_pickle=False)
    with atomic_write(OUT, "wb") as f:
        f.write(buf.getvalue())
    print(f"wrote {len(codes)} indices ({len(buf.getvalue())} bytes) to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
