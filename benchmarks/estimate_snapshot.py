"""Snapshot of every validation network's estimate on every shipped platform file, to prove a refactoring
changes no number.

    python benchmarks/estimate_snapshot.py --write before.json      # on the old commit
    python benchmarks/estimate_snapshot.py --compare before.json    # on the new one: exit 1 on any difference

A snapshot holds, per (platform file, network), the layer-sum time, the end-to-end time where the platform
has one, every layer's time and model label, and both `estimate_many` figures (latency and device time) of
the same networks scored as one batch; floats are compared exactly (their repr), or within a relative
tolerance with ``--rtol``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from annette_torch import estimate, estimate_many, load_platform

try:
    from annette_torch.validate.networks import validation_networks
    from annette_torch.platform.registry import platform_dir
except ImportError:  # the layout before the package split
    from annette_torch.validate import validation_networks
    from annette_torch.platform import platform_dir


def snapshot() -> dict[str, dict[str, object]]:
    """(platform file relative to the shipped folder) -> network name -> its numbers."""
    nets = validation_networks(check_export=False)
    root = platform_dir()
    out: dict[str, dict[str, object]] = {}
    for path in sorted(root.rglob("*.json")):
        plat = load_platform(path)
        rows: dict[str, object] = {}
        many = {kind: estimate_many([v.network for v in nets], plat, latency=kind) for kind in ("latency", "device")}
        for j, v in enumerate(nets):
            e = estimate(v.network, plat)
            device = getattr(e, "device_ms", None)
            rows[v.name] = {
                "total_ms": repr(e.total_ms if device is None else device),
                "e2e_ms": repr(e.e2e_ms),
                "layers": [[repr(float(t)), m] for t, m in zip(e.time_ms, e.model_used)],
                "many": [repr(float(many[k][j])) for k in ("latency", "device")],
            }
        out[str(path.relative_to(root))] = rows
    return out


def _same(a: object, b: object, rtol: float) -> bool:
    """Equal snapshots: the same structure and labels, numbers (stored as reprs) within ``rtol`` relative."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k], rtol) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y, rtol) for x, y in zip(a, b))
    if a == b:
        return True
    try:
        x, y = float(a), float(b)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return abs(x - y) <= rtol * max(abs(x), abs(y))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--write", metavar="FILE", help="write the snapshot to FILE")
    g.add_argument("--compare", metavar="FILE", help="compare with a snapshot written earlier")
    ap.add_argument("--rtol", type=float, default=0.0,
                    help="relative tolerance for numbers (default 0: identical reprs)")
    a = ap.parse_args()
    t0 = time.perf_counter()
    snap = snapshot()
    n = sum(len(v) for v in snap.values())
    if a.write:
        Path(a.write).write_text(json.dumps(snap), encoding="utf-8")
        print(f"{n} estimates on {len(snap)} platform files written to {a.write} ({time.perf_counter() - t0:.0f} s)")
        return 0
    ref = json.loads(Path(a.compare).read_text(encoding="utf-8"))
    diffs = []
    for plat in sorted(set(ref) | set(snap)):
        for net in sorted(set(ref.get(plat, {})) | set(snap.get(plat, {}))):
            if not _same(ref.get(plat, {}).get(net), snap.get(plat, {}).get(net), a.rtol):
                diffs.append(f"{plat} {net}")
    print(f"{n} estimates on {len(snap)} platform files: {len(diffs)} differ from {a.compare}")
    for d in diffs[:20]:
        print("  differs:", d)
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
