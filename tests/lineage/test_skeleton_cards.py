"""Skeleton cards: induced from the recorded lineages by family, proposed on any kernel
that lifts to their family, with the node's own task's lineage left out on request."""

from __future__ import annotations

import pytest

from lineage.engine import skeleton_cards
from lineage.engine.skills import SkillSource
from profiling.harness import tasks
from profiling.harness.candidate import Candidate
from search.engine import forms
from search.engine.types import NodeContext


def naive(name: str) -> NodeContext:
    task = tasks.get(name)
    candidate = Candidate.from_source_and_plan(task.naive_source, task.naive_plan)
    return NodeContext(task=name, candidate=candidate, measurement=None, diagnosis=None)


@pytest.fixture(scope="module")
def cards():
    return {card["id"]: card for card in skeleton_cards.recorded()}


def test_the_row_card_is_induced_from_every_row_lineage_whose_plain_state_lifts(cards):
    card = cards["skeleton:rows.block_per_row"]
    assert card["family"] == "row_map_reduce"
    assert card["tasks"] == ["cross_entropy", "layernorm", "softmax"]
    assert all(e["family_found"] == "its plain state lifts" for e in card["evidence"]["steps"])
    assert card["expected_by_task"]["softmax"] > 10  # the recorded BLOCK_PER_ROW step: 28.6x on the H200


def test_a_lineage_whose_plain_state_does_not_lift_is_placed_by_its_tasks_naive_kernel(cards):
    # reduce_sum's plain state computes its sum before the bounds check; its naive kernel,
    # the textbook tree into an atomic, lifts (forms/block_reduce.py)
    card = cards["skeleton:full.grid_stride_accumulate"]
    assert card["tasks"] == ["reduce_sum"]
    assert card["evidence"]["steps"][0]["family_found"].startswith("its task's naive kernel lifts")


def test_a_task_whose_kernels_do_not_lift_is_placed_by_its_tensor_shapes():
    reduce_sum, relu, softmax = (tasks.get(name) for name in ("reduce_sum", "relu", "softmax"))
    assert skeleton_cards.family_from_shapes(reduce_sum) == forms.FULL_REDUCE  # 1-D in, one value out
    assert skeleton_cards.family_from_shapes(relu) == forms.MAP  # 1-D in and out, the same shape
    assert skeleton_cards.family_from_shapes(softmax) is None  # rows: the shapes alone do not say


def test_a_card_expects_nothing_once_its_only_lineage_is_left_out(cards):
    card = cards["skeleton:map.vec4"]
    assert skeleton_cards.expected_speedup(card["evidence"]["steps"], leave_out="relu") is None
    assert skeleton_cards.expected_speedup(card["evidence"]["steps"]) > 1


def test_the_skills_source_instantiates_a_card_with_the_nodes_own_math_and_names_its_lineages(cards):
    source = SkillSource(cards=[], skeleton_cards=list(cards.values()), leave_out_own=True)
    (proposal,) = source.propose(naive("layernorm"))
    assert proposal.source == "skill:skeleton:rows.block_per_row"
    assert proposal.params["lineages"] == ["cross_entropy", "softmax"]  # its own left out
    assert "gamma[j]" in proposal.candidate.source  # layernorm's own epilogue, moved into the skeleton
    assert proposal.candidate.launches[0].grid == ("max((M), 1)",)


def test_with_its_own_lineage_left_out_a_single_lineage_card_is_not_proposed(cards):
    source = SkillSource(cards=[], skeleton_cards=list(cards.values()), leave_out_own=True)
    assert source.propose(naive("relu")) == []
    kept = SkillSource(cards=[], skeleton_cards=list(cards.values()), leave_out_own=False)
    assert {p.source for p in kept.propose(naive("relu"))} == {"skill:skeleton:map.grid_stride",
                                                               "skill:skeleton:map.vec4"}


def test_a_kernel_that_does_not_lift_gets_no_skeleton(cards):
    source = SkillSource(cards=[], skeleton_cards=list(cards.values()))
    assert source.propose(naive("topk")) == []  # a selection loop that is no perfect nest: no form reads it
    # the textbook tree in shared memory now lifts (forms/block_reduce.py): its card is offered
    offered = {p.source for p in source.propose(naive("reduce_sum"))}
    assert offered == {"skill:skeleton:full.grid_stride_accumulate"}


def test_the_window_card_comes_from_maxpool3ds_lineage_placed_by_its_naive_kernel(cards):
    """maxpool3d's plain state is written with helper functions that do not lift; its task's
    naive kernel (the same computation) does, as a window: its WINDOW_REUSE and UNROLL steps
    make the card. With its own lineage left out, nothing is left to propose for it."""
    card = cards["skeleton:window.walk_rows"]
    assert card["tasks"] == ["maxpool3d"] and card["intents"] == ["WINDOW_REUSE", "UNROLL"]
    steps = card["evidence"]["steps"]
    assert all(e["family_found"].startswith("its task's naive kernel lifts") for e in steps)
    (proposal,) = SkillSource(cards=[], skeleton_cards=[card]).propose(naive("maxpool3d"))
    assert proposal.source == "skill:skeleton:window.walk_rows" and "optiml_rest" in proposal.candidate.source
    assert SkillSource(cards=[], skeleton_cards=[card], leave_out_own=True).propose(naive("maxpool3d")) == []


def test_skeleton_cards_join_the_recorded_cards_unless_turned_off(monkeypatch):
    monkeypatch.delenv("OPTIML_SKILL_SKELETONS", raising=False)
    monkeypatch.delenv("OPTIML_SKILL_CARDS", raising=False)
    assert SkillSource().skeleton_cards  # the default library: skeleton cards too
    assert SkillSource(cards=[]).skeleton_cards == []  # a chosen set of token cards: those alone
    assert SkillSource(skeletons=False).skeleton_cards == []  # a replay of runs recorded before them
    monkeypatch.setenv("OPTIML_SKILL_SKELETONS", "0")
    assert SkillSource().skeleton_cards == []
    monkeypatch.setenv("OPTIML_SKILL_CARDS", "skeletons")
    monkeypatch.delenv("OPTIML_SKILL_SKELETONS")
    assert SkillSource().cards == [] and SkillSource().skeleton_cards


def test_admission_needs_a_trial_that_reproduces_the_effect_the_other_lineages_expect(cards):
    card = cards["skeleton:rows.block_per_row"]
    admitted = skeleton_cards.admit(card, [{"task": "softmax", "passed": True, "speedup": 9.0}])
    assert admitted["status"] == "admitted"
    slow = skeleton_cards.admit(card, [{"task": "softmax", "passed": True, "speedup": 1.5},
                                       {"task": "layernorm", "passed": False, "speedup": None}])
    assert slow["status"] == "rejected" and len(slow["risks"]) == 2
    trial = {"task": "relu", "passed": True, "speedup": 2.0}
    single = skeleton_cards.admit(cards["skeleton:map.vec4"], [trial])
    assert single["status"] == "unproven"


def test_a_trial_is_held_to_what_its_kernel_can_show_above_its_physics_floor(cards):
    """A kernel 1.5x above its floor cannot show a 2x step: the expectation on it is its
    headroom. Without the floor, or with room to spare, the lineages' expectation stands."""
    card = cards["skeleton:rows.block_per_row"]
    near = {"task": "gemv", "passed": True, "speedup": 1.3, "start_ms": 0.15, "floor_ms": 0.1}
    assert skeleton_cards.admit(card, [near])["status"] == "admitted"  # log 1.3 >= 0.5 log 1.5
    assert skeleton_cards.admit(card, [{**near, "speedup": 1.1}])["status"] == "rejected"
    assert skeleton_cards.admit(card, [{**near, "floor_ms": None}])["status"] == "rejected"
    far = {**near, "start_ms": 10.0}  # 100x above the floor: the lineages' 17x expectation
    (trial,) = skeleton_cards.admit(card, [far])["trials"]
    assert trial["expected_here"] == trial["expected_without_it"] and not trial["reproduced"]


def test_the_contraction_card_comes_from_sgemms_and_conv2ds_lineages_and_tiles_a_product(cards):
    """conv2d's plain state lifts as a product over its channel and tap nest (implicit
    GEMM): its lineage's tiling steps join sgemm's in the card's evidence."""
    card = cards["skeleton:contraction.smem_register_tile"]
    assert card["tasks"] == ["conv2d", "sgemm"] and card["intents"] == ["SMEM_TILE", "REG_TILE"]
    assert {e["task"] for e in card["evidence"]["steps"] if e["intent"] == "REG_TILE"} == {"conv2d", "sgemm"}
    source = SkillSource(cards=[], skeleton_cards=list(cards.values()))
    (proposal,) = source.propose(naive("sgemm"))
    assert proposal.source == "skill:skeleton:contraction.smem_register_tile"
    assert "__shared__ __align__(16) float optiml_As" in proposal.candidate.source


def test_only_cards_admitted_by_transfer_serve_searches_unless_asked_for_all(cards, monkeypatch):
    monkeypatch.delenv("OPTIML_SKILL_ADMISSION", raising=False)
    status = {cid: card["admission"]["status"] for cid, card in cards.items()}
    served = {card["id"] for card in SkillSource().skeleton_cards}
    assert served == {cid for cid, s in status.items() if s == "admitted"}
    monkeypatch.setenv("OPTIML_SKILL_ADMISSION", "any")
    assert {card["id"] for card in SkillSource().skeleton_cards} == set(cards)


def test_a_single_lineage_card_is_admitted_by_a_transfer_task_of_its_family(cards):
    card = cards["skeleton:contraction.smem_register_tile"]
    expected = skeleton_cards.expected_speedup(card["evidence"]["steps"])
    reproduced = skeleton_cards.admit(card, [{"task": "addmm_gelu", "passed": True, "speedup": expected}])
    assert reproduced["status"] == "admitted"
    wrong = skeleton_cards.admit(card, [{"task": "addmm_gelu", "passed": False, "speedup": expected}])
    assert wrong["status"] == "rejected" and wrong["risks"] == ["addmm_gelu: failed the gate"]


def test_a_plan_of_several_launches_gets_a_skeleton_per_launch_its_own_lineage_left_out(cards):
    """The naive attention's three launches (a product, a row softmax, a product), each
    scheduled by a card induced from other tasks, the other launches kept."""
    source = SkillSource(cards=[], skeleton_cards=list(cards.values()), leave_out_own=True)
    found = source.propose(naive("self_attention"))
    titles = sorted(p.title.split(" (from")[0] for p in found)
    assert titles == ["BLOCK_PER_ROW: rows.block_per_row on launch 1 (softmax_rows_inplace)",
                      "SMEM_TILE: contraction.smem_register_tile on launch 0 (attention_scores)",
                      "SMEM_TILE: contraction.smem_register_tile on launch 2 (attention_output)"]
    assert all("self_attention" not in p.params["lineages"] for p in found)
    assert all(len(p.candidate.launches) == 3 for p in found)
