"""Command line: ``annette estimate MODEL --platform P`` and ``annette platforms``.

MODEL is an ``.onnx`` file, an original ANNETTE ``.json`` graph, a model-zoo name (``resnet18``) or
``package.module:callable`` returning an ``nn.Module``. Only this module prints; the library logs, and
its warnings are shown here as ``annette: warning: ...`` lines on stderr. A user mistake ends in one
``annette: error: ...`` line and exit code 2 (bad command line) or 1 (bad input found at run time).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import logging
import os
import sys
from typing import Any, Iterator, Sequence

from .. import __version__
from ..errors import AnnetteError, missing_extra
from ..frontends.spec import load_model
from .common import check_output, platform_names

__all__ = ["main", "build_parser", "parse_input_shape"]

PROG = "annette"
#: longest layer name shown in the per-layer table (longer names are shortened in the middle)
NAME_WIDTH = 44


# ------------------------------------------------------------------------------------------------------
# argument parsing


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``annette: error: <message>`` and exit code 2, no usage dump; a mistyped
    option, sub-command or choice gets a "did you mean" (`hints.explain`)."""

    #: the root parser and the command line being parsed (set by `main`), for the hints of sub-parsers
    root: "_Parser | None" = None
    argv: "list[str] | None" = None

    def error(self, message: str) -> None:  # type: ignore[override]
        from .hints import explain

        root = self.root or self
        text, prog = explain(message, root, root.argv)
        self.exit(2, f"{PROG}: error: {_one_line(text)} (see '{prog or self.prog} --help')\n")


def parse_input_shape(text: str) -> tuple[int, ...] | list[tuple[int, ...]]:
    """``1,3,224,224`` (or ``1x3x224x224``) -> a shape; ``1,3,32,32;1,10`` -> one shape per input."""
    parts = [p.strip() for p in text.split(";")]
    shapes = []
    for part in parts:
        dims = [d.strip() for d in part.replace("x", ",").split(",")]
        try:
            shape = tuple(int(d) for d in dims)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected comma-separated positive integers such as 1,3,224,224, got {text!r}") from None
        if any(d <= 0 for d in shape):
            raise argparse.ArgumentTypeError(
                f"every dimension must be a positive integer (batch included), got {text!r}")
        shapes.append(shape)
    return shapes[0] if len(shapes) == 1 else shapes


def build_parser() -> "_Parser":
    """The parser of the `annette` command with every command group's sub-commands."""
    p = _Parser(prog=PROG, description="Predict a neural network's execution time on hardware accelerators "
                                       "(ANNETTE stacked models: mapping model + per-layer models).")
    p.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    p.add_argument("-v", "--verbose", action="store_true", help="also show the library's info messages")
    p.add_argument("-q", "--quiet", action="store_true", help="hide the library's warnings")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    e = sub.add_parser("estimate", help="predict the execution time of a model on one or more platforms",
                       description="Predict the execution time of MODEL on one or more platforms.")
    e.add_argument("model", metavar="MODEL",
                   help="an .onnx file, an ANNETTE .json graph, a model-zoo name (e.g. resnet18) or "
                        "package.module:callable returning an nn.Module")
    e.add_argument("-p", "--platform", action="append", metavar="P",
                   help="shipped platform name or platform .json file; repeat or comma-separate for several "
                        "(default: zcu102; see 'annette platforms')")
    e.add_argument("-i", "--input-shape", type=parse_input_shape, metavar="SHAPE",
                   help="input shape, e.g. 1,3,224,224 (';' separates the shapes of several inputs); needed for "
                        "module:callable models, optional for zoo names and ONNX files")
    e.add_argument("--per-layer", action="store_true", help="print the per-layer table")
    e.add_argument("--json", action="store_true",
                   help="print one JSON object (per layer detail included; several platforms: {\"estimates\": [...]})")
    e.add_argument("--csv", metavar="FILE", help="write the per-layer table as CSV")
    e.add_argument("--plot", metavar="FILE", help="write a per-layer breakdown chart: .png, .pdf or .svg, by the "
                                                  "file's extension")

    pl = sub.add_parser("platforms", help="list your own and the shipped platform files",
                        description="List the platform names with what their latency_ms is, the files each can "
                                    "load (yours first) and whether a measured file matches this machine.")
    pl.add_argument("--full", action="store_true", help="print each platform's whole description (default: "
                                                         "its first line, shortened to the terminal's width)")
    pl.add_argument("--json", action="store_true", help="print the same as JSON, whole descriptions included")

    from .bench import add_calibrate_parser, add_parser as add_bench
    add_bench(sub)
    add_calibrate_parser(sub)
    from .adapt import add_parser as add_adapt
    add_adapt(sub)
    from .search import add_parser as add_search
    add_search(sub)
    _set_root(p, p)
    return p


def _set_root(parser: argparse.ArgumentParser, root: "_Parser") -> None:
    """Let every sub-parser find the root parser (and the command line it parses) for its error hints."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                if isinstance(child, _Parser):
                    child.root = root
                _set_root(child, root)


# ------------------------------------------------------------------------------------------------------
# logging: library warnings -> "annette: warning: ..." on stderr, each message once


class _StderrHandler(logging.Handler):
    def __init__(self, level: int) -> None:
        super().__init__(level)
        self._seen: set[tuple[int, str]] = set()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            msg = record.getMessage()
            key = (record.levelno, msg)
            if key in self._seen:
                return
            self._seen.add(key)
            level = "error" if record.levelno >= logging.ERROR else record.levelname.lower()
            sys.stderr.write(f"{PROG}: {level}: {msg}\n")  # sys.stderr looked up now (it may be redirected)
        except Exception:  # noqa: BLE001 - logging must never break the command
            self.handleError(record)


@contextlib.contextmanager
def _library_logging(level: int) -> Iterator[None]:
    logger = logging.getLogger("annette_torch")
    handler = _StderrHandler(level)
    old = (logger.level, logger.propagate)
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False  # shown once, here, even if the root logger has handlers too
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old[0])
        logger.propagate = old[1]


# ------------------------------------------------------------------------------------------------------
# output


def _one_line(msg: str, limit: int = 600) -> str:
    text = " ".join(line.strip() for line in str(msg).strip().splitlines() if line.strip())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _short(name: str, width: int = NAME_WIDTH) -> str:
    if len(name) <= width:
        return name
    head = (width - 3) // 2
    return name[:head] + "..." + name[-(width - 3 - head):]


def _summary(est) -> str:
    net, plat = est.network, est.platform
    desc = plat.description.split(": ")[0]
    total = est.device_ms
    lines = [f"network   {net.name} ({len(net)} layers, {len(est.mapped.kept)} executed after fusion)",
             f"platform  {plat.name}" + (f" ({desc})" if desc else ""),
             f"file      {plat.source or '(built in memory)'}",
             f"latency   {est.latency_ms:.4f} ms  ({est.latency_definition})"
             + (f"; includes {len(est.unknown_layers)} layer(s) of unknown type, estimated from tensor sizes only"
                if est.unknown_layers else "")]
    hosted = est.platform.support is not None
    if est.e2e_ms is not None:
        lines.append(f"device    {total:.4f} ms  (sum of the executed layers' times"
                     + (", host-run layers and switches included)" if hosted else ")"))
    if hosted:
        line = f"host      {est.host_summary()}"
        if est.on_host.any() or est.switches:
            line += (f": {est.host_ms:.4f} ms on the host, {est.switch_ms:.4f} ms for {est.switches} "
                     f"switch{'es' if est.switches != 1 else ''}")
        lines.append(line)
    items = list(est.by_type().items())
    w = max((len(k) for k, _ in items[:5]), default=0)
    for i, (label, t) in enumerate(items[:5]):
        share = 100 * t / total if total > 0 else 0.0
        lines.append(f"{'by type' if i == 0 else '':<10}{label:<{w}}  {t:10.4f} ms  {share:5.1f}%")
    if len(items) > 5:
        rest = sum(t for _, t in items[5:])
        lines.append(f"{'':<10}{'(other)':<{w}}  {rest:10.4f} ms  {100 * rest / total if total > 0 else 0:5.1f}%")
    if est.fallback_rows.size:
        lines.append(f"fallback  {est.fallback_rows.size} layer(s) without a model of their own type in {plat.name} "
                     f"({est.fallback_summary()}): costed by its generic Base roofline, may be far off")
    unknown = est.unknown_layers
    if unknown:
        shown = ", ".join(unknown[:5]) + (f", ... ({len(unknown) - 5} more)" if len(unknown) > 5 else "")
        if est.flagged_layers:
            ops = ", ".join(est.network.unknown_ops())
            lines.append(f"flagged   {len(unknown)} layer(s) of unknown type ({ops}): not in {plat.name}'s operator "
                         f"support, kept on the accelerator and estimated from tensor sizes only: {shown}")
        else:
            lines.append(f"warning   {len(unknown)} layer(s) of unsupported type, estimated from tensor sizes only: "
                         f"{shown}")
    return "\n".join(lines)


def _switch_ms(row: dict) -> float:
    """A table row's accelerator<->host switch cost in ms (0 where the table has no such column)."""
    return float(row.get("switch_ms") or 0.0)


def _per_layer(est) -> str:
    """The per-layer table as aligned text; a ``switch_ms`` column where the Estimate's rows carry a non-zero one."""
    table = est.table()
    hosted = est.platform.support is not None  # where each layer runs is news only with operator support
    switches = any(_switch_ms(r) != 0 for r in table)  # the accelerator<->host switch cost, apart from time_ms
    head = (("name", "type", "out shape", "MOPs", "time_ms") + (("switch_ms",) if switches else ())
            + ("model", "fused_into") + (("runs on",) if hosted else ()))
    rows = [(_short(r["name"]), r["type"], r["output_shape"], f"{r['ops'] / 1e6:.2f}", f"{r['time_ms']:.4f}")
            + ((f"{_switch_ms(r):.4f}",) if switches else ())
            + (r["model"], _short(r["fused_into"]))
            + (((r["executes_on"] + (" (flagged)" if r["flag"] else "")),) if hosted else ())
            for r in table]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)]
    right = {i for i, h in enumerate(head) if h in ("MOPs", "time_ms", "switch_ms")}

    def fmt(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    out = [f"# {est.network.name} on {est.platform.name}", fmt(head), fmt(["-" * w for w in widths])]
    out += [fmt(r) for r in rows]
    return "\n".join(out)


def _write_csv(estimates: list, path: str) -> None:
    if len(estimates) == 1:
        estimates[0].to_csv(path)
        return
    from ..estimator import TABLE_COLUMNS
    from ..atomic import atomic_write
    tables = [(est.platform.name, est.table()) for est in estimates]
    # the Estimate's columns, then any further column its rows carry (e.g. switch_ms), in the order first seen
    columns = list(dict.fromkeys(["platform", *TABLE_COLUMNS, *(k for _, t in tables for r in t for k in r)]))
    with atomic_write(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns, lineterminator="\n", restval="")
        w.writeheader()
        for name, table in tables:
            for row in table:
                w.writerow({"platform": name, **row})


# ------------------------------------------------------------------------------------------------------
# commands


def _cmd_estimate(args: argparse.Namespace) -> int:
    from ..estimator import estimate
    from ..platform import load_platform

    check_output(args.csv, "--csv")  # fail fast: outputs, then platforms, before tracing
    check_output(args.plot, "--plot", chart=True)
    platforms = [load_platform(p) for p in platform_names(args.platform)]
    net = load_model(args.model, args.input_shape)
    estimates = [estimate(net, p) for p in platforms]

    if args.csv:
        try:
            _write_csv(estimates, args.csv)
        except OSError as e:
            raise AnnetteError(f"cannot write {args.csv}: {e.strerror or e}") from None
    if args.plot:
        from ..plots import plot_breakdown
        try:
            plot_breakdown(estimates if len(estimates) > 1 else estimates[0], args.plot)
        except OSError as e:
            raise AnnetteError(f"cannot write {args.plot}: {e.strerror or e}") from None

    if args.json:
        if len(estimates) == 1:
            doc: Any = estimates[0].to_dict()
        else:
            doc = {"estimates": [e.to_dict() for e in estimates]}
        print(json.dumps(doc, indent=2))
        return 0

    blocks = []
    for est in estimates:
        blocks.append((_per_layer(est) + "\n\n" if args.per_layer else "") + _summary(est))
    print("\n\n".join(blocks))
    if len(estimates) > 1:
        ranked = sorted(estimates, key=lambda e: e.latency_ms)
        print("\nfastest   " + ", ".join(f"{e.platform.name} {e.latency_ms:.4f} ms" for e in ranked))
    if args.csv:
        print(f"\nper-layer CSV written to {args.csv}")
    if args.plot:
        print(f"breakdown chart written to {args.plot}")
    return 0


def _machine_note(f) -> str:
    if f.machine is None:
        return "no machine recorded"
    if not f.machine:
        return "measured on this machine"
    return "measured on another machine" if "another machine" in f.machine else "may not be this machine"


def _this_machine(f) -> str:
    """Whether a platform file fits this machine: yes, no, or n/a for a board's model (no machine recorded)."""
    if f.machine is None:
        return "n/a (board model)"
    if not f.machine:
        return "yes"
    if "another machine" in f.machine:
        return "no"
    return "yes (ISA not recorded)"  # every identity field it records matches; its instruction set is unknown


def _headline(description: str, width: int) -> str:
    """A platform description as one line of at most ``width`` characters: its head before the first ': '
    (what the platform is), shortened at a word boundary when still too long."""
    head = " ".join(description.split(": ")[0].split())
    if len(head) <= width:
        return head
    cut = head.rfind(" ", 0, width - 3)
    return head[: cut if cut > width // 2 else width - 3].rstrip(" ,;") + "..."


def _definitions(names: list[str]) -> dict[str, str]:
    """Platform name -> what its ``latency_ms`` is (`latency_definition`), or why its file cannot be loaded."""
    from ..estimator import latency_definition
    from ..platform import load_platform

    out = {}
    for name in names:
        try:
            out[name] = latency_definition(load_platform(name))
        except AnnetteError as e:
            out[name] = f"(cannot load: {_one_line(str(e), 200)})"
    return out


def _cmd_platforms(args: argparse.Namespace) -> int:
    import shutil
    import textwrap

    from ..platform import list_platforms, platform_files, user_platform_dir

    plats = list_platforms()
    files = platform_files()
    defs = _definitions(list(plats))
    if args.json:
        print(json.dumps({"user_folder": str(user_platform_dir()), "platforms": plats, "latency_definitions": defs,
                          "files": [{"name": f.name, "path": f.path, "origin": f.origin, "selected": f.selected,
                                     "description": f.description, "this_machine": _this_machine(f),
                                     "machine": _machine_note(f), "machine_warning": f.machine or None}
                                    for f in files]}, indent=2))
        return 0
    columns = max(shutil.get_terminal_size((100, 24)).columns, 80)
    w = max((len(n) for n in plats), default=0)
    pad = " " * (w + 2)
    for name, desc in plats.items():
        if args.full:
            body = textwrap.fill(" ".join(desc.split()), columns - 1, initial_indent=f"{name:<{w}}  ",
                                 subsequent_indent=pad)
        else:
            body = f"{name:<{w}}  {_headline(desc, max(columns - w - 3, 110))}"
        print(body)
        print(f"{pad}latency_ms: {defs[name]}")
    head = ("platform", "origin", "this machine?", "file")
    rows = [(f.name, f.origin.split(" ")[0], _this_machine(f), f.path) for f in files]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)]
    print(f"\nfiles (-> the file each name loads; your own, from {user_platform_dir()}, come before the shipped "
          "ones; annette calibrate and annette adapt write there)")
    for mark, row in [("  ", head)] + [("->" if f.selected else "  ", r) for f, r in zip(files, rows)]:
        print(f"{mark} " + "  ".join(c.ljust(wd) for c, wd in zip(row, widths)).rstrip())
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``annette`` command; returns the exit code (0 ok, 1 bad input, 2 bad command line)."""
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    parser.argv = argv
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, --version, usage errors (already reported in one line)
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    level = logging.ERROR if args.quiet else logging.INFO if args.verbose else logging.WARNING
    try:
        with _library_logging(level):
            if args.command == "estimate":
                return _cmd_estimate(args)
            if args.command == "adapt":
                from .adapt import run as run_adapt
                return run_adapt(args)
            if args.command == "calibrate":
                from .bench import run_calibrate
                return run_calibrate(args)
            if args.command == "bench":
                from .bench import run as run_bench
                return run_bench(args)
            if args.command in ("search", "pareto"):
                from .search import run as run_search
                return run_search(args)
            return _cmd_platforms(args)
    except AnnetteError as e:
        sys.stderr.write(f"{PROG}: error: {_one_line(str(e))}\n")
        return 1
    except ImportError as e:  # an optional dependency the command needs: name the extra, not a traceback
        extra = missing_extra(e, f"'{PROG} {args.command}'")
        if extra is None:
            raise
        sys.stderr.write(f"{PROG}: error: {extra}\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write(f"{PROG}: interrupted\n")
        return 130
    except BrokenPipeError:  # e.g. `annette estimate ... --per-layer | head`
        with contextlib.suppress(Exception):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
