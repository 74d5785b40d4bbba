"""ZCU102 hardware module (Xilinx DPU ``DPUCZDX8G``, B4096): job folders for the Vitis AI toolchain and the
board, and ingestion of the profiler reports copied back.

Compiling needs the Vitis AI docker and running needs the board, neither of which is on the machine that
generates benchmarks. So `VitisRunner.prepare` writes one self-contained *job folder* per benchmark::

    <workdir>/<name>/
        model.onnx      the benchmark (static shapes)
        job.json        name, DPU arch, iterations / warm-up, fine-grained flag
        params.env      ITERATIONS / WARMUP / FINE_GRAINED defaults read by both scripts
        arch.json       {"target": "<arch>"} (used when the arch is not the ZCU102 default)
        quantize.py     vai_q_onnx.quantize_static with random calibration data
        host.sh         host (Vitis AI docker): quantize.py, then vai_c_xir -> compiled/<net>.xmodel
        run_dpu.py      board: VART runner, N timed runs after warm-up -> reports/vart_timing.json
        board.sh        board: run_dpu.py under vaitrace -> reports/{profile_summary.csv, vart_trace.csv,
                        vaitrace_summary.txt, vart_timing.json}
        README.txt      the steps

`VitisRunner.profile` raises `BoardRequiredError` until reports are in the job folder; then it parses them.
`ingest` turns report files or (copied-back) job folders into per-benchmark `NodeRecord` lists.
See ``docs/zcu102-benchmarking.md`` for the step-by-step use and for what was and was not tested.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from ...atomic import atomic_write, write_text
from ...errors import AnnetteError
from ..parsers.dpu import DpuReport, ReportError, UnknownLayoutError, detect_format, merge_vtf_with_summary, parse_text, read_report_text
from ..records import NodeRecord
from .base import Profile, Runner, register_runner

__all__ = ["VitisRunner", "BoardRequiredError", "IngestedRun", "ingest", "collect", "load_job_report",
           "write_run_params", "DEFAULT_ARCH", "ZCU102_ARCH_JSON"]

log = logging.getLogger(__name__)

DEFAULT_ARCH = "DPUCZDX8G_ISA1_B4096"
ZCU102_ARCH_JSON = "/opt/vitis_ai/compiler/arch/DPUCZDX8G/ZCU102/arch.json"
JOB_FORMAT = "annette-vitis-job"
REPORT_SUFFIXES = {".csv", ".txt", ".log", ".json", ".out"}
NOT_REPORTS = {"job.json", "arch.json", "README.txt", "params.env", "annette-job.json"}
# when a folder holds several layouts: per-run traces first (real medians / std), then summaries
PREFERENCE = ("vaitrace-vtf", "vaitrace-csv", "vaitrace-txt", "dnndk", "vart-timing")
_GENERIC_STEMS = {"profile_summary", "vart_trace", "vaitrace_summary", "vart_timing", "summary", "report",
                  "profile", "dnndk_profile", "log"}


class BoardRequiredError(AnnetteError):
    """The benchmark must be compiled on a Vitis AI host and run on the board before it can be profiled."""


def _net_name(name: str) -> str:
    n = re.sub(r"[^0-9A-Za-z_]+", "_", name).strip("_") or "net"
    return n if n[0].isalpha() else f"net_{n}"


def _job_name(name: str) -> str:
    return re.sub(r"[^0-9A-Za-z_.-]+", "_", name).strip("._") or "model"


# ------------------------------------------------------------------------------------------ templates
# Placeholders are @NAME@-style (the scripts are full of $ and braces).

_HOST_SH = r"""#!/usr/bin/env bash
# Host side of annette-torch benchmark "@NAME@" for the ZCU102 (DPU @ARCH@): quantise and compile.
# Run inside the Vitis AI docker (3.5, a conda env with vai_q_onnx and vai_c_xir), from anywhere:
#     bash host.sh
# FINE_GRAINED=1 compiles in debug mode (--options '{"mode": "debug"}') for vaitrace --fine_grained
# (Vitis AI 1.3-2.5). ARCH_JSON=... overrides the DPU description file.
set -euo pipefail
cd "$(dirname "$0")"
[ -f params.env ] && . ./params.env
ARCH_JSON="${ARCH_JSON:-@ARCH_JSON@}"
for tool in python3 vai_c_xir; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "host.sh: '$tool' not found: run this inside the Vitis AI docker (conda activate the env)" >&2; exit 2; }
done
[ -f "$ARCH_JSON" ] || { echo "host.sh: DPU arch file $ARCH_JSON not found (set ARCH_JSON=...)" >&2; exit 2; }
python3 quantize.py model.onnx quantized.onnx
OPTS=()
if [ "${FINE_GRAINED:-0}" = "1" ]; then OPTS=(--options '{"mode": "debug"}'); fi
vai_c_xir -x quantized.onnx -a "$ARCH_JSON" -o compiled -n @NET@ ${OPTS[@]+"${OPTS[@]}"}
[ -f compiled/@NET@.xmodel ] || { echo "host.sh: vai_c_xir wrote no compiled/@NET@.xmodel" >&2; exit 1; }
echo "host.sh: compiled/@NET@.xmodel ready; copy this folder to the board and run board.sh there"
"""

_BOARD_SH = r"""#!/bin/sh
# Board side of annette-torch benchmark "@NAME@": run compiled/@NET@.xmodel on the ZCU102's DPU with VART,
# under vaitrace when it is installed. Run as root on the board (Vitis AI runtime image), from anywhere:
#     sh board.sh
# Environment: ITERATIONS, WARMUP (default from params.env), NO_TRACE=1 (plain timing, no vaitrace),
# FINE_GRAINED=1 (vaitrace --fine_grained: Vitis AI 1.3-2.5, xmodel compiled with FINE_GRAINED=1),
# VAITRACE_TXT (text summary flag: --txt_summary in 2.x/3.x, --txt in 1.4), TRACE_TIMEOUT (s), BOARD_PYTHON.
set -eu
cd "$(dirname "$0")"
[ -f params.env ] && . ./params.env
ITERATIONS="${ITERATIONS:-20}"
WARMUP="${WARMUP:-3}"
TRACE_TIMEOUT="${TRACE_TIMEOUT:-300}"
VAITRACE_TXT="${VAITRACE_TXT:---txt_summary}"
PYTHON="${BOARD_PYTHON:-@PYTHON@}"
XMODEL="compiled/@NET@.xmodel"
[ -f "$XMODEL" ] || { echo "board.sh: $XMODEL missing: run host.sh on the Vitis AI host first" >&2; exit 2; }
rm -rf reports
mkdir -p reports
cd reports
ARGS="--xmodel ../$XMODEL --iterations $ITERATIONS --warmup $WARMUP --out vart_timing.json"
if [ "${NO_TRACE:-0}" != "1" ] && command -v vaitrace >/dev/null 2>&1; then
  FG=""
  FGR=""
  if [ "${FINE_GRAINED:-0}" = "1" ]; then FG="--fine_grained"; FGR="--fine-grained"; fi
  # vaitrace -p runs the Python script itself; its reports land in the working directory (reports/)
  vaitrace -p -t "$TRACE_TIMEOUT" $VAITRACE_TXT -o vaitrace_summary.txt $FG ../run_dpu.py $ARGS --traced $FGR
else
  echo "board.sh: vaitrace not used (NO_TRACE=1 or not installed): wall-clock timing only" >&2
  "$PYTHON" ../run_dpu.py $ARGS
fi
echo "board.sh: reports in $(pwd):"
ls
echo "board.sh: copy that folder back and run: annette bench ingest --platform zcu102 <copied folder>"
"""

_QUANTIZE_PY = r'''"""Quantise an ONNX model for the DPU with Vitis AI's ONNX quantiser, on random calibration data.

Written by annette-torch for benchmark "@NAME@". Usage (Vitis AI docker): python3 quantize.py IN OUT
Timing does not depend on the calibration data, so random inputs of the model's (static) shapes are used.
"""
import sys

import numpy as np
import onnx
import vai_q_onnx
from onnxruntime.quantization import CalibrationDataReader

N_CALIB = 8
SEED = 0


def np_dtype(elem_type):
    try:
        return onnx.helper.tensor_dtype_to_np_dtype(elem_type)
    except AttributeError:  # onnx < 1.13
        return onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[elem_type]


class RandomReader(CalibrationDataReader):
    def __init__(self, model_path, n=N_CALIB, seed=SEED):
        model = onnx.load(model_path)
        weights = {t.name for t in model.graph.initializer}
        rng = np.random.default_rng(seed)
        specs = []
        for vi in model.graph.input:
            if vi.name in weights:
                continue
            shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
            if not shape or min(shape) <= 0:
                sys.exit("quantize.py: input %r has no static shape %s" % (vi.name, shape))
            specs.append((vi.name, shape, np_dtype(vi.type.tensor_type.elem_type)))
        self.data = [{name: rng.standard_normal(shape).astype(dt) for name, shape, dt in specs} for _ in range(n)]
        self.rewind()

    def get_next(self):
        return next(self.it, None)

    def rewind(self):
        self.it = iter(self.data)


def main(src, dst):
    vai_q_onnx.quantize_static(
        src,
        dst,
        RandomReader(src),
        quant_format=vai_q_onnx.QuantFormat.QDQ,
        calibrate_method=vai_q_onnx.PowerOfTwoMethod.NonOverflow,
        activation_type=vai_q_onnx.QuantType.QUInt8,
        weight_type=vai_q_onnx.QuantType.QInt8,
        enable_dpu=True,
        extra_options={"ActivationSymmetric": True},
    )
    sys.stdout.write("quantize.py: wrote %s\n" % dst)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python3 quantize.py IN.onnx OUT.onnx")
    main(sys.argv[1], sys.argv[2])
'''

_RUN_DPU_PY = r'''"""Run a compiled xmodel on the DPU with VART: warm-up, then N timed runs of every DPU subgraph.

Written by annette-torch for benchmark "@NAME@". Writes a JSON file ({"format": "annette-vart-timing",
"subgraphs": {name: [ms per run]}, "e2e_ms": [ms per run]}) with the wall-clock time of execute_async +
wait per subgraph; vaitrace (when board.sh uses it) adds its own reports next to it. Inputs are random:
DPU timing does not depend on the data. CPU subgraphs of the model are not executed.
"""
import argparse
import json
import sys
import time

import numpy as np
import vart
import xir


def dpu_subgraphs(graph):
    root = graph.get_root_subgraph()
    if root.is_leaf:
        return []
    return [s for s in root.toposort_child_subgraph()
            if s.has_attr("device") and s.get_attr("device").upper() == "DPU"]


def buffers(tensors, rng):
    out = []
    for t in tensors:
        dims = tuple(t.dims)
        if "float" in str(getattr(t, "dtype", "")).lower():
            out.append(rng.standard_normal(dims).astype(np.float32))
        else:  # fixed-point DPU tensors (xint8)
            out.append(rng.integers(-128, 128, size=dims, dtype=np.int8))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--xmodel", required=True)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--out", default="vart_timing.json")
    ap.add_argument("--traced", action="store_true", help="running under vaitrace (recorded in the output)")
    ap.add_argument("--fine-grained", action="store_true", help="vaitrace --fine_grained (recorded)")
    args = ap.parse_args()
    graph = xir.Graph.deserialize(args.xmodel)
    subgraphs = dpu_subgraphs(graph)
    if not subgraphs:
        sys.exit("run_dpu.py: no DPU subgraph in %s" % args.xmodel)
    rng = np.random.default_rng(0)
    jobs = []
    for sg in subgraphs:
        runner = vart.Runner.create_runner(sg, "run")
        jobs.append((sg.get_name(), runner, buffers(runner.get_input_tensors(), rng),
                     buffers(runner.get_output_tensors(), rng)))

    def run_once(times):
        t_all = time.perf_counter()
        for name, runner, inputs, outputs in jobs:
            t0 = time.perf_counter()
            job = runner.execute_async(inputs, outputs)
            runner.wait(job)
            if times is not None:
                times[name].append((time.perf_counter() - t0) * 1e3)
        return (time.perf_counter() - t_all) * 1e3

    for _ in range(args.warmup):
        run_once(None)
    per = {name: [] for name, _, _, _ in jobs}
    e2e = [run_once(per) for _ in range(args.iterations)]
    doc = {"format": "annette-vart-timing", "version": 1, "xmodel": args.xmodel,
           "iterations": args.iterations, "warmup": args.warmup, "traced": args.traced,
           "fine_grained": args.fine_grained,
           "subgraphs": per, "e2e_ms": e2e}
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    sys.stdout.write("run_dpu.py: %d DPU subgraph(s), median %.3f ms per run -> %s\n"
                     % (len(jobs), float(np.median(e2e)), args.out))


if __name__ == "__main__":
    main()
'''

_README = """annette-torch benchmark "@NAME@" for the ZCU102 (DPU @ARCH@)

1. Host, inside the Vitis AI docker:      bash host.sh          -> compiled/@NET@.xmodel
2. Copy this folder to the board:         scp -r @NAME@ root@<board-ip>:~/
3. Board, as root:                        sh ~/@NAME@/board.sh  -> reports/
4. Copy reports/ back into this folder:   scp -r root@<board-ip>:~/@NAME@/reports .
5. Ingest:                                annette bench ingest --platform zcu102 <this folder>

Iterations / warm-up: params.env (or ITERATIONS=... WARMUP=... sh board.sh).
See docs/zcu102-benchmarking.md in annette-torch.
"""


def _fill(template: str, **values: str) -> str:
    for k, v in values.items():
        template = template.replace(f"@{k}@", v)
    return template


# ------------------------------------------------------------------------------------------- runner

@register_runner
class VitisRunner(Runner):
    """ZCU102 hardware module: writes job folders (host + board scripts), parses the reports they produce.

    Parameters are stored as given (no work here): ``arch`` is the DPU target (``DPUCZDX8G_ISA1_B4096`` is
    the ZCU102 TRD's B4096 for Vitis AI 2.x/3.x), ``workdir`` the folder that receives the job folders
    (default ``./zcu102-jobs``), ``board_python`` the interpreter used on the board when vaitrace is absent,
    ``fine_grained`` makes the jobs compile in debug mode and trace with ``vaitrace --fine_grained`` (one
    record per DPU layer; Vitis AI 1.3-2.5 only, and it adds scheduling overhead per layer).
    """

    name = "vitis"
    uses_host_cpu = False  # the board measures; its host only compiles and copies

    def __init__(self, arch: str = DEFAULT_ARCH, workdir: str | None = None, board_python: str = "python3",
                 fine_grained: bool = False):
        self.arch = arch
        self.workdir = workdir
        self.board_python = board_python
        self.fine_grained = fine_grained

    # -------------------------------------------------------------------------------- interface
    def toolchain(self) -> dict[str, Any]:
        return {"toolchain": "vitis-ai", "arch": self.arch, "board": "ZCU102",
                "note": "off-machine: prepare() writes a job folder (host.sh: vai_q_onnx + vai_c_xir; "
                        "board.sh: VART under vaitrace); results come back with ingest()"}

    def prepare(self, model: onnx.ModelProto, name: str | None = None) -> str:
        """Write the job folder for ``model`` and return its path.

        ``name`` defaults to the ONNX graph name. An existing folder of the same name is reused when it
        holds the same model (so reports already copied back are kept), otherwise a content-hash suffix
        keeps both.
        """
        self._check_arch()
        if not isinstance(model, onnx.ModelProto):
            raise AnnetteError(f"VitisRunner.prepare needs an onnx.ModelProto, not {type(model).__name__}")
        _check_static_inputs(model)
        blob = model.SerializeToString()
        digest = hashlib.sha1(blob).hexdigest()
        base = _job_name(name or model.graph.name or "model")
        root = Path(self.workdir) if self.workdir else Path.cwd() / "zcu102-jobs"
        job = root / base
        existing = job / "model.onnx"
        if existing.is_file() and hashlib.sha1(existing.read_bytes()).hexdigest() != digest:
            job = root / f"{base}-{digest[:8]}"
        try:
            job.mkdir(parents=True, exist_ok=True)
            if not (job / "model.onnx").is_file():
                with atomic_write(job / "model.onnx", "wb") as f:
                    f.write(blob)
            self._write_scripts(job, job.name)
            if not (job / "params.env").is_file():
                write_run_params(job, iterations=20, warmup=3)
            else:  # keep the iterations chosen earlier, refresh the fine-grained flag
                m = json.loads((job / "job.json").read_text())
                write_run_params(job, iterations=int(m.get("iterations", 20)), warmup=int(m.get("warmup", 3)))
        except OSError as e:
            raise AnnetteError(f"cannot write the job folder {job}: {e.strerror or e}") from None
        log.info("vitis: job folder %s (run host.sh on a Vitis AI host, board.sh on the ZCU102)", job)
        return str(job)

    def profile(self, prepared: Any, iterations: int = 20, warmup: int = 3, max_s: float | None = None) -> Profile:
        """Parse the reports in the job folder; `BoardRequiredError` while there are none (``max_s`` has no
        effect: the board script times the iterations asked for).

        Without reports the requested ``iterations`` / ``warmup`` are written to the job's ``params.env``
        (the board script's defaults) before raising.
        """
        if iterations < 1 or warmup < 0:
            raise AnnetteError(f"iterations must be >= 1 and warmup >= 0 (got {iterations}, {warmup})")
        job = Path(str(prepared))
        if _read_job_meta(job) is None:
            raise AnnetteError(f"{job} is not a vitis job folder (no job.json): use VitisRunner.prepare()")
        report = load_job_report(job)
        if report is None:
            write_run_params(job, iterations=iterations, warmup=warmup)
            raise BoardRequiredError(
                f"benchmark {job.name!r} needs the ZCU102: run {job}/host.sh on a Vitis AI host and board.sh "
                f"on the board, copy reports/ back into {job}, then `annette bench ingest --platform zcu102 {job}`")
        return _to_profile(report)

    def parse(self, profile: Profile) -> list[NodeRecord]:
        if isinstance(profile.raw, DpuReport):
            return [replace(r, extra=dict(r.extra)) for r in profile.raw.records]
        return super().parse(profile)

    def ingest(self, paths: list[str]) -> list[tuple[str, list[NodeRecord]]]:
        return ingest(paths)

    # -------------------------------------------------------------------------------- helpers
    def _check_arch(self) -> None:
        if not re.fullmatch(r"DPU[A-Z0-9]+_ISA\d+_[A-Z0-9_]+", self.arch or ""):
            raise AnnetteError(f"unknown DPU arch {self.arch!r} (expected e.g. {DEFAULT_ARCH!r})")
        if not re.fullmatch(r"[\w./+-]+", self.board_python or ""):
            raise AnnetteError(f"board_python must be a command name or path, not {self.board_python!r}")

    def _write_scripts(self, job: Path, name: str) -> None:
        net = _net_name(name)
        arch_json = ZCU102_ARCH_JSON if self.arch == DEFAULT_ARCH else "arch.json"
        values = {"NAME": name, "NET": net, "ARCH": self.arch, "ARCH_JSON": arch_json,
                  "PYTHON": self.board_python}
        files = {"host.sh": _HOST_SH, "board.sh": _BOARD_SH, "quantize.py": _QUANTIZE_PY,
                 "run_dpu.py": _RUN_DPU_PY, "README.txt": _README}
        for fname, tpl in files.items():
            p = job / fname
            write_text(p, _fill(tpl, **values))
            if fname.endswith(".sh"):
                p.chmod(0o755)
        write_text(job / "arch.json", json.dumps({"target": self.arch}) + "\n")
        meta_path = job / "job.json"
        meta = _read_job_meta(job) or {}
        meta.update({"format": JOB_FORMAT, "version": 1, "name": name, "runner": self.name, "arch": self.arch,
                     "arch_json": arch_json, "net": net, "model": "model.onnx",
                     "xmodel": f"compiled/{net}.xmodel", "board_python": self.board_python})
        meta["fine_grained"] = bool(self.fine_grained)
        write_text(meta_path, json.dumps(meta, indent=2) + "\n")


def _check_static_inputs(model: onnx.ModelProto) -> None:
    weights = {t.name for t in model.graph.initializer}
    for vi in model.graph.input:
        if vi.name in weights:
            continue
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in vi.type.tensor_type.shape.dim]
        if not dims or min(dims) <= 0:
            raise AnnetteError(f"input {vi.name!r} has no static shape ({dims}): the DPU compiler needs fixed "
                               "shapes (batch 1)")


def write_run_params(job: str | os.PathLike, iterations: int, warmup: int) -> None:
    """Set a job's timed runs and warm-up runs: ``params.env`` (sourced by board.sh) and job.json."""
    job = Path(job)
    fg = "0"
    meta_path = job / "job.json"
    if meta_path.is_file():
        meta = json.loads(meta_path.read_text())
        fg = "1" if meta.get("fine_grained") else "0"
        meta.update({"iterations": iterations, "warmup": warmup})
        write_text(meta_path, json.dumps(meta, indent=2) + "\n")
    write_text(
        job / "params.env",
        "# written by annette-torch; environment variables of the same name override these\n"
        f"ITERATIONS=\"${{ITERATIONS:-{iterations}}}\"\nWARMUP=\"${{WARMUP:-{warmup}}}\"\n"
        f"FINE_GRAINED=\"${{FINE_GRAINED:-{fg}}}\"\n")


def _to_profile(report: DpuReport) -> Profile:
    nodes: dict[str, tuple[str, str, str, np.ndarray]] = {}
    for r in report.records:
        t = report.times.get(r.node)
        if t is None:  # summary formats: no per-run times, the record carries the statistics
            t = np.array([r.median_ms])
        nodes[r.node] = (r.node_type, r.exec_kind, r.status, np.asarray(t, dtype=np.float64))
    meta = {"format": report.format, "source": report.source, **{k: v for k, v in report.meta.items()
                                                                 if isinstance(v, (str, int, float, bool, list))}}
    return Profile(nodes=nodes, e2e_ms=np.asarray(report.e2e_ms, dtype=np.float64), raw=report, meta=meta)


# ------------------------------------------------------------------------------------------- ingest

def _read_job_meta(folder: Path) -> dict[str, Any] | None:
    p = folder / "job.json"
    if not p.is_file():
        return None
    try:
        meta = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as e:
        log.warning("%s: unreadable job description ignored (%s)", p, e)
        return None
    if not isinstance(meta, dict) or meta.get("format") != JOB_FORMAT:
        log.debug("%s: not an annette-torch vitis job description, ignored", p)
        return None
    return meta


def _job_of(path: Path) -> tuple[Path | None, dict[str, Any] | None]:
    """The job folder a report file or folder belongs to (itself, or the parent of ``reports/``)."""
    for cand in (path, path.parent, path.parent.parent) if path.is_file() else (path, path.parent):
        meta = _read_job_meta(cand)
        if meta is not None:
            return cand, meta
    return None, None


def _report_files(folder: Path) -> list[Path]:
    out = []
    for d in (folder, folder / "reports"):
        if d.is_dir():
            out += sorted(p for p in d.iterdir() if p.is_file() and p.suffix.lower() in REPORT_SUFFIXES
                          and p.name not in NOT_REPORTS)
    return out


def _granularity(meta: dict[str, Any] | None, timing: DpuReport | None = None) -> str:
    if timing is not None and "fine_grained" in timing.meta:  # what board.sh actually ran
        return "layer" if timing.meta["fine_grained"] else "subgraph"
    return "layer" if meta and meta.get("fine_grained") else "subgraph"


def _warmup_runs(meta: dict[str, Any] | None, timing: DpuReport | None) -> int:
    if timing is not None and isinstance(timing.meta.get("warmup"), int):
        return int(timing.meta["warmup"])
    if meta and isinstance(meta.get("warmup"), int):
        return int(meta["warmup"])
    return 0


def _load_folder(folder: Path, meta: dict[str, Any] | None) -> DpuReport | None:
    """Pick (and combine) the reports of one run found in ``folder`` and ``folder/reports``."""
    found: dict[str, list[tuple[Path, str]]] = {}
    for p in _report_files(folder):
        text = read_report_text(p)
        try:
            fmt = detect_format(text, str(p))
        except UnknownLayoutError:
            log.debug("%s: not a DPU profiler report, skipped", p)
            continue
        found.setdefault(fmt, []).append((p, text))
    if not found:
        return None
    for fmt, items in found.items():
        if len(items) > 1:
            raise ReportError(f"{folder}: several {fmt} reports ({', '.join(p.name for p, _ in items)}); "
                              "ingest the files one by one")
    g = _granularity(meta)
    timing = None
    if "vart-timing" in found:
        p, text = found["vart-timing"][0]
        timing = parse_text(text, str(p), fmt="vart-timing", granularity=g)
        if _granularity(meta, timing) != g:
            g = _granularity(meta, timing)
            timing = parse_text(text, str(p), fmt="vart-timing", granularity=g)
    main_fmt = next(f for f in PREFERENCE if f in found)
    p, text = found[main_fmt][0]
    if main_fmt == "vart-timing":
        report = timing
    else:
        skip = _warmup_runs(meta, timing) if main_fmt == "vaitrace-vtf" else 0
        try:
            report = parse_text(text, str(p), fmt=main_fmt, granularity=g, skip_runs=skip)
        except ReportError:
            if skip == 0:
                raise
            report = parse_text(text, str(p), fmt=main_fmt, granularity=g)  # trace shorter than the warm-up
        if main_fmt == "vaitrace-vtf" and "vaitrace-csv" in found:
            ps, ts = found["vaitrace-csv"][0]
            report = merge_vtf_with_summary(report, parse_text(ts, str(ps), fmt="vaitrace-csv", granularity=g))
        if timing is not None:
            report.meta["vart_timing"] = timing.source
            if timing.e2e_ms.size:
                report.e2e_ms = timing.e2e_ms  # whole-model wall clock per run (DPU subgraphs in sequence)
    report.meta["files"] = sorted(str(p) for items in found.values() for p, _ in items)
    if meta:
        report.meta["job"] = {k: meta.get(k) for k in ("name", "arch", "iterations", "warmup", "fine_grained")}
    return report


def load_job_report(folder: str | os.PathLike) -> DpuReport | None:
    """The parsed reports of a job folder (or of any folder of reports); None when it holds none."""
    folder = Path(folder)
    if not folder.is_dir():
        raise AnnetteError(f"{folder}: no such folder")
    job, meta = _job_of(folder)
    return _load_folder(folder, meta)


def _name_for(path: Path, meta: dict[str, Any] | None) -> str:
    if meta and meta.get("name"):
        return str(meta["name"])
    if path.is_dir():
        return path.name if path.name != "reports" else path.parent.name
    stem = path.stem
    for s in ("_profile_summary", "_vart_trace", "_vaitrace_summary", "_vart_timing", "_profile", "_dnndk"):
        if stem.endswith(s) and len(stem) > len(s):
            return stem[: -len(s)]
    if stem in _GENERIC_STEMS:
        parent = path.parent.name if path.parent.name != "reports" else path.parent.parent.name
        return parent or stem
    return stem


def _expand(path: Path) -> list[Path]:
    """A folder without reports of its own but with job folders below it stands for those job folders."""
    if path.is_dir() and _read_job_meta(path) is None and not _report_files(path):
        subs = sorted(p for p in path.iterdir() if p.is_dir() and (p / "job.json").is_file())
        if subs:
            return subs
    return [path]


@dataclass
class IngestedRun:
    """One ingested report set: benchmark name, the path given, its job folder (None for a loose report)."""

    name: str
    path: Path
    job_dir: Path | None
    report: DpuReport

    @property
    def records(self) -> list[NodeRecord]:
        return self.report.records


def collect(paths: list[str] | list[os.PathLike]) -> list[IngestedRun]:
    """Like `ingest`, keeping the parsed report and the job folder of each benchmark (e.g. to read files the
    caller stored there)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out: list[IngestedRun] = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise AnnetteError(f"{path}: no such file or folder")
        for p in _expand(path):
            job, meta = _job_of(p)
            if p.is_dir():
                report = _load_folder(p, meta)
                if report is None:
                    raise ReportError(f"{p}: no DPU profiler report found (run board.sh and copy reports/ back)")
            else:
                report = parse_text(read_report_text(p), str(p), granularity=_granularity(meta))
            out.append(IngestedRun(_name_for(p, meta), p, job, report))
    return out


def ingest(paths: list[str] | list[os.PathLike]) -> list[tuple[str, list[NodeRecord]]]:
    """Parse reports copied back from the board: ``[(benchmark name, records), ...]``, one per report set.

    Each path is a report file (any layout of `dpu_reports`), a job folder (its ``reports/`` are found, the
    best layout is chosen: VTF trace + summary > summary > text summary > DNNDK log > vart_timing.json),
    or a folder of job folders. Names come from the job's ``job.json``, else from the file / folder name.
    A recognised but corrupt report raises `ReportError`; files of other layouts in a folder are skipped.
    """
    return [(run.name, run.records) for run in collect(paths)]
