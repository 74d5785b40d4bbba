"""Roofline / refined roofline on the published ZCU102 and NCS2 parameters vs the original's outputs.

The README of ../shared/annette-reference lists the totals the original implementation produced. The
compat platform (original semantics, defects included), through `estimate` like any platform, must
reproduce every one within 2%. The shipped
platforms fix the original's defects, so their totals differ where a graph hits a defect; those
differences are listed here with their cause and checked to stay what they are.
"""

from __future__ import annotations


from annette_torch.platform.annette_compat import compat_platform, layers_from_annette, mapping_from_annette
from annette_torch.frontends.annette_json import from_annette_json
from annette_torch.platform import Platform
from annette_torch.estimator import estimate

COLUMNS = [("dnndk-roofline", "dnndk"), ("dnndk-ref_roofline", "dnndk"), ("ncs2-roofline", "ov"),
           ("ncs2-ref_roofline", "ov")]

# Graphs on which the compat platform cannot match: the graph itself has unusable shapes that the original
# treats as empty tensors while we take the shape from the neighbouring layer.
COMPAT_EXCEPTIONS = {
    # densenet121: its transition Pad layers have output_shape [0] and the following AvgPools input_shape
    # [0]; the original costs them as empty tensors (~7% of the NCS2 total, <1% on ZCU102).
    "densenet121": 0.08,
    # cf_cityscapes: -1% (dilated convolutions; within the 2% target anyway, listed for completeness)
}

# Fixed defects and how far each moves the totals of the shipped-semantics platform (upper bounds, |rel|):
#  * Add reads both inputs, Concat all inputs (the original counted the first input only): <= ~5% on ZCU102;
#  * ConvPool without its own model uses the Conv model instead of Base with zero operations (NCS2 only:
#    vgg16 +47%, openpose/yolov2/inception +10..14%);
#  * the "h" unrolling dimension is the output height (the original used the width for Conv): only
#    non-square maps, e.g. cf_yolov3 on dnndk-ref_roofline +15%;
#  * densenet121's unusable Pad shapes as above.
FIXED_BOUNDS = {"dnndk-roofline": 0.06, "dnndk-ref_roofline": 0.16, "ncs2-roofline": 0.48, "ncs2-ref_roofline": 0.48}


def _table(ref_dir):
    rows = {}
    for line in (ref_dir / "README.md").read_text().splitlines():
        if line.startswith("| ") and not line.startswith("| graph") and not line.startswith("|---"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            rows[cells[0]] = [float(c) if c else None for c in cells[1:]]
    return rows


def _platforms(ref_dir, compat: bool):
    out = {}
    for lm, mm in COLUMNS:
        lp, mp = ref_dir / "models/layer" / f"{lm}.json", ref_dir / "models/mapping" / f"{mm}.json"
        out[lm] = compat_platform(lp, mp, lm) if compat else Platform(lm, layers_from_annette(lp), mapping_from_annette(mp))
    return out


def _totals(ref_dir, compat):
    plats = _platforms(ref_dir, compat)
    res = []
    for graph, refs in _table(ref_dir).items():
        net = from_annette_json(ref_dir / "graphs" / f"{graph}.json")
        for (lm, _), ref in zip(COLUMNS, refs):
            if ref is None:
                continue
            res.append((graph, lm, estimate(net, plats[lm]).device_ms, ref))  # (compat platforms too)
    return res


def test_table_has_all_rows(ref_dir):
    assert len(_table(ref_dir)) == 25


def test_compat_reproduces_reference_within_2_percent(ref_dir):
    bad = []
    for graph, lm, ours, ref in _totals(ref_dir, compat=True):
        tol = COMPAT_EXCEPTIONS.get(graph, 0.02)
        if abs(ours / ref - 1) > tol:
            bad.append(f"{graph}/{lm}: {ours:.3f} vs {ref:.3f}")
    assert not bad, bad


def test_compat_matches_exactly_where_no_exception(ref_dir):
    errs = [abs(o / r - 1) for g, _, o, r in _totals(ref_dir, compat=True) if g not in COMPAT_EXCEPTIONS]
    assert max(errs) < 0.011  # cf_cityscapes -1.0%, all others < 0.3%
    assert sorted(errs)[len(errs) // 2] < 0.001


def test_fixed_semantics_differ_only_by_documented_bounds(ref_dir):
    res = _totals(ref_dir, compat=False)
    for graph, lm, ours, ref in res:
        assert abs(ours / ref - 1) <= FIXED_BOUNDS[lm], (graph, lm, ours, ref)
    within = sum(abs(o / r - 1) <= 0.02 for _, _, o, r in res)
    assert within >= len(res) // 2  # most graphs hit no defect at all


def test_shipped_platform_equals_converted_reference(ref_dir):
    """platforms/zcu102-dnndk.json holds exactly the published numbers; ncs2.json (fitted from NCS2 reports) holds
    them exactly where it says a model is the published one."""
    from annette_torch.platform import load_platform
    zcu = load_platform("zcu102-dnndk")
    conv = layers_from_annette(ref_dir / "models/layer" / "dnndk-ref_roofline.json")
    assert {k: m.to_dict() for k, m in zcu.layers.items()} == {k: m.to_dict() for k, m in conv.items()}
    assert zcu.mapping.to_dict() == mapping_from_annette(ref_dir / "models/mapping" / "dnndk.json").to_dict()
    ncs2 = load_platform("ncs2")
    published = layers_from_annette(ref_dir / "models/layer" / "ncs2-ref_roofline.json")
    marked = {k: m for k, m in ncs2.layers.items() if str(getattr(m, "origin", "")).startswith("published:")}
    assert {"DepthwiseConv"} <= set(marked)
    for k, m in marked.items():
        ref = {key: v for key, v in published[k].to_dict().items() if key != "origin"}
        assert {key: v for key, v in m.to_dict().items() if key != "origin"} == ref, k
