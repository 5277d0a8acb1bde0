"""The tree is plain data: it round-trips through JSON exactly and holds each kernel once."""

from __future__ import annotations

import json

import pytest
from engine_fakes import ROOT, StepSource, synthetic_measurement, variant

from search.engine.tree import DONE, Tree, Untried
from search.engine.types import Diagnosis, NodeContext, Proposal


def untried(prior: float, **knobs: int) -> Untried:
    candidate = variant(ROOT, **knobs)
    proposal = Proposal(source="tunable", title=f"{knobs}", rationale="test", candidate=candidate,
                        families=("occupancy",), params=dict(knobs))
    return Untried(prior=prior, proposal=proposal, candidate_hash=candidate.content_hash())


def grown_tree() -> Tree:
    tree = Tree.with_root(Proposal(source="root", title="naive", rationale="start", candidate=ROOT))
    root = tree.root
    root.state, root.measurement = DONE, synthetic_measurement(256, 1, 1)
    root.diagnosis = Diagnosis(bottleneck="latency", summary="latency-bound", evidence=("x",),
                               wants=("vectorize",))
    root.visits, root.value_sum = 2, 0.25
    root.add_untried([untried(0.3, BLOCK=512), untried(0.6, VEC=2), untried(0.3, BLOCK=128)])
    child = tree.add_child(0, root.untried.pop(0))
    child.state, child.measurement = DONE, synthetic_measurement(256, 1, 2)
    child.reward, child.reward_terms = 0.25, {"log_speedup": 0.2, "sol_dram_pct": 0.05}
    child.visits, child.value_sum = 1, 0.25
    child.deltas_vs_parent = child.deltas_vs_root = {"time": 0.82}
    child.judge_error = "llm:x: timed out"
    tree.best_id = child.id
    tree.add_child(child.id, untried(0.5, VEC=4))
    return tree


def test_a_tree_round_trips_through_json_text_exactly():
    tree = grown_tree()

    text = json.dumps(tree.to_dict())
    restored = Tree.from_dict(json.loads(text))

    assert restored.to_dict() == tree.to_dict()
    assert json.dumps(restored.to_dict()) == text
    assert restored.best_id == 1 and restored[1].judge_error == "llm:x: timed out"
    assert restored.find(variant(ROOT, VEC=4).content_hash()) == 2


def test_the_root_is_pending_and_proposed_by_root():
    tree = Tree.with_root(Proposal(source="root", title="naive", rationale="", candidate=ROOT))

    assert tree.root.proposal.source == "root"
    assert tree.root.state == "pending"
    assert tree.find(ROOT.content_hash()) == 0
    assert [node.id for node in tree.pending()] == [0]


def test_untried_proposals_stay_sorted_by_prior_with_ties_in_proposal_order():
    tree = grown_tree()

    titles = [item.proposal.title for item in tree.root.untried]
    tree.root.add_untried([untried(0.9, UNROLL=2), untried(0.3, UNROLL=4)])

    assert titles == ["{'BLOCK': 512}", "{'BLOCK': 128}"]
    assert [item.prior for item in tree.root.untried] == [0.9, 0.3, 0.3, 0.3]
    assert tree.root.untried[-1].proposal.title == "{'UNROLL': 4}"


def test_a_kernel_already_in_the_tree_cannot_be_added_again():
    tree = grown_tree()

    with pytest.raises(ValueError, match="already node"):
        tree.add_child(0, untried(0.5, VEC=2))


def test_path_runs_from_the_root_to_the_node():
    tree = grown_tree()

    assert [node.id for node in tree.path(2)] == [0, 1, 2]
    assert tree[2].depth == 2 and tree[2].parent == 1
    assert tree[1].children == [2]


def test_a_node_row_carries_what_the_ui_lists():
    row = grown_tree()[1].row()

    assert row["title"] == "{'VEC': 2}" and row["state"] == "done" and row["status"] == "passed"
    assert row["value"] == pytest.approx(0.25) and row["visits"] == 1


def test_the_step_source_used_by_these_tests_changes_one_knob_at_a_time():
    context = NodeContext(task="relu", candidate=ROOT, measurement=None, diagnosis=None)

    titles = sorted(p.title for p in StepSource().propose(context))

    assert titles == ["BLOCK 256->128", "BLOCK 256->512", "UNROLL 1->2", "VEC 1->2"]
