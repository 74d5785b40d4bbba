"""Regenerate ``annette_torch/fit/calibration_types.json``: the layer types of every transformer-era and
classic-family calibration network, traced (what `annette calibrate` and `annette adapt` read to pick the
networks that cover a platform's types, without tracing all of them). Run after a front-end change that
types a calibration network's layers otherwise (a test says when):

    python scripts/calibration_types.py
"""

from __future__ import annotations

import json
import sys

from annette_torch.atomic import write_text
from annette_torch.fit.calibration_modern import TYPES_FILE, all_names, layer_types


def main() -> int:
    out = {name: sorted(layer_types(name, stored=False)) for name in all_names()}
    write_text(TYPES_FILE, json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"wrote the layer types of {len(out)} calibration networks to {TYPES_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
