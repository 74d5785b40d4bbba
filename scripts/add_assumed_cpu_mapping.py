"""Give the shipped default CPU platform files what a newer machine file of the same runtime measured and they
lack: the layout-aware kernel types with their models and reorder costs, and the runtime's fusions, views and
attention scales, marked as assumed.

Run from the repository root::

    python scripts/add_assumed_cpu_mapping.py [--from platforms/machines/ort-cpu/<machine>.json] [--dry-run]

Why: the default files (``platforms/ort-cpu.json``, ``platforms/openvino-cpu.json``) were measured before the
mapping learned where a runtime reorders a tensor between its blocked and plain layouts (ONNX Runtime's
``ReorderInput`` / ``ReorderOutput``), and before a layer that runs blocked got a kernel type of its own
(``BlockedResize``, ``BlockedReshape``). Without them a decoder that upsamples and concatenates lacks a fifth of
its time (an encoder-decoder measured 11.3 ms on ONNX Runtime; the default file adapted to the machine, 8.9 ms),
and ``annette adapt`` cannot put it back: its factors scale the layer models a file has, not the ones it lacks.

What is copied, per runtime, from the machine file (default: each runtime's file measured on this machine):
``mapping.kernel_types``, the layout reorder costs (``mapping.costs.layout``), and the models of the kernel types
(``BlockedResize``, ``BlockedReshape``) with their reorders at the graph's edges, where the default file has
none. Then what belongs to the runtime rather than to the CPU (`toolchain`):

- the fusions the machine file saw in every measured pair (``origin`` "fused in 100% of ..."), and its pattern
  folds, that the default file lacks: OpenVINO 2026 fuses a Reshape into the FullyConnected before it and the
  two MatMuls of an attention around their Softmax; without these the AMD EPYC file prices a Swin or SegFormer
  2-3 ms of Reshape that no CPU runs;
- the model of a type the machine file measured free (a view: roofline at 1e30) where the default file prices
  it: the default files were fitted before a blocked layer's reorder had a kernel type of its own, so their
  Reshape model carries those reorders, which ``BlockedReshape`` prices now;
- the end-to-end ``overhead.kind_scales`` of the types whose models the default file already took from the same
  machine (OpenVINO's MatMul and Softmax x0.54): the scale belongs to those models.

Each is marked the way ``scripts/add_assumed_cpu_types.py`` marks its models: an ``origin`` beginning with
``assumed:`` that names the file and machine it comes from. Nothing else the default file has is changed; files
are validated and written atomically.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path
from typing import Any

from annette_torch.atomic import write_text
from annette_torch.platform import Platform
from annette_torch.platform.platform import dumps_platform
from annette_torch.platform.registry import shipped_machine_file

ROOT = Path(__file__).resolve().parent.parent
PLATFORMS = ("ort-cpu", "openvino-cpu")
#: the layer types the kernel typing gives a layer (`annette_torch.mapping.layout.map_kernel_types`): their models
#: come with it (the others a default file lacks keep falling back to the kernel they run, see `Platform.layers`)
KERNEL_TYPE_MODELS = ("BlockedResize", "BlockedReshape", "RowBatchNorm")


def transfer(default: dict[str, Any], source: dict[str, Any], where: str) -> list[str]:
    """Copy into ``default`` (a platform dict) what ``source`` has of the mapping's layout model and layer
    models ``default`` lacks, each marked assumed (from ``where``); returns what was added."""
    added: list[str] = []
    mapping, src_mapping = default["mapping"], source.get("mapping") or {}
    if src_mapping.get("kernel_types") and not mapping.get("kernel_types"):
        mapping["kernel_types"] = True
        added.append("kernel_types")
    costs, src_costs = mapping.setdefault("costs", {}), src_mapping.get("costs") or {}
    in_costs = []
    if src_costs.get("layout") and "layout" not in costs:
        costs["layout"] = copy.deepcopy(src_costs["layout"])
        in_costs.append("layout reorder costs")
    for side in ("inserted_input", "inserted_output"):  # the reorders a runtime inserts at the graph's edges
        have = costs.setdefault(side, {})
        for key in KERNEL_TYPE_MODELS:
            if key in (src_costs.get(side) or {}) and key not in have:
                have[key] = copy.deepcopy(src_costs[side][key])
                in_costs.append(f"{key} {side.replace('_', ' ')} reorder")
    if in_costs:
        costs["origin"] = (f"{costs.get('origin', '')}; {', '.join(in_costs)} assumed: not measured on this "
                           f"file's machine, from {where}").lstrip("; ")
        added += in_costs
    for key, model in source["layers"].items():
        if key in KERNEL_TYPE_MODELS and key not in default["layers"]:
            model = copy.deepcopy(model)
            model["origin"] = f"assumed: not measured on this file's machine; from {where}: {model.get('origin', '')}"
            default["layers"][key] = model
            added.append(key)
    added += toolchain(default, source, where)
    if added:
        default["description"] = (f"{default.get('description', '')}; "
                                  f"{', '.join(added)} assumed (from {where})").lstrip("; ")
    return added


#: a roofline this fast is a view: the layer costs nothing
FREE = 1e29


def _is_free(model: dict[str, Any]) -> bool:
    """Whether a layer model prices nothing (a view)."""
    return model.get("model") == "roofline" and min(model.get("op_s", 0), model.get("bandwidth", 0)) >= FREE


def toolchain(default: dict[str, Any], source: dict[str, Any], where: str) -> list[str]:
    """Copy into ``default`` what ``source`` measured of the runtime rather than the CPU: its always-fused pairs
    and folds, the models of the types it runs as views, and the kind scales of the models ``default`` took from
    ``source``'s machine (see the module's docstring); returns what was added."""
    return _fusions(default, source, where) + _views(default, source, where) + _kind_scales(default, source, where)


def _fusions(default: dict[str, Any], source: dict[str, Any], where: str) -> list[str]:
    """The pairs ``source`` saw fused every time (not its decision trees, which may follow the CPU) and its
    folds that ``default`` lacks."""
    added: list[str] = []
    mapping, src_mapping = default["mapping"], source.get("mapping") or {}
    have = {r["name"] for r in mapping.get("rules", [])}
    for rule in src_mapping.get("rules", []):
        if rule["name"] not in have and str(rule.get("origin", "")).startswith("fused in 100%"):
            rule = {**copy.deepcopy(rule), "origin": f"assumed: {rule['origin']} on the machine of {where}"}
            mapping.setdefault("rules", []).append(rule)
            added.append(f"{rule['name']} fusion")
    folds = [f for f in src_mapping.get("folds", []) if f not in mapping.get("folds", [])]
    if folds:
        mapping["folds"] = list(mapping.get("folds", [])) + folds
        added.append(f"{', '.join(folds)} fold{'s' if len(folds) > 1 else ''}")
    return added


def _views(default: dict[str, Any], source: dict[str, Any], where: str) -> list[str]:
    """The models of the types ``source`` measured free, where ``default`` prices them."""
    added: list[str] = []
    for key, model in source["layers"].items():
        mine = default["layers"].get(key)
        if _is_free(model) and mine is not None and not _is_free(mine):
            default["layers"][key] = {**copy.deepcopy(model), "origin": f"assumed: a view, free on every CPU; "
                                      f"from {where}: {model.get('origin', '')}"}
            added.append(f"free {key}")
    return added


def _kind_scales(default: dict[str, Any], source: dict[str, Any], where: str) -> list[str]:
    """``source``'s kind scales of the types whose models ``default`` took from ``source``'s CPU (their origin
    says so) and has no scale for."""
    cpu = (source.get("fingerprint") or {}).get("cpu")
    src_scales = (source.get("overhead") or {}).get("kind_scales") or {}
    scales = dict((default.get("overhead") or {}).get("kind_scales") or {})
    took = [k for k in src_scales if k not in scales and cpu
            and str(default["layers"].get(k, {}).get("origin", "")).startswith("assumed:")
            and f"measured on {cpu}" in default["layers"][k]["origin"]]
    if not took or default.get("overhead") is None:
        return []
    overhead = default["overhead"]
    overhead["kind_scales"] = {**scales, **{k: src_scales[k] for k in took}}
    overhead["origin"] = (f"{overhead.get('origin', '')}; kind_scales of {', '.join(took)} assumed: the "
                          f"end-to-end scale of their models, from {where}").lstrip("; ")
    return [f"{', '.join(took)} kind scales"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--from", dest="source", action="append", default=[],
                    help="machine file to copy from (once per runtime; default: the one measured on this machine)")
    ap.add_argument("--dry-run", action="store_true", help="print what would be added, write nothing")
    args = ap.parse_args(argv)
    given: dict[str, tuple[Path, dict[str, Any]]] = {}
    for p in args.source:
        try:
            d = json.loads(Path(p).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            ap.error(f"--from {p}: cannot read a platform file ({e})")
        if not isinstance(d, dict) or d.get("name") not in PLATFORMS:
            ap.error(f"--from {p}: not a platform file of {' or '.join(PLATFORMS)}")
        given[d["name"]] = (Path(p).resolve(), d)
    for platform in PLATFORMS:
        mine = shipped_machine_file(platform)
        src = given[platform][0] if platform in given else Path(mine) if mine else None
        if src is None:
            print(f"{platform}: no machine file of this machine; give --from", file=sys.stderr)
            continue
        source = given[platform][1] if platform in given else json.loads(src.read_text(encoding="utf-8"))
        fp = source.get("fingerprint") or {}
        machine = f"{fp.get('cpu', src.stem)}, {fp.get('cores', '?')} cores"
        where = f"{src.relative_to(ROOT) if src.is_relative_to(ROOT) else src}, measured on {machine}"
        path = ROOT / "platforms" / f"{platform}.json"
        d = json.loads(path.read_text(encoding="utf-8"))
        added = transfer(d, source, where)
        if added and not args.dry_run:
            Platform.from_dict(d, str(path))  # still a valid platform
            write_text(path, dumps_platform(d) + "\n")
        print(f"{path.relative_to(ROOT)}: {'added ' + ', '.join(added) if added else 'has them already'}"
              + (" (dry run)" if args.dry_run and added else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
