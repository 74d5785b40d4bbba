"""Accel-NASBench space: rebuilt candidates have the dataset's parameter counts; IR and torch builders agree."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from annette_torch import trace
from annette_torch.ir import LayerType
from annette_torch.search.spaces import anb
from annette_torch.search.spaces.registry import ANBSpace, get_space, same_network

CSV = Path(__file__).resolve().parents[1].parent / "shared" / "calibration" / "accel-nasbench" / \
    "zcu102_nas_candidates.csv"

#: (stage choices as in the dataset's block{b}_e/_k/_l/_se columns, its ``params`` column in millions), copied
#: from three rows of Accel-NASBench's ZCU102 sample (result_2762, result_3370, result_3343)
PINNED = [
    ([(1, 3, 2, True), (1, 5, 2, True), (6, 5, 3, True), (4, 5, 3, True), (4, 5, 2, True), (6, 3, 1, True),
      (4, 5, 2, False)], 3.699654),
    ([(1, 5, 3, True), (1, 3, 1, True), (1, 5, 2, True), (1, 5, 1, True), (4, 5, 2, False), (1, 3, 3, True),
      (6, 3, 3, False)], 5.153794),
    ([(4, 5, 2, False), (1, 5, 1, True), (6, 3, 1, False), (4, 3, 2, False), (1, 3, 1, False), (6, 5, 3, False),
      (4, 3, 1, True)], 3.46198),
]


@pytest.mark.parametrize("arch,params_m", PINNED)
def test_pinned_candidates_have_the_datasets_parameter_count(arch, params_m):
    assert round(anb.params(arch) / 1e6, 3) == round(params_m, 3)


@pytest.mark.parametrize("arch,params_m", PINNED[:1])
def test_torch_builder_traces_to_the_direct_ir_and_counts_the_same_parameters(arch, params_m):
    module = anb.build_module(arch)
    assert sum(p.numel() for p in module.parameters()) == anb.params(arch)
    assert same_network(trace(module, anb.INPUT_SHAPE), anb.build_network(arch))


def test_every_candidate_of_the_shared_sample_rebuilds_to_its_parameter_count():
    if not CSV.is_file():
        pytest.skip("../shared/calibration/accel-nasbench not present")
    with open(CSV, encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) >= 100
    off = [r["source_file"] for r in rows
           if round(anb.params(anb.from_row(r)) / 1e6, 3) != round(float(r["params"]), 3)]
    assert not off, f"{len(off)} candidates rebuild to another parameter count: {off[:5]}"


def test_structure_se_blocks_and_residuals():
    arch = [(6, 5, 3, True)] * 5 + [(6, 5, 4, True), (6, 5, 3, True)]
    net = anb.build_network(arch)
    blocks = sum(c[2] for c in arch)
    labels = net.summary()
    assert labels["HardSigmoid"] == labels["Mul"] == blocks
    # residual: every block but the first of each stage, and stage 0's first (32 -> 16) has none
    assert labels["Add"] == blocks - len(arch)
    assert labels["DepthwiseConv"] == blocks
    dw = np.flatnonzero(net.types == LayerType.DEPTHWISE_CONV)
    assert set(net.kh[dw].tolist()) == {5}
    assert net.out_shape(len(net) - 1) == (1, 1000, 1, 1)
    plain = anb.build_network([(1, 3, 1, False)] * 7)
    assert "HardSigmoid" not in plain.summary() and "Mul" not in plain.summary()


def test_round8_is_efficientnets_rule():
    assert [anb.round8(v) for v in (16, 20, 36, 44, 96, 100, 1.0)] == [16, 24, 40, 48, 96, 104, 8]
    for v in range(8, 2000):
        r = anb.round8(v)
        assert r % 8 == 0 and r >= 0.9 * v and abs(r - v) <= 8


def test_encoding_round_trip_and_errors():
    arch = anb.validate(PINNED[0][0])
    text = anb.encode(arch)
    assert text.startswith("e1k3l2+se-e1k5l2+se-e6k5l3+se")
    assert anb.decode(text) == arch
    with pytest.raises(ValueError, match="outside the space"):
        anb.validate([(2, 3, 1, False)] + [(1, 3, 1, False)] * 6)
    with pytest.raises(ValueError, match="one choice per stage"):
        anb.validate([(1, 3, 1, False)])
    with pytest.raises(ValueError, match="is not 'e<E>k<K>l<L>"):
        anb.decode("e1k3-x")
    with pytest.raises(ValueError, match="lacks column"):
        anb.from_row({"block0_e": "1"})


def test_registered_under_both_names_and_samples_valid_architectures():
    optuna = pytest.importorskip("optuna")
    for name in ("anb", "accel-nasbench"):
        assert isinstance(get_space(name), ANBSpace)
    sp = get_space("anb")
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    for _ in range(5):
        trial = study.ask()
        arch = sp.suggest(trial)
        assert sp.decode(sp.encode(arch)) == arch
        assert len(sp.network(arch)) > 50
        study.tell(trial, 0.0)
