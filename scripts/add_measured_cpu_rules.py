"""Give this machine's CPU platform files the fusion rules of multi-layer suites their calibration did not
measure, learned from a short sweep of those suites here.

Run from the repository root (then ``scripts/add_assumed_cpu_mapping.py`` carries them into the default files)::

    python scripts/add_measured_cpu_rules.py [--configs 50] [--suite preact] [--dry-run]

Why: a fusion rule is learned only from a suite that holds the pair. The shipped machine files were calibrated
before the ``preact`` suite (a DenseNet layer: concat, BatchNorm, ReLU, conv) joined the plans, so they have no
BatchNorm+Relu rule, and OpenVINO runs such a ReLU inside the BatchNorm: DenseNet-121's 121 ReLUs were priced
4.6 ms of 42 ms, measured 0. ``annette calibrate`` sweeps the suite now; this adds what it would have learned.

Steps, per runtime (``ort-cpu``, ``openvino-cpu``): ``--configs`` configurations of each suite are measured per
layer (the hardware module and settings of ``annette calibrate``: one thread), the fusion examples are taken as
the model generator takes them (`annette_torch.fit.data.fusion_examples`, with the file's pattern folds), and the
pairs fused in every example (`annette_torch.fit.mapping_fit.fit_mapping`'s "fused in 100% of N measured pairs")
that the runtime's machine file of this machine lacks are appended to its rules, their origin naming the suite
and date. A pair fused only sometimes is left to ``annette calibrate``'s decision trees. Files are validated and
written atomically.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PLATFORMS = ("ort-cpu", "openvino-cpu")
#: suites the shipped machine files were calibrated without
SUITES = ("preact",)


def measure_rules(platform: str, suites: tuple[str, ...], configs: int, folds: tuple[str, ...]) -> list[dict]:
    """The always-fused rules (as platform-file dicts) that ``configs`` configurations of each of ``suites``,
    measured here on ``platform``, teach."""
    from annette_torch.bench.store import Store
    from annette_torch.bench.suites import SUITES as ALL
    from annette_torch.bench.sweep import run_sweep
    from annette_torch.fit.calibrate import suite_options, sweep_runner
    from annette_torch.fit.data import fusion_examples, load_measured
    from annette_torch.fit.mapping_fit import fit_mapping

    runner, kw = sweep_runner(platform)
    rules: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="annette-rules-") as tmp, Store(os.path.join(tmp, "m.sqlite")) as st:
        for suite in suites:
            cfgs = ALL[suite].configs(n=configs, seed=0, options=suite_options(platform, suite))
            run_sweep(st, platform, suite, cfgs, runner, kw, iterations=20, warmup=3, budget_s=600.0)
            model, _ = fit_mapping(fusion_examples(load_measured(st, platform, suites=[suite]), folds), folds=folds)
            for rule in model.rules:
                if rule.origin.startswith("fused in 100%"):
                    d = rule.to_dict()
                    d["origin"] = (f"{rule.origin} ({suite} suite, measured on this machine on "
                                   f"{datetime.date.today().isoformat()})")
                    rules.append(d)
    return rules


def add_rules(d: dict[str, Any], rules: list[dict]) -> list[str]:
    """Append to the platform dict ``d`` the ``rules`` whose name it lacks; returns their names."""
    have = {r["name"] for r in d["mapping"].get("rules", [])}
    new = [r for r in rules if r["name"] not in have]
    d["mapping"].setdefault("rules", []).extend(new)
    return [r["name"] for r in new]


def main(argv: list[str] | None = None) -> int:
    from annette_torch.platform import Platform
    from annette_torch.platform.registry import shipped_machine_file

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", type=int, default=50, help="configurations per suite (default 50, as the quick plan)")
    ap.add_argument("--suite", action="append", choices=SUITES, help="suite to measure (default: all of them)")
    ap.add_argument("--dry-run", action="store_true", help="print what would be added, write nothing")
    args = ap.parse_args(argv)
    for platform in PLATFORMS:
        mine = shipped_machine_file(platform)
        if mine is None:
            print(f"{platform}: no machine file of this machine (run annette calibrate)", file=sys.stderr)
            continue
        path = Path(mine)
        d = json.loads(path.read_text(encoding="utf-8"))
        folds = tuple(d["mapping"].get("folds", ()))
        added = add_rules(d, measure_rules(platform, tuple(args.suite or SUITES), args.configs, folds))
        if added and not args.dry_run:
            Platform.from_dict(d, str(path)).save(path)  # validated, written atomically
        print(f"{path.name}: {'added ' + ', '.join(added) if added else 'nothing new'}{' (dry run)' * args.dry_run}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
