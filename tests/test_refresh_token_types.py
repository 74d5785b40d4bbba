"""scripts/refresh_cpu_token_types.py: token-type models and rules go into a shipped file, the rest stays; and
the shipped CPU files hold fitted models of the attention-era types and load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import annette_torch as at
from annette_torch.platform import Platform

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = [ROOT / "platforms" / f"{p}.json" for p in ("ort-cpu", "openvino-cpu")] + sorted(
    (ROOT / "platforms" / "machines").glob("*/*.json"))


def test_merge_copies_token_types_and_their_rules_only(script):
    mod = script("refresh_cpu_token_types")
    shipped = json.loads((ROOT / "platforms" / "ort-cpu.json").read_text())
    cal = json.loads(json.dumps(shipped))
    cal["layers"]["MatMul"] = cal["layers"]["Conv"]
    cal["layers"]["Conv"] = cal["layers"]["Add"]  # not a token type: must not be copied
    cal["mapping"]["rules"].append({"name": "FullyConnected+GELU", "primary": ["FullyConnected"],
                                    "secondary": ["GELU"], "origin": "fused in 100% of 40 measured pairs"})
    out, changed = mod.merge(shipped, cal, "assumed: test")
    assert "MatMul" in changed and out["layers"]["MatMul"]["origin"] == "assumed: test"
    assert out["layers"]["Conv"] == shipped["layers"]["Conv"]
    names = [r["name"] for r in out["mapping"]["rules"]]
    assert "FullyConnected+GELU" in names and len(names) == len(set(names))
    assert [r for r in out["mapping"]["rules"] if r["name"] == "Conv+BatchNorm"] == \
        [r for r in shipped["mapping"]["rules"] if r["name"] == "Conv+BatchNorm"]
    assert "MatMul" in Platform.from_dict(out, "test").layers


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.parent.name + "/" + p.name)
def test_shipped_cpu_files_model_the_attention_era_types_and_round_trip(path):
    d = json.loads(path.read_text())
    for t in ("MatMul", "Softmax", "LayerNorm", "GELU", "Transpose"):
        assert t in d["layers"], f"{path.name}: no {t} model"
        assert "measured" in d["layers"][t].get("origin", "") or "calibrate" in d["layers"][t].get("origin", "")
    plat = at.load_platform(str(path))
    again = Platform.from_dict(json.loads(json.dumps(plat.to_dict())), str(path))
    assert set(again.layers) == set(plat.layers) and len(again.mapping.rules) == len(plat.mapping.rules)


def test_a_quick_calibration_shipped_keeps_the_models_of_the_types_its_plan_does_not_measure(script):
    mod = script("ship_cpu_machine_file")
    previous = json.loads((ROOT / "platforms" / "ort-cpu.json").read_text())
    quick = json.loads(json.dumps(previous))
    for t in ("Tanh", "Softplus"):
        del quick["layers"][t]
    quick["layers"]["MatMul"].pop("origin", None)
    quick["mapping"]["rules"] = quick["mapping"]["rules"][:3]
    out, kept = mod.keep_unmeasured(quick, previous, "2026-12-05")
    assert kept == ["Softplus", "Tanh"]
    assert {k: v for k, v in out["layers"]["Tanh"].items() if k != "origin"} == \
        {k: v for k, v in previous["layers"]["Tanh"].items() if k != "origin"}
    assert "kept from the previous file" in out["layers"]["Tanh"]["origin"]
    assert out["layers"]["MatMul"]["origin"] == "measured on this machine on 2026-12-05 (annette calibrate --quick)"
    assert out["mapping"] == quick["mapping"] and "Tanh" not in quick["layers"]  # (the input is not modified)
    assert set(Platform.from_dict(out, "x.json").layers) == set(previous["layers"])
    again, _ = mod.keep_unmeasured(quick, out, "2026-12-06")  # shipped once more: the origin says it once
    assert again["layers"]["Tanh"]["origin"] == out["layers"]["Tanh"]["origin"]
