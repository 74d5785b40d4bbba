"""Give the CPU platform files the fusion rules of multi-layer sweeps their calibration did not measure, learned
from a short sweep of those here.

Run from the repository root (then ``scripts/add_assumed_cpu_mapping.py`` carries them into the default files)::

    python scripts/add_measured_cpu_rules.py [--configs 50] [--suite preact] [--file platforms/ort-cpu.json]
        [--dry-run]

Why: a fusion rule is learned only from a sweep that holds the pair. The shipped files were calibrated before
the ``preact`` suite (a DenseNet layer: concat, BatchNorm, ReLU, conv) joined the plans, so they have no
BatchNorm+Relu rule, and OpenVINO runs such a ReLU inside the BatchNorm: DenseNet-121's 121 ReLUs were priced
4.6 ms of 42 ms, measured 0. And before the ``residual`` sweep with ``post="relu"`` (paths that end in a ReLU
before the add, as NAS-Bench-101 cells sum them): both runtimes fuse a residual Add into the convolution before it
as ``act(conv + z)``, so never after its ReLU, and the files' Conv+Add rule, learned without such pairs, fused
every one (a NAS-Bench-101 cell's adds, ~4% of its time, priced at 0). ``annette calibrate`` sweeps both now;
this adds what it would have learned. And before the ``fc_act`` suite (a classifier's fully connected layer and
its activation): both runtimes run the ReLU of AlexNet's and VGG's heads inside the fully connected layer.

Steps, per runtime (``ort-cpu``, ``openvino-cpu``): ``--configs`` configurations of each sweep (`SWEEPS`) are
measured per layer (the hardware module and settings of ``annette calibrate``: one thread), the fusion examples are
taken as the model generator takes them (`annette_torch.fit.data.fusion_examples`, with the file's pattern folds),
and `annette_torch.fit.mapping_fit.fit_mapping` learns rules from them. A pair fused in every example that the
file lacks is appended to its rules; a pair whose learned rules test the fused group (`mapping.GROUP_ATTRS`, which
the file's rules for it could not) replaces the file's rules for that pair, in their place. Origins name the
sweeps, the machine and the date. The files: each runtime's file measured on this machine, or those given with
``--file``; in a file measured on another machine the rules are marked ``assumed:`` (they are the runtime's, not
the CPU's). Other pairs fused only sometimes are left to ``annette calibrate``'s decision trees. Files are
validated and written atomically.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Collection

ROOT = Path(__file__).resolve().parent.parent
PLATFORMS = ("ort-cpu", "openvino-cpu")
#: sweeps (suite, options) the shipped files were calibrated without
SWEEPS: tuple[tuple[str, dict[str, str]], ...] = (("preact", {}), ("residual", {}), ("residual", {"post": "relu"}),
                                                  ("fc_act", {}))


def measure_rules(platform: str, sweeps: tuple[tuple[str, dict[str, str]], ...], configs: int,
                  folds: Collection[tuple[str, ...]]) -> dict[tuple[str, ...], list[dict]]:
    """Per set of pattern ``folds`` (the files' own), the rules (as platform-file dicts) that ``configs``
    configurations of each of ``sweeps``, measured here on ``platform`` once, teach: the always-fused ones and
    those testing the fused group (`mapping.GROUP_ATTRS`)."""
    from annette_torch.bench.store import Store
    from annette_torch.bench.suites import SUITES as ALL
    from annette_torch.bench.sweep import run_sweep
    from annette_torch.fit.calibrate import suite_options, sweep_runner
    from annette_torch.fit.data import fusion_examples, load_measured
    from annette_torch.fit.mapping_fit import fit_mapping
    from annette_torch.mapping import GROUP_ATTRS
    from annette_torch.platform.machine import machine_description

    runner, kw = sweep_runner(platform)
    with tempfile.TemporaryDirectory(prefix="annette-rules-") as tmp, Store(os.path.join(tmp, "m.sqlite")) as st:
        for suite, opts in sweeps:
            cfgs = ALL[suite].configs(n=configs, seed=0, options={**(suite_options(platform, suite) or {}), **opts})
            run_sweep(st, platform, suite, cfgs, runner, kw, iterations=20, warmup=3, budget_s=600.0)
        measured = load_measured(st, platform, suites=sorted({s for s, _ in sweeps}))
    what = ", ".join(s + ("[" + ",".join(f"{k}={v}" for k, v in o.items()) + "]" if o else "") for s, o in sweeps)
    out: dict[tuple[str, ...], list[dict]] = {}
    for f in folds:
        model, _ = fit_mapping(fusion_examples(measured, f), folds=f)
        out[f] = [{**rule.to_dict(), "origin": f"{rule.origin} ({what}; measured on {machine_description()} on "
                                              f"{datetime.date.today()})"}
                  for rule in model.rules
                  if rule.origin.startswith("fused in 100%") or any(c.attr in GROUP_ATTRS for c in rule.when)]
    return out


def _pair(name: str) -> str:
    """The type pair a rule's name stands for (``Conv+Add#0`` -> ``Conv+Add``)."""
    return name.split("#")[0]


def add_rules(d: dict[str, Any], rules: list[dict], assumed: bool = False) -> list[str]:
    """Into the platform dict ``d``: the ``rules`` of a pair they test the fused group of replace its rules for
    that pair, in their place; the others are appended where it has no rule for their pair. With ``assumed``
    their origin says they were measured elsewhere. Returns the names added or replaced."""
    from annette_torch.mapping import GROUP_ATTRS

    if assumed:
        rules = [{**r, "origin": f"assumed: {r['origin']}"} for r in rules]
    have = d["mapping"].setdefault("rules", [])
    group = {_pair(r["name"]) for r in rules if any(c["attr"] in GROUP_ATTRS for c in r.get("when", []))}
    # (the file's primaries stay with a replaced pair: its calibration saw more, e.g. a conv that absorbed a pool)
    primaries: dict[str, list[str]] = {}
    for r in have:
        primaries.setdefault(_pair(r["name"]), []).extend(r["primary"])
    out: list[dict] = []
    for r in have:
        pair = _pair(r["name"])
        if pair not in group:
            out.append(r)
        elif pair in primaries:  # the pair's first rule: the learned ones take its place
            prim = primaries.pop(pair)
            out += [{**n, "primary": list(dict.fromkeys(n["primary"] + prim))}
                    for n in rules if _pair(n["name"]) == pair]
    pairs = {_pair(r["name"]) for r in out}
    out += [r for r in rules if _pair(r["name"]) not in pairs]
    d["mapping"]["rules"] = out
    return [r["name"] for r in out if r not in have]


def main(argv: list[str] | None = None) -> int:
    from annette_torch.platform import Platform
    from annette_torch.platform.machine import differing_fields
    from annette_torch.platform.registry import shipped_machine_file

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", type=int, default=50, help="configurations per sweep (default 50, as the quick plan)")
    ap.add_argument("--suite", action="append", choices=sorted({s for s, _ in SWEEPS}),
                    help="suite whose sweeps to measure (default: all of them)")
    ap.add_argument("--file", action="append", type=Path,
                    help="platform file to update (default: each runtime's file measured on this machine)")
    ap.add_argument("--dry-run", action="store_true", help="print what would be added, write nothing")
    args = ap.parse_args(argv)
    sweeps = tuple((s, o) for s, o in SWEEPS if not args.suite or s in args.suite)
    targets: dict[str, list[Path]] = {p: [] for p in PLATFORMS}
    for path in args.file or []:
        name = json.loads(path.read_text(encoding="utf-8")).get("name")
        if name not in targets:
            print(f"{path}: not a CPU runtime's platform file ({', '.join(PLATFORMS)})", file=sys.stderr)
            return 1
        targets[name].append(path)
    if not args.file:
        for platform in PLATFORMS:
            mine = shipped_machine_file(platform)
            if mine is None:
                print(f"{platform}: no machine file of this machine (run annette calibrate, or give --file)",
                      file=sys.stderr)
            else:
                targets[platform].append(Path(mine))
    for platform, paths in targets.items():
        if not paths:
            continue
        docs = {p: json.loads(p.read_text(encoding="utf-8")) for p in paths}
        learned = measure_rules(platform, sweeps, args.configs,
                                {tuple(d["mapping"].get("folds", ())) for d in docs.values()})
        for path, d in docs.items():
            assumed = bool(differing_fields(d.get("fingerprint") or {}))
            added = add_rules(d, learned[tuple(d["mapping"].get("folds", ()))], assumed)
            if added and not args.dry_run:
                Platform.from_dict(d, str(path)).save(path)  # validated, written atomically
            print(f"{path.name}: {'added ' + ', '.join(added) if added else 'nothing new'}"
                  f"{' (assumed)' * (assumed and bool(added))}{' (dry run)' * args.dry_run}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
