"""Machine identity: what a measured platform records about the machine it was measured on, and the check
that this machine is that one (CPU latencies do not transfer between CPUs)."""

from __future__ import annotations

import os
import platform as _platform
import re
from functools import lru_cache
from typing import Any, Mapping

__all__ = ["machine_fingerprint", "machine_slug", "this_machine_slug", "mismatch"]


def machine_fingerprint(threads: int | None = None) -> dict[str, Any]:
    """What identifies the measuring machine: CPU model, core count, inference threads, OS, Python."""
    cpu = _platform.processor() or ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"cpu": cpu or _platform.machine(), "cores": os.cpu_count(), "threads": threads,
            "os": f"{_platform.system()} {_platform.release()}", "python": _platform.python_version()}


def machine_slug(fingerprint: Mapping[str, Any]) -> str:
    """File-name key of a machine: its CPU model and core count, e.g. ``intel-r-xeon-r-processor-2c``."""
    cpu = re.sub(r"[^a-z0-9]+", "-", str(fingerprint.get("cpu", "")).lower()).strip("-") or "unknown-cpu"
    return f"{cpu}-{fingerprint.get('cores')}c"


@lru_cache(maxsize=1)
def this_machine_slug() -> str:
    """`machine_slug` of this machine, read once (``load_platform(name)`` runs on every estimate by name)."""
    return machine_slug(machine_fingerprint())


def mismatch(name: str, fp: Mapping[str, Any]) -> str | None:
    """The warning text for platform ``name`` measured on the machine ``fp`` if this machine differs, else None."""
    here = machine_fingerprint()
    diff = [k for k in ("cpu", "cores") if fp.get(k) is not None and fp.get(k) != here.get(k)]
    if not diff:
        return None
    return (f"platform {name!r} was measured on {fp.get('cpu')} ({fp.get('cores')} cores); this machine is "
            f"{here.get('cpu')} ({here.get('cores')} cores): predictions may not hold here; run "
            f"'annette calibrate --platform {name}' to measure this machine")
