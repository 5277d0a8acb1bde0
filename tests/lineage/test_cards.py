"""Skill cards induced from lineages (lineage/engine/cards.py): the grouping by intent and
each field's derivation on a scripted lineage (tests/lineage/scripted_gpu.py: SYNTHETIC
NUMBERS), then what the cards say from the lineages and probes recorded on the H200."""

import json
from pathlib import Path

import pytest

from lineage.engine import cards, experts, probes
from lineage.engine.__main__ import main
from lineage.engine.walker import Lineage, walk
from tests.lineage.scripted_gpu import GAIN, ScriptedGpu

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"
LINEAGES = sorted(RESULTS.glob("*-h200-lineages*/lineage-*.json"))
PROBES = sorted(RESULTS.glob("*-h200-probes/probes-*.json"))


def scripted_cards(**failing):
    relu = experts.load("relu")
    lineage = walk(relu, ScriptedGpu(relu, **failing))
    return lineage, {c.intent: c for c in cards.induce([lineage])}


def test_each_intent_of_a_lineage_is_one_card_with_its_steps_as_evidence():
    lineage, by_intent = scripted_cards()
    assert set(by_intent) == {"RESTRICT", "LAUNCH_BOUNDS", "GRID_STRIDE", "VEC4", "UNROLL"}
    vec4 = by_intent["VEC4"]
    steps = [t for t in lineage.transitions if t.intent == "VEC4"]
    assert vec4.evidence["transitions"] == len(steps) and vec4.evidence["lineages"] == 1
    assert vec4.effects["speedup"]["median"] == pytest.approx(GAIN["OPT_VEC4"])
    assert vec4.evidence["helped"] == len(steps) and not vec4.risks
    # The vector: the plainest place the step was taken (only GRID_STRIDE, which it needs, on).
    (shown,) = vec4.vector
    assert shown["before"] == "OPT_GRID_STRIDE" and "float4" in shown["source_diff"]
    assert vec4.scope == {"language": "CUDA", "arch": "sm_90", "gpu": ["scripted"], "tasks": ["relu"],
                          "roofline": ["memory-bound"], "proposers": ["flags"]}
    assert vec4.preconditions["order"]["by_task"]["relu"]["always_on_before"] == ["GRID_STRIDE"]
    # One lineage: its rewrites are concrete (nothing to anti-unify against), and say so.
    assert vec4.anchor["status"] == "concrete only" and vec4.anchor["generalised"] == 0
    assert all(not r["generalised"] for r in vec4.anchor["rewrites"])
    without = {c.intent: c for c in cards.induce([lineage], sources=None)}["VEC4"]
    assert without.anchor["status"] == "not induced"  # said, not pretended
    assert json.loads(json.dumps(vec4.to_dict()))["intent"] == "VEC4"


def test_a_step_that_made_the_kernel_slower_is_a_risk():
    relu = experts.load("relu")
    lineage = walk(relu, ScriptedGpu(relu))
    step = next(t for t in lineage.transitions if t.intent == "UNROLL")
    step.speedup = 0.9  # as if unrolling had cost 10 % in this context
    unroll = {c.intent: c for c in cards.induce([lineage])}["UNROLL"]
    assert {"kind": "slower", "task": "relu", "before": step.before, "speedup": 0.9} in unroll.risks
    assert unroll.evidence["hurt"] == 1


def test_roofline_classes_follow_the_tasks_arithmetic_intensity():
    assert cards.roofline_class("relu") == "memory-bound"
    assert cards.roofline_class("softmax") == "memory-bound"
    assert cards.roofline_class("sgemm") == "compute-bound"
    assert cards.roofline_class("self_attention") == "compute-bound"


@pytest.fixture(scope="module")
def recorded_cards():
    lineages = [Lineage.from_dict(json.loads(p.read_text())) for p in LINEAGES]
    found = {}
    for path in PROBES:
        task, _gpu, ps = probes.from_dict(json.loads(path.read_text()))
        found[task] = ps
    return lineages, {c.intent: c for c in cards.induce(lineages, found)}


def test_the_h200_lineages_give_a_card_for_every_intent_they_used(recorded_cards):
    lineages, by_intent = recorded_cards
    used = {t.intent for lineage in lineages for t in lineage.transitions}
    assert set(by_intent) == used
    assert sum(c.evidence["transitions"] for c in by_intent.values()) == sum(
        len(lineage.transitions) for lineage in lineages)
    vec4 = by_intent["VEC4"]
    assert vec4.evidence["lineages"] == 10 and len(vec4.vector) == 10  # one step shown per lineage


def test_the_probes_make_order_preconditions_and_risks(recorded_cards):
    _, by_intent = recorded_cards
    tensor_cores = by_intent["TENSOR_CORES"]
    assert set(tensor_cores.preconditions["order"]["required"]["DOUBLE_BUFFER"]) == {"sgemm", "conv2d"}
    refused = [r for r in tensor_cores.risks if r["kind"] == "refused_without"]
    assert {(r["task"], r["without"], r["guard"]) for r in refused} >= {
        ("sgemm", "DOUBLE_BUFFER", "compile"), ("self_attention", "SMEM_PADDING", "compile")}
    assert by_intent["ASYNC_COPY"].preconditions["order"]["required"] == {"TENSOR_CORES": ["sgemm"]}


def test_the_alternative_orders_say_when_a_step_pays(recorded_cards):
    _, by_intent = recorded_cards
    # sgemm's launch bounds (two blocks a SM, 128 registers) pay once the double buffer is in.
    bounds = {(c["task"], c["with"]): c for c in by_intent["LAUNCH_BOUNDS"].preconditions["context"]}
    with_buffer = bounds[("sgemm", "DOUBLE_BUFFER")]
    assert with_buffer["median_speedup_with"] > 1 + cards.NOISE >= with_buffer["median_speedup_without"]


def test_induce_writes_the_cards_and_refuses_bad_input(tmp_path):
    out, lines = tmp_path / "cards.json", []
    code = main(["induce", "--lineages", *map(str, LINEAGES), "--probes", *map(str, PROBES),
                 "--out", str(out)], out=lines.append)
    assert code == 0 and lines[-1].startswith("24 cards from 10 lineages")
    written = json.loads(out.read_text())
    assert written["format"] == cards.CARDS_FORMAT and len(written["cards"]) == 24
    assert main(["induce", "--lineages", str(tmp_path / "none-*.json"), "--out", str(out)],
                out=lines.append) == 2 and lines[-1] == "error: no lineage files matched"
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["induce", "--lineages", str(bad), "--out", str(out)], out=lines.append) == 2


def test_the_cards_rewrites_generalise_and_match_naive_kernels_they_were_not_learned_from(recorded_cards):
    _, by_intent = recorded_cards
    restrict = by_intent["RESTRICT"].anchor
    assert restrict["status"] == "induced"
    const_input = next(r for r in restrict["rewrites"] if r["before"] == "const float * ?0")
    assert const_input["after"] == "const float * __restrict__ ?0" and const_input["generalised"]
    assert len(const_input["tasks"]) >= 5
    # sgemm's, conv2d's and self_attention's experts never had the flag: their naive
    # kernels are matched all the same.
    assert {"sgemm", "conv2d", "self_attention"} <= set(const_input["matches_naive_elsewhere"])
    fast_math = by_intent["FAST_MATH"].anchor
    exp = next(r for r in fast_math["rewrites"] if r["after"] == "__expf(?0)")
    assert exp["before"] == "expf(?0)" and "self_attention" in exp["matches_naive_elsewhere"]
    # Every rewrite kept is closed and specific enough to apply.
    for card in by_intent.values():
        assert all(r["usable"] and not r["open"] for r in card.anchor.get("rewrites", []))
