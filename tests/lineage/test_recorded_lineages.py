"""The lineages recorded on the H200 (bench/results/*-h200-lineages*/), replayed here.

Each recorded lineage must still describe the experts in the tree (every state's
candidate hash is what the expert's flags give today: an expert changed since its walk
needs a new walk on the GPU), its steps must read as plain CUDA, and walking the expert
again with the recorded measurements (replayed, as the search's recordings are) must
give the same lineage: the same states, edges and speed-ups.
"""

import json
from pathlib import Path

import pytest

from lineage.engine import experts
from lineage.engine.vocabulary import intent_of
from lineage.engine.walker import Lineage, walk
from search.engine.evaluators import ReplayEvaluator

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"
RECORDED = sorted(RESULTS.glob("*-h200-lineages*/lineage-*.json"))


def test_there_are_recorded_lineages():
    assert RECORDED, "no lineage recorded on the H200 under bench/results/"


@pytest.fixture(params=RECORDED, ids=[f"{p.parent.name}/{p.stem}" for p in RECORDED])
def recorded(request) -> Lineage:
    return Lineage.from_dict(json.loads(request.param.read_text()))


def test_a_recorded_lineage_describes_the_expert_in_the_tree(recorded):
    expert = experts.load(recorded.task)
    assert recorded.gpu == "NVIDIA H200"
    for name, state in recorded.states.items():
        assert expert.candidate(frozenset(state.flags)).content_hash() == state.candidate_hash, (
            f"{recorded.task} state {name!r} has changed since it was walked: walk it again")


def test_every_recorded_step_is_plain_cuda_with_its_measured_effect(recorded):
    assert recorded.transitions
    for step in recorded.transitions:
        assert intent_of(step.flag).name == step.intent and step.proposer == "flags"
        assert "OPT_" not in step.source_diff and step.source_diff.startswith("--- before.cu")
        before, after = recorded.states[step.before], recorded.states[step.after]
        assert step.before_ms == before.measurement["time_ms"]
        assert step.after_ms == after.measurement["time_ms"]
        assert step.speedup == pytest.approx(step.before_ms / step.after_ms)


def test_the_expert_itself_passed_the_full_gate_with_every_guard(recorded):
    expert = experts.load(recorded.task)
    top = recorded.states[",".join(sorted(expert.all_on()))].measurement
    assert top["status"] == "passed" and top["level"] == "full"
    settings = top["verdict"]["settings"]
    assert settings["spot_checks"] == 8 and len(settings["sanitize"]) == 4 and settings["profile"]


def test_walking_again_on_the_recorded_measurements_gives_the_same_lineage(recorded, tmp_path):
    recordings = tmp_path / "rec.json"
    recordings.write_text(json.dumps({
        "gpu": recorded.gpu, "task": recorded.task,
        "recorded": {s.candidate_hash: s.measurement for s in recorded.states.values()}}))
    expert = experts.load(recorded.task)
    again = walk(expert, ReplayEvaluator(recordings), max_states=len(recorded.states))

    assert list(again.states) == recorded.order and again.complete == recorded.complete
    steps = lambda lineage: {(t.before, t.after): t.speedup for t in lineage.transitions}  # noqa: E731
    assert steps(again) == steps(recorded)
    assert {(r.start, r.flag) for r in again.rejected} == {(r.start, r.flag) for r in recorded.rejected}
