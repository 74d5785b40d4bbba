"""Give the shipped CPU platform files layer models and fusion rules for the layer types of attention-era
networks, taken from a platform file that ``annette calibrate`` fitted on *this* machine.

Run from the repository root, after ``annette calibrate -p ort-cpu --quick --out A.json`` and
``annette calibrate -p openvino-cpu --quick --out B.json``::

    python scripts/refresh_cpu_token_types.py --ort-cpu A.json --openvino-cpu B.json [--dry-run]

Why: the shipped files were fitted before the benchmark suites measured token tensors, so a vision
transformer's batched products (``MatMul``), ``Softmax`` and ``LayerNorm`` took the generic ``Base`` roofline,
and ``GELU`` / ``Transpose`` models fitted on NCHW activations and channel shuffles, where a transformer runs
them on ``(L, E)`` token matrices and head splits.

Per shipped file of a platform (``platforms/<name>.json`` and ``platforms/machines/<name>/*.json``), the
models of `TYPES` are replaced by the calibrated file's, and its fusion rules, fused-layer costs and
inserted-node costs that involve `TYPES` are added (rules of the other types stay as they are, so do the
file's end-to-end terms). A file measured on another machine (its ``fingerprint`` names another CPU) gets them
marked ``assumed:`` with the machine they come from. Every file is checked to load and written atomically.
"""

from __future__ import annotations

import argparse
import glob
import json
import sys
from datetime import date
from pathlib import Path
from typing import Any

from annette_torch.atomic import write_text
from annette_torch.platform import Platform
from annette_torch.platform.platform import dumps_platform

ROOT = Path(__file__).resolve().parent.parent
PLATFORMS = ("ort-cpu", "openvino-cpu")
#: layer types whose models come from the calibrated file: the token-tensor layers of transformer-era networks.
#: FullyConnected stays the shipped file's (fitted on ~10x the quick plan's fc samples; ONNX Runtime on an Intel
#: Xeon, relative to vit_s16 measured in the same minutes: the quick plan's model put resnet50 +23% against +5%
#: with the shipped one, the transformers within 4 points either way); so do Conv (dilated) and Resize
TYPES = ("MatMul", "Softmax", "LayerNorm", "GELU", "Transpose")


def _involves(rule: dict[str, Any], types: set[str]) -> bool:
    return bool(types & (set(rule.get("primary", ())) | set(rule.get("secondary", ()))))


def merge(shipped: dict[str, Any], calibrated: dict[str, Any], origin: str, types: tuple[str, ...] = TYPES
          ) -> tuple[dict[str, Any], list[str]]:
    """``shipped`` with the layer models, fusion rules and mapping costs of ``types`` from ``calibrated``; the
    list of what changed. ``origin`` is recorded on every copied model and rule."""
    out = json.loads(json.dumps(shipped))
    changed: list[str] = []
    for t in types:
        if t in calibrated["layers"]:
            out["layers"][t] = {**calibrated["layers"][t], "origin": origin}
            changed.append(t)
    wanted = set(types)
    mine = [r for r in out["mapping"].get("rules", []) if not _involves(r, wanted)]
    new = [{**r, "origin": f"{r.get('origin', '')}; {origin}".lstrip("; ")}
           for r in calibrated["mapping"].get("rules", []) if _involves(r, wanted)]
    names = {r["name"] for r in mine}
    out["mapping"]["rules"] = mine + [r for r in new if r["name"] not in names]
    changed += [f"rule {r['name']}" for r in new if r["name"] not in names]
    costs_new = calibrated["mapping"].get("costs") or {}
    if costs_new:
        costs = out["mapping"].setdefault("costs", {})
        for key in ("fused_ns", "inserted_input", "inserted_output"):
            src = costs_new.get(key) or {}
            for t in types:
                if t in src:
                    costs.setdefault(key, {})[t] = src[t]
                    changed.append(f"{key} {t}")
    report = out.get("fit_report", {}).get("layer_models")
    cal_report = calibrated.get("fit_report", {}).get("layer_models", {})
    if isinstance(report, dict):
        for t in types:
            if t in cal_report:
                report[t] = cal_report[t]
    return out, changed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for p in PLATFORMS:
        ap.add_argument(f"--{p}", metavar="FILE", help=f"platform file 'annette calibrate -p {p}' wrote here")
    ap.add_argument("--types", default=",".join(TYPES), help=f"layer types to copy (default {','.join(TYPES)})")
    ap.add_argument("--only", choices=("all", "here", "assumed"), default="all",
                    help="refresh every shipped file, only those measured on this machine, or only the others")
    ap.add_argument("--dry-run", action="store_true", help="print what would change, write nothing")
    args = ap.parse_args(argv)
    types = tuple(t.strip() for t in args.types.split(",") if t.strip())
    for platform in PLATFORMS:
        src = getattr(args, platform.replace("-", "_"))
        if not src:
            continue
        calibrated = json.loads(Path(src).read_text(encoding="utf-8"))
        Platform.from_dict(calibrated, src)
        cpu = calibrated.get("fingerprint", {}).get("cpu")
        how = (f"{calibrated.get('description', platform)}; 'annette calibrate --quick', copied by "
               "scripts/refresh_cpu_token_types.py")
        files = [ROOT / "platforms" / f"{platform}.json",
                 *sorted(Path(p) for p in glob.glob(str(ROOT / "platforms" / "machines" / platform / "*.json")))]
        for path in files:
            shipped = json.loads(path.read_text(encoding="utf-8"))
            here = shipped.get("fingerprint", {}).get("cpu") == cpu
            if args.only != "all" and here != (args.only == "here"):
                continue
            origin = how if here else f"assumed: not measured on this file's machine; {how}"
            out, changed = merge(shipped, calibrated, origin, types)
            copied = ", ".join(t for t in types if t in calibrated["layers"])
            where = "measured on this machine" if here else f"assumed (measured on {cpu})"
            note = f"; {copied} models {where} on {date.today().isoformat()} (annette calibrate --quick)"
            if changed and note not in out.get("description", ""):
                out["description"] = out.get("description", platform) + note
            Platform.from_dict(out, str(path))  # still a valid platform
            if not args.dry_run:
                write_text(path, dumps_platform(out) + "\n")
            print(f"{path.relative_to(ROOT)} ({'this machine' if here else 'assumed'}): {', '.join(changed)}"
                  + (" (dry run)" if args.dry_run else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
