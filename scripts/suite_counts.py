"""Regenerate ``annette_torch/bench/suites/counts.json``: every grid suite's number of feasible configurations,
enumerated, with the fingerprint of its space and caps (what ``annette bench --list`` shows without
enumerating). Run after changing a suite's space, caps or cost formulas:

    python scripts/suite_counts.py
"""

from __future__ import annotations

import json
import sys

from annette_torch.atomic import write_text
from annette_torch.bench.suites import SUITES
from annette_torch.bench.suites.counts import COUNTS_FILE


def main() -> int:
    out = {name: {"fingerprint": s.count_fingerprint(), "count": s.count(stored=False)}
           for name, s in SUITES.items() if s.default_sampler != "table"}
    write_text(COUNTS_FILE, json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(out)} suite counts to {COUNTS_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
