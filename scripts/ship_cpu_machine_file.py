"""Make a platform file from ``annette calibrate --quick`` this machine's shipped CPU file
(``platforms/machines/<name>/<slug>.json``).

Run from the repository root, after ``annette calibrate -p ort-cpu --quick --out Q.json --db S.sqlite`` and an
accuracy run that scored it (``python benchmarks/accuracy.py --platform ort-cpu --variants-dir D --cache C.sqlite
...``, which measures the calibration networks too)::

    python scripts/ship_cpu_machine_file.py -p ort-cpu --quick Q.json --cache C.sqlite [--dry-run]

Three steps: (1) the layer types the quick plan does not measure (standalone activations such as Tanh or
Softplus; the quick plan sees them fused) keep the current machine file's models, so no layer falls back to
``Base`` that did not before, each marked where it comes from; (2) every other model is marked as measured here
by ``calibrate --quick`` on the day; (3) the end-to-end terms are fitted on the accuracy run's calibration
networks (45, read from its cache: never the validation networks) instead of the 18 of the quick plan. The
result is checked to load and written atomically over the machine file of this machine (or ``--out``).
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import date
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PLATFORMS = ("ort-cpu", "openvino-cpu")


def keep_unmeasured(quick: dict[str, Any], previous: dict[str, Any], day: str) -> tuple[dict[str, Any], list[str]]:
    """``quick`` with the layer models of ``previous`` for the types ``quick`` lacks, and origins on every model;
    the list of kept types. Mapping rules and costs stay ``quick``'s."""
    out = json.loads(json.dumps(quick))
    kept = sorted(set(previous["layers"]) - set(out["layers"]))
    for m in out["layers"].values():
        if not m.get("origin"):
            m["origin"] = f"measured on this machine on {day} (annette calibrate --quick)"
    note = "kept from the previous file for this machine (the quick plan does not measure this type alone)"
    for t in kept:
        m = dict(previous["layers"][t])
        parts = [x for x in m.get("origin", "").split("; ") if x] + [note]
        m["origin"] = "; ".join(dict.fromkeys(parts))  # each part once, however often the type was kept
        out["layers"][t] = m
    return out, kept


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-p", "--platform", required=True, choices=PLATFORMS)
    ap.add_argument("--quick", required=True, metavar="FILE", help="the file 'annette calibrate --quick' wrote")
    ap.add_argument("--cache", required=True, metavar="SQLITE", help="the accuracy run's measurement cache")
    ap.add_argument("--out", help="file to write (default: this machine's file in platforms/machines/)")
    ap.add_argument("--dry-run", action="store_true", help="report, write nothing")
    args = ap.parse_args(argv)

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import accuracy  # the calibration networks of the accuracy benchmark

    from annette_torch import validate as V
    from annette_torch.atomic import write_text
    from annette_torch.errors import AnnetteError
    from annette_torch.platform import Platform
    from annette_torch.platform.machine import machine_fingerprint, machine_slug
    from annette_torch.platform.platform import dumps_platform

    out = Path(args.out or ROOT / "platforms" / "machines" / args.platform / f"{machine_slug(machine_fingerprint())}.json")
    try:
        quick = json.loads(Path(args.quick).read_text())
        previous = json.loads(out.read_text()) if out.is_file() else {"layers": {}}
        day = date.today().isoformat()
        d, kept = keep_unmeasured(quick, previous, day)
        d["description"] = (f"{d.get('description', args.platform)}; annette calibrate --quick of {day} (the types "
                            "its plan does not measure: from the previous file for this machine)")
        cal = accuracy.calibration_set()
        with V.MeasurementCache(args.cache) as cache:  # cached: nothing is measured again
            meas = V.measure_all(cal, args.platform, cache, runs=20, repeats=1, warmup=5, rounds=2)
        if len(meas) < len(cal):
            raise AnnetteError(f"{args.cache}: {len(cal) - len(meas)} calibration networks not measured")
        plat = accuracy.calibrate_variants(
            {args.platform: Platform.from_dict(d, str(out))}, cal, meas,
            origin=f"end-to-end calibration on the {len(cal)} calibration networks (NB101 cells, MobileNetV2-space "
                   "and transformer-era networks, never the validation set) of an accuracy run")[args.platform]
    except (OSError, ValueError, AnnetteError) as e:
        print(f"ship_cpu_machine_file: {e}", file=sys.stderr)
        return 1
    print(f"{out}: kept {', '.join(kept) or 'nothing'} from the previous file")
    if not args.dry_run:
        text = dumps_platform(plat.to_dict())
        Platform.from_dict(json.loads(text), str(out))  # loads before it replaces anything
        write_text(out, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
