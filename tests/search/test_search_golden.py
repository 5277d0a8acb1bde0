"""The search on the replay evaluator: a golden tree, determinism, exact resume, dedup,
judge fallback and events.

The measurements are the SYNTHETIC table of engine_fakes.py (made-up numbers that test the
engine's mechanics, not any kernel's speed). Regenerate the golden file after an
intended change of behaviour with:

    UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/search/test_search_golden.py -p no:django
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from engine_fakes import ROOT, FailingJudge, FixedJudge, StepSource, variant, write_recordings

from search.engine.evaluators import NO_RECORDING, ReplayEvaluator
from search.engine.explain import render_why, why_faster
from search.engine.reward import Guardrails
from search.engine.search import Search, SearchConfig, run_search
from search.engine.types import Measurement, NodeContext, Proposal

GOLDEN = Path(__file__).with_name("golden") / "replay_tree_relu_seed7.json"
BUDGET = 30


def new_search(judge=None, sources=None, **config) -> Search:
    return Search("relu", ROOT, judge=judge or FixedJudge(), sources=sources or [StepSource()],
                  fallback_judge=FixedJudge(), root_title="naive",
                  config=SearchConfig(budget=BUDGET, seed=7, **config))


def golden_rows(search: Search) -> list[list]:
    return [[n.id, n.parent, n.proposal.title, n.state, n.visits, round(n.value, 6)]
            for n in (search.tree[i] for i in sorted(search.tree.nodes))]


def golden_text(actual: dict) -> str:
    """One node per line, so a diff of the golden file reads as a diff of the tree."""
    rows = ",\n".join(f"  {json.dumps(row)}" for row in actual["rows"])
    return (f'{{"best_id": {actual["best_id"]}, "evaluations": {actual["evaluations"]},\n'
            f' "rows": [\n{rows}\n ]}}\n')


@pytest.fixture
def recordings(tmp_path) -> Path:
    return write_recordings(tmp_path / "relu-synthetic.json")


def test_a_seeded_search_on_replayed_measurements_grows_the_golden_tree(recordings):
    search = run_search(new_search(), ReplayEvaluator(recordings))
    actual = {"rows": golden_rows(search), "best_id": search.tree.best_id,
              "evaluations": search.evaluations}

    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(golden_text(actual))
    assert actual == json.loads(GOLDEN.read_text())


def test_the_same_seed_grows_the_same_tree_and_another_seed_may_not(recordings):
    first = run_search(new_search(), ReplayEvaluator(recordings))
    second = run_search(new_search(), ReplayEvaluator(recordings))

    assert json.dumps(first.to_dict()) == json.dumps(second.to_dict())
    assert first.evaluations == BUDGET


def test_a_search_resumed_from_json_ends_where_an_uninterrupted_one_does(recordings):
    uninterrupted = run_search(new_search(), ReplayEvaluator(recordings), budget=BUDGET)

    half = run_search(new_search(), ReplayEvaluator(recordings), budget=15)
    text = json.dumps(half.to_dict())
    resumed = Search.from_dict(json.loads(text), FixedJudge(), [StepSource()],
                               fallback_judge=FixedJudge())
    run_search(resumed, ReplayEvaluator(recordings), budget=BUDGET)

    assert half.evaluations == 15
    assert json.dumps(resumed.to_dict()) == json.dumps(uninterrupted.to_dict())


def test_a_restored_search_hands_out_its_pending_nodes_again(recordings):
    search = new_search()
    [(root_id, _)] = search.ask(1)

    restored = Search.from_dict(json.loads(json.dumps(search.to_dict())), FixedJudge(), [StepSource()])

    assert [node_id for node_id, _ in restored.ask(3)] == [root_id]
    assert restored.ask(3) == []  # handed out once; nothing more until it is told


def test_parallel_asks_evaluate_each_kernel_once_and_reach_the_budget(recordings):
    submitted = []
    evaluator = ReplayEvaluator(recordings)
    original = evaluator.submit
    evaluator.submit = lambda task, candidate: (submitted.append(candidate.content_hash()),
                                                original(task, candidate))

    search = run_search(new_search(), evaluator, parallel=4)

    assert search.evaluations == BUDGET == len(submitted) == len(set(submitted))
    hashes = [node.candidate_hash for node in search.tree.nodes.values()]
    assert len(hashes) == len(set(hashes))


class EchoSource:
    """Proposes its parent's own kernel, the root's, and one variant twice."""

    name = "echo"

    def propose(self, context: NodeContext) -> list[Proposal]:
        def proposal(title, candidate):
            return Proposal(source="echo", title=title, rationale="", candidate=candidate)
        twice = variant(context.candidate, VEC=2) if context.candidate.tunables.get("VEC") is None \
            else variant(context.candidate, BLOCK=512)
        return [proposal("itself", context.candidate), proposal("the root", ROOT),
                proposal("once", twice), proposal("twice", twice)]


def test_kernels_already_in_the_tree_or_proposed_twice_are_dropped(recordings):
    search = run_search(new_search(sources=[EchoSource()]), ReplayEvaluator(recordings), budget=3)

    titles = [search.tree[i].proposal.title for i in sorted(search.tree.nodes)]
    assert titles == ["naive", "once", "once"]
    assert search.tree.root.dropped_duplicates == 3  # itself (= the root), the root, twice
    assert search.tree[1].dropped_duplicates == 3  # itself, the root, twice


def test_a_kernel_measured_before_is_reused_not_evaluated_again(recordings):
    first = run_search(new_search(), ReplayEvaluator(recordings), budget=5)
    known = {node.candidate_hash: node.measurement for node in first.tree.nodes.values()}
    submitted = []
    evaluator = ReplayEvaluator(recordings)
    original = evaluator.submit
    evaluator.submit = lambda task, candidate: (submitted.append(candidate.content_hash()),
                                                original(task, candidate))

    second = Search("relu", ROOT, judge=FixedJudge(), sources=[StepSource()],
                    config=SearchConfig(seed=7), known=known)
    run_search(second, evaluator, budget=5)

    reused = [node for node in second.tree.nodes.values() if node.reused]
    assert len(reused) >= 4 and all(node.evaluation is None for node in reused)
    assert not set(submitted) & {node.candidate_hash for node in reused}
    assert second.evaluations == 5


def test_a_failing_judge_hands_the_node_to_the_fallback_and_says_so(recordings):
    search = run_search(new_search(judge=FailingJudge()), ReplayEvaluator(recordings), budget=6)

    root = search.tree.root
    assert root.judge_error == "llm:unreachable: timed out after 30 s"
    assert "llm:unreachable judge failed" in root.diagnosis.summary
    assert "fixed judge's" in root.diagnosis.summary
    assert search.evaluations == 6 and len(search.tree) == 6


def test_without_a_fallback_judge_the_proposals_go_unranked():
    search = Search("relu", ROOT, judge=FailingJudge(), sources=[StepSource()])
    search.ask(1)

    search.tell(ROOT.content_hash(), Measurement(status="passed", time_ms=1.0, bottleneck="memory"))

    root = search.tree.root
    assert root.diagnosis.source == "none" and root.diagnosis.bottleneck == "memory"
    assert {item.prior for item in root.untried} == {1.0}
    assert len(root.untried) == 4


def test_a_failed_kernel_is_a_node_with_a_negative_reward_not_a_crash(recordings):
    search = run_search(new_search(), ReplayEvaluator(recordings), budget=BUDGET)

    failed = [n for n in search.tree.nodes.values() if n.measurement and not n.measurement.passed]
    assert failed, "the synthetic table has failures the search should meet"
    for node in failed:
        assert node.reward < 0 and not node.untried and node.children == []
        assert node.diagnosis.bottleneck == "failed"


def test_a_missing_recording_is_an_error_node_never_a_number(tmp_path):
    path = write_recordings(tmp_path / "r.json")
    data = json.loads(path.read_text())
    del data["recorded"][variant(ROOT, VEC=2).content_hash()]
    path.write_text(json.dumps(data))

    search = run_search(new_search(), ReplayEvaluator(path), budget=BUDGET)

    [node] = [n for n in search.tree.nodes.values()
              if n.candidate_hash == variant(ROOT, VEC=2).content_hash()]
    assert node.measurement.status == "error" and node.measurement.message == NO_RECORDING
    assert node.measurement.time_ms is None and node.measurement.replayed
    assert node.reward == Guardrails().error


def test_telling_a_kernel_twice_or_one_never_asked_changes_nothing():
    search = new_search()
    search.ask(1)
    measurement = Measurement(status="passed", time_ms=1.0)

    assert search.tell(ROOT.content_hash(), measurement) == 0
    before = json.dumps(search.to_dict())
    assert search.tell(ROOT.content_hash(), measurement) is None
    assert search.tell("f" * 64, measurement) is None
    assert json.dumps(search.to_dict()) == before


def test_events_report_added_and_evaluated_nodes_and_each_new_best(recordings):
    events = []

    search = run_search(new_search(), ReplayEvaluator(recordings), budget=12,
                        on_event=lambda kind, data: events.append((kind, data)))

    kinds = [kind for kind, _ in events]
    assert kinds.count("node_evaluated") == 12 and kinds.count("node_added") == 11
    bests = [data for kind, data in events if kind == "best_improved"]
    assert bests[-1]["id"] == search.tree.best_id
    assert [b["time_ms"] for b in bests] == sorted((b["time_ms"] for b in bests), reverse=True)
    assert all(json.dumps(data) for _, data in events)  # plain data, ready to broadcast


def test_every_node_records_its_deltas_against_parent_and_root(recordings):
    search = run_search(new_search(), ReplayEvaluator(recordings), budget=BUDGET)

    best = search.tree.best
    root_time = search.tree.root.measurement.time_ms
    assert best.deltas_vs_root["time"] == pytest.approx(best.measurement.time_ms / root_time)
    parent = search.tree[best.parent]
    assert best.deltas_vs_parent["time"] == pytest.approx(
        best.measurement.time_ms / parent.measurement.time_ms)
    assert best.reward_terms and sum(best.reward_terms.values()) == pytest.approx(best.reward)


def test_the_why_account_walks_from_the_root_to_the_best(recordings):
    search = run_search(new_search(), ReplayEvaluator(recordings), budget=BUDGET)

    steps = why_faster(search.tree)
    path = [node.id for node in search.tree.path(search.tree.best_id)]
    assert [s["from"] for s in steps] + [steps[-1]["to"]] == path
    assert steps[0]["diagnosis"]["summary"] and steps[0]["change"]["source"] == "tunable"
    assert steps[-1]["time_after_ms"] == search.tree.best.measurement.time_ms
    assert all(len(s["metric_deltas"]) <= 4 and s["replayed"] for s in steps)
    text = render_why(search.tree)
    assert text.startswith("Why it is faster:") and "replayed" in text
    assert f"node {steps[-1]['from']} -> node {steps[-1]['to']}" in text
