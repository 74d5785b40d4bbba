"""Machine identity: what a measured platform records about the machine it was measured on, and the check
that this machine is that one (CPU latencies do not transfer between CPUs, not even between two CPUs of one
name whose instruction sets differ)."""

from __future__ import annotations

import os
import platform as _platform
import re
from functools import lru_cache
from typing import Any, Mapping

__all__ = ["machine_fingerprint", "machine_slug", "this_machine_slug", "mismatch", "differing_fields", "machine_description", "ISA_FEATURES",
           "IDENTITY"]

#: instruction-set extensions that CPU runtimes (ONNX Runtime's kernels, oneDNN in OpenVINO) dispatch on
ISA_FEATURES = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "avx_vnni", "amx_tile", "amx_bf16",
                "amx_int8")
#: fingerprint fields that identify the machine (``threads``, ``os`` and ``python`` describe the measurement)
IDENTITY = ("cpu", "vendor", "family", "model", "stepping", "isa", "physical_cores", "cores")


@lru_cache(maxsize=1)
def _cpuinfo() -> dict[str, Any]:
    """CPU model name, vendor, family / model / stepping, ISA features and physical cores, as Linux reports
    them in /proc/cpuinfo (empty where there is none)."""
    out: dict[str, Any] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return out
    cores = set()
    for block in text.split("\n\n"):
        kv = {}
        for line in block.splitlines():
            k, sep, v = line.partition(":")
            if sep:
                kv[k.strip()] = v.strip()
        if not kv:
            continue
        cores.add((kv.get("physical id", "0"), kv.get("core id", kv.get("processor", "0"))))
        if out:
            continue
        if "model name" in kv:
            out["cpu"] = kv["model name"]
        if "vendor_id" in kv:
            out["vendor"] = kv["vendor_id"]
        for key, name in (("cpu family", "family"), ("model", "model"), ("stepping", "stepping")):
            if kv.get(key, "").isdigit():
                out[name] = int(kv[key])
        if "flags" in kv:
            flags = set(kv["flags"].split())
            out["isa"] = [f for f in ISA_FEATURES if f in flags]
    if cores:
        out["physical_cores"] = len(cores)
    return out


def machine_fingerprint(threads: int | None = None) -> dict[str, Any]:
    """What identifies the measuring machine: CPU model name, vendor / family / model / stepping, the ISA
    features runtimes dispatch on, physical and logical cores; plus inference threads, OS and Python."""
    info = _cpuinfo()
    fp: dict[str, Any] = {"cpu": info.get("cpu") or _platform.processor() or _platform.machine()}
    fp.update({k: info[k] for k in ("vendor", "family", "model", "stepping", "isa", "physical_cores") if k in info})
    fp.update({"cores": os.cpu_count(), "threads": threads, "os": f"{_platform.system()} {_platform.release()}",
               "python": _platform.python_version()})
    return fp


def machine_slug(fingerprint: Mapping[str, Any]) -> str:
    """File-name key of a machine: its CPU model and core count, e.g. ``intel-r-xeon-r-processor-2c``."""
    cpu = re.sub(r"[^a-z0-9]+", "-", str(fingerprint.get("cpu", "")).lower()).strip("-") or "unknown-cpu"
    return f"{cpu}-{fingerprint.get('cores')}c"


@lru_cache(maxsize=1)
def this_machine_slug() -> str:
    """`machine_slug` of this machine, read once (``load_platform(name)`` runs on every estimate by name)."""
    return machine_slug(machine_fingerprint())


def machine_description(fp: Mapping[str, Any] | None = None) -> str:
    """This machine (or ``fp``) in a few words: CPU model, cores, ISA features, for descriptions."""
    return _describe(machine_fingerprint() if fp is None else fp)


def _describe(fp: Mapping[str, Any]) -> str:
    isa = fp.get("isa")
    isa_text = "ISA not recorded" if isa is None else (" ".join(isa) or "no AVX2")
    return f"{fp.get('cpu')}, {fp.get('cores')} cores, {isa_text}"


def differing_fields(fp: Mapping[str, Any]) -> list[str]:
    """The identity fields that both ``fp`` and this machine record and that differ (empty: the same machine
    as far as ``fp`` tells)."""
    here = machine_fingerprint()
    return [k for k in IDENTITY if fp.get(k) is not None and here.get(k) is not None and fp[k] != here[k]]


def mismatch(name: str, fp: Mapping[str, Any]) -> str | None:
    """The one-line warning for platform ``name`` measured on the machine ``fp`` unless this machine is that
    machine: every identity field both record is equal, and the file records the ISA features."""
    here = machine_fingerprint()
    differ = differing_fields(fp)
    fix = (f"run 'annette adapt -p {name}' (a minute) or 'annette calibrate --platform {name}' (about half an "
           "hour) to fit this machine")
    if differ:
        return (f"platform {name!r} was measured on another machine ({_describe(fp)}; this one: {_describe(here)}; "
                f"differs in {', '.join(differ)}): predictions may not hold here; {fix}")
    if "isa" in here and fp.get("isa") is None:
        return (f"platform {name!r} does not record the instruction set of the machine it was measured on "
                f"({_describe(fp)}), so it may not be this one ({_describe(here)}): predictions may not hold "
                f"here; {fix}")
    return None
