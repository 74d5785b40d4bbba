"""``annette calibrate``: measure a CPU platform on this machine and fit its platform file, in one command.

Steps: (1) run the benchmark suites (micro-kernel, multi-layer, the attention-era ones on token tensors and
the in-context ``cold_weights``) into a measurement store, resumable; (2) fit the mapping model, mixed layer
models and the cache model (`fit.generator`); (3) measure whole-network latency of a set of *calibration*
networks (transformer-era architectures of `calibration_modern`, random NAS-Bench-101 cells and random
MobileNetV2-space networks — never the validation networks of ``benchmarks/accuracy.py``) and fit the
network-level terms (scale, per-executed-layer dispatch cost, constant); (4) write the platform file with the
machine's fingerprint.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Collection, Sequence

import numpy as np

from ..errors import AnnetteError, check_writable
from ..ir import LayerType
from ..models.calibration import RAMP_MS, TYPE_GROUPS
from ..platform import Platform
from ..validate.networks import VALIDATION_SEED

__all__ = ["PLANS", "plan_sweeps", "plan_counts", "calibration_networks", "covering", "run_calibration",
           "calibrate_network_level", "suite_options", "sweep_runner", "modelled_types"]

log = logging.getLogger(__name__)

MEASURABLE = ("ort-cpu", "openvino-cpu")
MICRO = ("conv", "conv_odd", "dwconv", "gconv", "gconv_same", "maxpool", "avgpool", "fc", "add", "eltwise_const",
         "concat", "slice", "act", "bn", "resize", "convtranspose", "reduce")
MULTI = ("conv_bn_relu", "conv_pool", "residual", "concat_branches", "dwsep", "conv_act", "dw_act", "stem",
         "shuffle", "se", "conv_mul", "stride_prop", "head", "gconv_bn_relu", "pw_act", "preact", "fc_act")
#: multi-layer suites that only decide a pattern fold (`fit.data.learned_folds`: does the runtime run an explicit
#: Pad inside the convolution reading it), swept with a fifth of the multi-layer suites' configurations (at least 10)
FOLD_SUITES = ("pad_conv",)
#: multi-layer suites swept a second time with an option, on every platform: residual paths that end in a ReLU
#: before the add (``post="relu"``, NAS-Bench-101 cells), which neither ONNX Runtime nor OpenVINO fuses into the
#: convolution before it (`mapping.GROUP_ATTRS`); a plain residual's add they fuse
MULTI_OPTIONED = {"residual": {"post": "relu"}}
#: attention-era suites on token tensors (`annette_torch.bench.suites.tokens` / ``transformer``): micro-kernels of
#: the layers vision transformers, ConvNeXt, Swin and segmentation heads add, and the blocks whose fusions (ONNX
#: Runtime's attention / LayerNorm / GELU / MatMul + Add, OpenVINO's) the mapping model learns
#: (``linear_bn``, LeViT's Linear + BatchNorm over token rows, is swept with the micro-kernels' count: it is where
#: the RowBatchNorm model's samples come from, one per configuration)
TOKENS_MICRO = ("linear", "matmul", "softmax", "layernorm", "gelu", "heads", "interp", "dilconv", "linear_bn")
#: token micro-kernels swept for one platform only (with the micro-kernels' count): OpenVINO runs the q / k / v
#: picks of a fused projection (``qkv[i]``) in place, which the ``pick`` suite shows its fit (a Slice model of
#: channel slices priced Swin-T's at up to 11 ms). Not ONNX Runtime: it runs the three as one Split whose time its
#: profile charges to one of them (per-layer samples of them are ill-posed); its Slice model prices the copy
TOKENS_ONLY = {"openvino-cpu": ("pick",)}
TOKENS_MULTI = ("attention", "mlp", "convnext", "window_attention")
#: token micro-kernels swept a second time with an option: attention products and softmax batched over 64 windows
#: (Swin's and MaxViT's (windows, heads, 49, 32) tensors: a batch the plain suites' 1-16 heads never reach, which
#: ONNX Runtime runs ~several times slower per operation than one large product)
WINDOWED = {"matmul": {"windows": 64}, "softmax": {"windows": 64}}
#: suites swept a second time behind a 1x1 depthwise conv, kept besides the plain sweep
#: (`fit.generator.BOTH_LAYOUTS`): a layer whose kernel differs by layout (ONNX Runtime's bilinear resize: 1.4 ns
#: per output element on a plain tensor, 0.4 on a blocked one) and that networks feed both ways (SegFormer's
#: decoder resizes token maps, its head and CNN decoders resize conv outputs)
BOTH = {"interp": {"lead": "dw1"}}
#: multi-layer suites swept a second time with an option, per platform: OpenVINO runs timm's written-out attention
#: (``(q @ k.transpose(-2, -1)) * scale``) as one subgraph with its scale and softmax, which the ``sdpa`` style
#: never shows the mapping fit (a 4-head attention written so, over 785 tokens, came out 36% high on the Intel Xeon
#: VM: its scale and softmax priced as layers of their own)
STYLED = {"openvino-cpu": {"attention": {"style": "manual"}}}
#: in-context suites (the cache model: weights evicted by a network's other traffic)
CONTEXT = ("cold_weights",)
#: micro-kernel suites measured behind a 1x1 depthwise conv (``lead="dw1"``), per platform: the layer runs in
#: the layout a network gives it (OpenVINO picks slower kernels for a pool fed by the plain graph input, runs
#: convolutions fed by another layer ~5% faster, and concatenates blocked tensors in place). Not ONNX
#: Runtime's concat: behind a conv it reads tensors that an inserted ReorderOutput converted first, and that
#: reorder (not a layer model's) is the concat's real cost; its convs run alike either way. Not convtranspose:
#: OpenVINO reorders a deconvolution's input either way, and 500 lead layers would tilt the depthwise model
LEAD = {"ort-cpu": ("dwconv", "maxpool", "avgpool", "slice"),
        "openvino-cpu": ("conv", "conv_odd", "gconv", "gconv_same", "dwconv", "maxpool", "avgpool", "concat",
                         "slice")}
#: multi-layer suites measured with a 1x1 depthwise conv behind the activation (``tail="dw1"``), per platform:
#: ONNX Runtime fuses a HardSwish into the convolution before it only when another layer reads it (in a network
#: always; as a benchmark's graph output never: a separate node of 0.013 ms behind a 0.114 ms conv, where the
#: fused one adds 0.007 ms)
TAIL = {"ort-cpu": ("conv_act", "pw_act", "dw_act", "stem"), "openvino-cpu": ()}
#: NB101 seed of the calibration cells (the validation cells use `VALIDATION_SEED`)
CALIBRATION_SEED = 777
#: rounds over the calibration networks (each network's latency: the fastest round's median of 30 runs; the
#: accuracy benchmark measures its validation networks the same way)
ROUNDS = 3


@dataclass(frozen=True)
class Plan:
    """How much to measure: configurations per suite, calibration networks, statistical CV folds; ``config_s``:
    the time one configuration's timed runs may take (slow ones get fewer, `bench.runners.budgeted_iterations`)."""

    configs_micro: int
    configs_multi: int
    configs_context: int
    configs_tokens: int
    configs_blocks: int
    networks: int
    cv: int
    candidates: tuple[str, ...]
    config_s: float | None = None


PLANS = {
    # quick: 80 cold_weights configurations, so that some 15 reach the DRAM regime (hundreds of MB of traffic)
    # the cache model's second tier is fitted on; 50 left it to chance (`fit.cache_fit`)
    "quick": Plan(configs_micro=60, configs_multi=50, configs_context=80, configs_tokens=40, configs_blocks=30,
                  networks=18, cv=3, candidates=("gbm", "gbm-huber", "lmt"), config_s=0.25),
    "full": Plan(configs_micro=500, configs_multi=400, configs_context=200, configs_tokens=300, configs_blocks=200,
                 networks=45, cv=5,
                 candidates=("gbm", "gbm-huber", "rf", "poly", "lmt")),
}


def plan_sweeps(plan: Plan, platform: str | None = None) -> list[tuple[str, int, dict[str, Any]]]:
    """(suite, configurations, options) that ``plan`` measures, in the order ``annette calibrate`` sweeps them
    (the platform's `LEAD` / `TAIL` options come on top, `suite_options`; with ``platform``, its `TOKENS_ONLY`
    sweeps, its `STYLED` sweeps and its sweeps without the lead last)."""
    out = [(s, plan.configs_micro, {}) for s in MICRO] + [(s, plan.configs_multi, {}) for s in MULTI]
    out += [(s, max(plan.configs_multi // 5, 10), {}) for s in FOLD_SUITES]
    out += [(s, plan.configs_multi, dict(o)) for s, o in MULTI_OPTIONED.items()]
    out += [(s, plan.configs_tokens, {}) for s in TOKENS_MICRO + TOKENS_ONLY.get(platform or "", ())]
    out += [(s, plan.configs_tokens, dict(o)) for s, o in WINDOWED.items()]
    # (twice the configurations: behind the lead, only channel counts that fill blocks run blocked)
    out += [(s, 2 * plan.configs_tokens, dict(o)) for s, o in BOTH.items()]
    out += [(s, plan.configs_blocks, {}) for s in TOKENS_MULTI] + [(s, plan.configs_context, {}) for s in CONTEXT]
    out += [(s, plan.configs_blocks, dict(o)) for s, o in STYLED.get(platform or "", {}).items()]
    # suites of `LEAD` a second time without the lead where the fit keeps both (`generator.PLAIN_SWEEPS`: a pool of
    # a plain tensor, the graph input here and PoolFormer's after a GroupNorm, is a kernel of its own on OpenVINO)
    from .generator import PLAIN_SWEEPS
    out += [(s, plan.configs_micro, {"lead": "none"}) for s in PLAIN_SWEEPS.get(platform or "", ())]
    return out


def plan_counts(plan: Plan, platform: str | None = None) -> dict[str, int]:
    """Configurations per sweep of ``plan`` (keys: the suite, with its options as ``suite[key=value]``)."""
    return {s + ("[" + ",".join(f"{k}={v}" for k, v in o.items()) + "]" if o else ""): n
            for s, n, o in plan_sweeps(plan, platform)}


def calibration_networks(n: int, seed: int = CALIBRATION_SEED, exclude_hashes: set[str] | None = None,
                         cover: Collection[str] = ()) -> list:
    """``n`` networks for network-level calibration: a third transformer-era architectures
    (`calibration_modern`: ViT, ConvNeXt, Swin, MaxViT, EfficientFormer, LeViT, PoolFormer, SegFormer sizes
    outside the validation set), a fifth (at most all of `calibration_classic`) convolutional families the NAS spaces
    lack (`calibration_classic`: SE, grouped, channel shuffle, dense, large fully connected heads), the rest
    NB101 cells and MobileNetV2-space networks, half each (one more cell when odd). With ``cover`` (layer type
    labels, e.g. those a platform file models): the transformer-era and classic-family networks are the ones
    that together add most of those types to the cells' (`covering`), so that few networks exercise every type.

    No single-block benchmark chains: the smallest ran in 10-40 us, where dispatch cost and timer resolution
    dominate, and their errors set the per-layer term (ort-cpu on an Intel Xeon: -6 us per layer, so small
    NB101 cells came out 15-18% low and large ones 10% high; calibration LOO 9.9% with them, 3.2% without).
    """
    from ..search.spaces import mbv2
    from .calibration_classic import CLASSIC_CALIBRATION
    from .calibration_classic import PREFIX as CLASSIC
    from .calibration_modern import PREFIX as MODERN
    from .calibration_modern import MODERN_CALIBRATION, calibration_networks_of

    rng = np.random.default_rng(seed)
    n_modern, n_classic, n_cells, n_mbv2 = _family_counts(n)
    out = _cells(n_cells, rng, exclude_hashes)
    for i in range(n_mbv2):
        choices = [str(rng.choice(b.ops)) for b in mbv2.BLOCKS]
        res = int(rng.choice([128, 160, 192, 224]))
        net = mbv2.build_network(choices, resolution=res)
        net.name = f"calib-mbv2-{i}"
        out.append(net)
    pools = {CLASSIC: [CLASSIC + k for k in CLASSIC_CALIBRATION], MODERN: [MODERN + k for k in MODERN_CALIBRATION]}
    picks = covering(pools, {CLASSIC: n_classic, MODERN: n_modern}, cover,
                     {t for net in out for t in net.type_labels()}) if cover else \
        {p: names[:k] for (p, names), k in zip(pools.items(), (n_classic, n_modern))}
    return out + calibration_networks_of(picks[CLASSIC] + picks[MODERN])


def _family_counts(n: int) -> tuple[int, int, int, int]:
    """(transformer-era, classic-family, NB101, MobileNetV2-space) networks among `calibration_networks` of ``n``."""
    from .calibration_classic import CLASSIC_CALIBRATION

    n_modern, n_classic = n // 3, min(n // 5, len(CLASSIC_CALIBRATION))
    rest = n - n_modern - n_classic
    return n_modern, n_classic, rest - rest // 2, rest // 2


def _cells(n_cells: int, rng: np.random.Generator, exclude_hashes: set[str] | None) -> list:
    """``n_cells`` NB101 cells drawn with ``rng``, none of ``exclude_hashes``, named ``calib-nb101-<hash>``."""
    from ..search.spaces import nb101

    specs = [s for s in nb101.sample(n_cells * 2, rng)
             if not exclude_hashes or nb101.spec_hash(s.matrix, s.ops) not in exclude_hashes]
    out = []
    for s in specs[:n_cells]:
        net = nb101.build_network(s.matrix, s.ops)
        net.name = f"calib-nb101-{nb101.spec_hash(s.matrix, s.ops)[:8]}"
        out.append(net)
    return out


#: at most this many of the networks ``annette adapt`` measures are large ones (`adaptation_networks`) ...
SPAN = 4
#: ... of them, the classic-family networks (`calibration_classic`) of most operations, largest first
LARGE_CLASSIC = ("vgg-fc-224", "resnet26-bottleneck-160")


def large_count(n: int) -> int:
    """How many of the ``n`` networks of `adaptation_networks` are large ones (the last): a third, at most `SPAN`."""
    return min(SPAN, max(int(n), 0) // 3)


def adaptation_networks(n: int, seed: int = CALIBRATION_SEED, exclude_hashes: set[str] | None = None,
                        cover: Collection[str] = ()) -> list:
    """``n`` networks for ``annette adapt``: `calibration_networks` of all but `large_count` of them, then that
    many large ones: the NB101 cells of the full calibration set (`PLANS` ``full``) with the most operations
    and the `LARGE_CLASSIC` networks, a cell and a classic network in turn.

    Why: a small calibration set runs in 2-17 ms per network, and the level fitted on it alone is extrapolated to
    the 20-200 ms of a ResNet-50 or VGG. The AMD EPYC ``openvino-cpu`` file adapted on the Intel Xeon VM from ten
    such networks priced large CNNs 9-12% low (classic architectures: MAPE 7.2%, bias -6%).
    """
    from .calibration_classic import PREFIX as CLASSIC
    from .calibration_modern import calibration_networks_of

    k = large_count(n)
    out = calibration_networks(n - k, seed, exclude_hashes, cover)
    if not k:
        return out
    have = {net.name for net in out}
    cells = _cells(_family_counts(PLANS["full"].networks)[2], np.random.default_rng(seed), exclude_hashes)
    cells = sorted((c for c in cells if c.name not in have), key=lambda c: -float(np.sum(c.ops)))
    classic = [CLASSIC + name for name in LARGE_CLASSIC if CLASSIC + name not in have]
    large: list = []
    while len(large) < k and (cells or classic):
        if cells:
            large.append(cells.pop(0))
        if classic and len(large) < k:
            large += calibration_networks_of([classic.pop(0)])
    return out + large


def covering(pools: dict[str, list[str]], counts: dict[str, int], cover: Collection[str],
             have: Collection[str] = ()) -> dict[str, list[str]]:
    """``counts[p]`` calibration networks of each pool ``p`` (names in their order), picked greedily: each next
    pick adds most types of ``cover`` to those ``have`` and the picks hold (ties: the pool with the most picks
    left, then the earlier name); once nothing adds a type, the rest in the pools' order (family spread)."""
    from .calibration_modern import layer_types

    cover = set(cover)
    adds = {name: layer_types(name) & cover for names in pools.values() for name in names}
    left, picks, seen = dict(counts), {p: [] for p in pools}, set(have) & cover
    while any(left.values()):
        options = [(len(adds[name] - seen), left[p], -i, p, name)
                   for p, names in pools.items() if left[p] > 0
                   for i, name in enumerate(names) if name not in picks[p]]
        if not options:
            break
        *_, p, name = max(options)
        picks[p].append(name)
        left[p] -= 1
        seen |= adds[name]
    return picks


def _validation_hashes(n: int = 200, seed: int = VALIDATION_SEED) -> set[str]:
    """Hashes of the NB101 cells the accuracy benchmark validates on (kept out of calibration)."""
    from ..search.spaces import nb101
    return {nb101.spec_hash(s.matrix, s.ops) for s in nb101.sample(n, np.random.default_rng(seed))}


def calibrate_network_level(platform_obj: Platform, runtime: str, nets: Sequence[Any],
                            progress: Callable[[str], None] | None = None) -> tuple[Any, dict[str, Any]]:
    """Measure ``nets`` end to end on ``runtime`` and fit the platform's network-level terms."""
    from ..estimator import estimate
    from .calibrate_network import fit_cpu_calibration
    from .calibration_modern import measurable
    from ..validate import measure_latency

    # rounds over all networks, the minimum per network: a slow spell of a shared machine (whole-network
    # latency drifts by a few % within minutes) then has to last all rounds to bias the calibration
    best = np.full(len(nets), np.inf)
    models = [measurable(net) for net in nets]  # exported once, measured every round
    for r in range(ROUNDS):
        for i, net in enumerate(nets):
            if progress:
                progress(f"end-to-end round {r + 1}/{ROUNDS}, {i + 1}/{len(nets)}: {net.name}")
            best[i] = min(best[i], measure_latency(models[i], runtime, runs=30, repeats=1, warmup=5).median_ms)
    terms = [estimate(net, platform_obj).terms for net in nets]
    names = [net.name for net in nets]
    y_arr = best
    cal = fit_cpu_calibration(terms, y_arr, names)
    cal.predicts = f"end-to-end latency (ms) of one inference on {runtime} with the same runtime settings"
    raw = np.array([t["layers"] for t in terms])
    return cal, {"networks": len(nets), "loo_mape": cal.loo_mape, "measured_ms": dict(zip(names, map(float, y_arr))),
                 "layers_only_mape": float(np.mean(np.abs(raw / y_arr - 1))), "coef": cal.coef}


def sweep_runner(platform: str) -> tuple[str, dict[str, Any]]:
    """The hardware module and settings a measurable CPU platform's suites are swept with (1 thread)."""
    return ("ort-cpu", {"threads": 1}) if platform == "ort-cpu" else ("openvino", {"device": "CPU", "threads": 1})


def suite_options(platform: str, suite: str) -> dict[str, str] | None:
    """The options a suite is measured with on ``platform`` (`LEAD`, `TAIL`), or None."""
    opts = {key: "dw1" for key, table in (("lead", LEAD), ("tail", TAIL)) if suite in table[platform]}
    return opts or None


def run_calibration(platform: str, quick: bool = False, out: str | None = None, db: str | None = None,
                    progress: Callable[[str], None] | None = None, budget_s: float | None = None) -> dict[str, Any]:
    """Measure, fit and write the platform file; returns a report (paths, errors, timings)."""
    from ..bench.store import Store
    from ..bench.suites import SUITES
    from ..bench.sweep import measuring_process, run_sweep
    from ..bench.hostlock import MachineLock
    from ..bench.runners import get_runner
    from .generator import PROBE_SUITES, FitMemo, fit_platform, fit_workers
    from .recheck import recheck
    from .slow_paths import measure_slow_ns

    if platform not in MEASURABLE:
        raise AnnetteError(f"calibrate: platform {platform!r} cannot be measured on this machine "
                           f"(measurable: {', '.join(MEASURABLE)})")
    plan = PLANS["quick" if quick else "full"]
    progress = progress or (lambda msg: log.info("%s", msg))
    db = db or f"annette-calibrate-{platform}.sqlite"
    out = out or user_platform_file(platform)
    check_writable(out)  # before an hour of measuring, not after it
    fit_workers()  # (a bad ANNETTE_FIT_JOBS, too)
    runner, kw = sweep_runner(platform)
    t0 = time.perf_counter()
    report: dict[str, Any] = {"db": db, "out": out, "plan": "quick" if quick else "full", "suites": {}}
    with measuring_process(runner, kw) as process:  # one for all the suites and the recheck
        with Store(db) as st:
            for suite, n, extra in plan_sweeps(plan, platform):
                left = None if budget_s is None else budget_s - (time.perf_counter() - t0)
                if left is not None and left <= 0:
                    break
                progress(f"benchmark suite {suite}{' ' + str(extra) if extra else ''} ({n} configurations)")
                opts = {**(suite_options(platform, suite) or {}), **extra} or None
                cfgs = SUITES[suite].configs(n=n, seed=0, options=opts)
                res = run_sweep(st, platform, suite, cfgs, runner, kw, iterations=20, warmup=3, budget_s=left,
                                progress=False, max_s=plan.config_s, process=process)
                key = suite + (str(extra) if extra else "")
                report["suites"][key] = {"measured": res.measured, "failed": res.failed, "skipped": res.skipped}
                if res.interrupted:
                    raise KeyboardInterrupt
        t_bench = time.perf_counter() - t0
        progress("fitting mapping and layer models")

        memo: FitMemo = {}  # the fit after the recheck refits only the types whose samples it changed
        machine = MachineLock()

        def fit() -> tuple[Platform, dict[str, Any]]:
            # its worker processes take every core: a sweep of another calibrate here waits rather than time beside them
            with machine.hold():
                return fit_platform(db, platform, cv=plan.cv, progress=progress, candidates=plan.candidates, memo=memo)

        plat, fit_rep = fit()
        if budget_s is None or time.perf_counter() - t0 < budget_s:  # measured in a slow spell? (`fit.recheck`)
            report["recheck"] = rc = recheck(db, platform, plat, runner, kw, skip=CONTEXT + PROBE_SUITES,
                                             progress=progress, process=process)
            if rc["replaced"]:
                progress(f"{len(rc['replaced'])} of {rc['checked']} configurations measured again came out faster: "
                         "fitting again")
                plat, fit_rep = fit()
    t_fit = time.perf_counter() - t0 - t_bench
    progress("slow paths: micro-kernel pairs (masked attention, transposes)")
    with machine.hold():  # one measurement at a time on this machine, as the sweeps
        slow_ns = measure_slow_ns(get_runner(runner, **kw), progress=progress)
    machine.close()
    plat = Platform.from_dict({**plat.to_dict(), "slow_ns": slow_ns}, plat.source or platform)
    nets = calibration_networks(plan.networks, exclude_hashes=_validation_hashes())
    cal, cal_rep = calibrate_network_level(plat, platform, nets, progress)
    d = platform_file(plat, fit_rep, platform)
    d["overhead"] = overhead_entry(cal, f"end-to-end calibration on {cal_rep['networks']} calibration networks "
                                        f"(never the validation set): leave-one-out MAPE {cal.loo_mape:.1%}, "
                                        f"layer sum alone {cal_rep['layers_only_mape']:.1%}")
    final = Platform.from_dict(d, out)
    final.save(out)
    report.update(seconds_bench=t_bench, seconds_fit=t_fit, seconds_total=time.perf_counter() - t0,
                  end_to_end=cal_rep, layer_models=len(final.layers), rules=len(final.mapping.rules))
    return report


def user_platform_file(platform: str) -> str:
    """``<platform>.json`` in the user's platform folder (created), where the platform's name finds it."""
    from ..platform import user_platform_dir

    folder = user_platform_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise AnnetteError(f"cannot create the platform folder {folder}: {e.strerror or e} (set ANNETTE_HOME or "
                           "give --out)") from None
    return str(folder / f"{platform}.json")


def platform_file(plat: Platform, fit_rep: dict[str, Any], platform: str) -> dict[str, Any]:
    """The platform file's content for a `fit_platform` result measured here: description, this machine's
    fingerprint and a summary of the fit report (no end-to-end calibration yet)."""
    from ..platform.machine import machine_description, machine_fingerprint

    d = plat.to_dict()
    d["description"] = (f"{platform} measured on {machine_description()} (1 thread): mixed layer models + learned "
                        f"mapping, calibrated end to end")
    d["fingerprint"] = machine_fingerprint(1)
    cache_rep = fit_rep.get("cache", {}).get("mixed+mapping", {})
    d["fit_report"] = {"configurations": fit_rep.get("configurations"),
                       "cache": {k: v for k, v in cache_rep.items() if k != "model"},
                       "mapping": {k: v for k, v in fit_rep.get("mapping", {}).items()},
                       "folds": fit_rep.get("folds", {}),
                       "strides": fit_rep.get("strides", {}),
                       "layer_models": {k: {kk: vv for kk, vv in v.items() if kk in ("model", "chosen", "cv_mape",
                                                                                       "n_samples", "base_mape")}
                                        for k, v in fit_rep.get("mixed+mapping", {}).items()}}
    return d


def overhead_entry(cal: Any, origin: str) -> dict[str, Any]:
    """A platform file's ``overhead`` block from a CPU `Calibration` (see `platform._read_overhead`)."""
    c = cal.coef
    scale = c.get("layers", 0.0) or 1.0
    out = {"scale": scale, "per_layer_ms": c.get("executed_layers", c.get("ramped_layers", 0.0)),
           "per_network_ms": c.get("constant", 0.0)}
    if c.get("ramped_layers", 0.0):  # the per-layer cost a layer below the ramp pays its share of
        out["per_layer_ramp_ms"] = RAMP_MS
    if c.get("depthwise", 0.0):  # the depthwise term adds to the scale of the depthwise layers' time
        out["depthwise_scale"] = scale + c["depthwise"]
    for group, types in TYPE_GROUPS.items():  # a type group's term to that of its layers: a factor per type
        if c.get(group, 0.0):
            out["kind_scales"] = {label: (scale + c[group]) / scale for label in types}
    return {**out, "origin": origin, "fitted_on": list(cal.fitted_on)}


def without_overhead(plat: Platform) -> Platform:
    """A copy of ``plat`` without its network-level overhead: the raw layer-model sums that `with_overhead`
    must be fitted on (terms from an already calibrated platform would calibrate it twice)."""

    if plat.overhead is None:
        return plat
    d = plat.to_dict()
    d.pop("overhead", None)
    return Platform.from_dict(d, plat.name)


def with_overhead(plat: Platform, terms: Sequence[dict[str, float]], measured_ms: Sequence[float],
                  names: Sequence[str] = (), origin: str = "end-to-end calibration") -> tuple[Any, float]:
    """A copy of ``plat`` with its network-level overhead fitted on (terms, measured) pairs; and the LOO MAPE.

    ``terms`` must come from estimates by ``plat`` without overhead (`Estimate.terms`); ``origin`` says
    where the measurements come from (the leave-one-out MAPE is appended).
    """
    from .calibrate_network import fit_cpu_calibration

    cal = fit_cpu_calibration(terms, np.asarray(measured_ms, dtype=np.float64), names)
    d = plat.to_dict()
    d["overhead"] = overhead_entry(cal, f"{origin}: leave-one-out MAPE {cal.loo_mape:.1%}")
    return Platform.from_dict(d, plat.name), float(cal.loo_mape)


#: layer types only the mapping pass produces, which no network as given holds: a convolution with a fused pool,
#: the blocked forms of a resize and of a view, a BatchNorm over rows, a folded channel shuffle, pools of a plain
#: tensor
MAPPED_TYPES = frozenset(t.label for t in (LayerType.CONV_POOL, LayerType.BLOCKED_RESIZE, LayerType.BLOCKED_RESHAPE,
                                           LayerType.ROW_BATCH_NORM, LayerType.CHANNEL_SHUFFLE,
                                           LayerType.PLAIN_MAX_POOL, LayerType.PLAIN_AVG_POOL))


def modelled_types(platform: Platform) -> frozenset[str]:
    """The layer types of a network that ``platform`` has a model of (its ``layers`` but the ``Base`` fallback
    and `MAPPED_TYPES`)."""
    return frozenset(platform.layers) - {"Base"} - MAPPED_TYPES
