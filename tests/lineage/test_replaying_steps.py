"""What a card step needs to rebuild the next state of its own lineage: the launch plan
as written (flags folded out), the plan's change with the step, the edits made at the
expert's own sites, and the rehearsal evaluator that maps a kernel back to its state."""

import json
from pathlib import Path

import pytest

from lineage.engine import antiunify, experts
from lineage.engine.cards import spine
from lineage.engine.lineage_replay import NOT_A_STATE, LineageReplay
from lineage.engine.skills import materialise_step, recorded_cards, same_launches, step_plan
from lineage.engine.walker import Lineage
from profiling.harness import expr, tasks
from profiling.harness.candidate import Candidate

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"


def lineage_of(task: str) -> Lineage:
    path = sorted(RESULTS.glob(f"*-h200-lineages*/lineage-{task}.json"))[-1]
    return Lineage.from_dict(json.loads(path.read_text()))


def flags(state: str) -> frozenset[str]:
    return frozenset(f for f in state.split(",") if f)


@pytest.mark.parametrize("name", experts.tasks_with_experts())
def test_the_written_plan_launches_every_state_as_the_flagged_one_does(name):
    expert, task = experts.load(name), tasks.get(name)
    for state in expert.states():
        flagged, written = expert.candidate(state), expert.written_candidate(state)
        assert "OPT_" not in json.dumps(written.plan_dict())
        for sizes in (task.sizes, *task.l0_sizes):
            for a, b in zip(flagged.launches, written.launches, strict=True):
                for x, y in zip((*a.grid, *a.block, a.shared_bytes), (*b.grid, *b.block, b.shared_bytes),
                                strict=True):
                    assert expr.evaluate_int(x, {**sizes, **flagged.tunables}) == \
                        expr.evaluate_int(y, {**sizes, **written.tunables})


def test_a_step_that_changes_the_launch_carries_the_change():
    softmax = experts.load("softmax")
    card = next(c for c in recorded_cards() if c["intent"] == "BLOCK_PER_ROW")
    step = next(s for s in card["anchor"]["steps"] if s["task"] == "softmax" and s["before"] == "")
    assert step["launches"]["before"][0]["grid"] == ["cdiv(M, 128)"]
    assert step["launches"]["after"][0]["grid"] == ["M"]
    plain = softmax.written_candidate(frozenset())
    child = materialise_step(step, plain, tasks.get("softmax"))
    assert child is not None
    assert same_launches(child.plan_dict(), softmax.written_plan(frozenset({"OPT_BLOCK_PER_ROW"})),
                         tasks.get("softmax"))
    # A kernel launched otherwise (one thread a row, 256 a block) is not this step's to change.
    other = json.loads(json.dumps(plain.plan_dict()))
    other["launches"][0]["block"], other["launches"][0]["grid"] = [256], ["cdiv(M, 256)"]
    assert step_plan(step, Candidate.from_source_and_plan(plain.source, other), plain.source,
                     tasks.get("softmax")) is None


def test_an_edit_that_fits_several_places_is_made_where_the_expert_made_it():
    # sgemm's float4 step renames a loop's counter (`j = 0` -> `g = 0`): three loops fit.
    card = next(c for c in recorded_cards() if c["intent"] == "VEC4")
    step = next(s for s in card["anchor"]["steps"] if s["task"] == "sgemm")
    assert any(count > 1 for _, count in step["sites"] or [])
    sgemm = experts.load("sgemm")
    made = materialise_step(step, sgemm.written_candidate(flags(step["before"])), tasks.get("sgemm"))
    assert made is not None
    assert antiunify.source_tokens(made.source) == \
        antiunify.source_tokens(sgemm.plain_source(flags(step["after"])))


def test_every_spine_step_of_every_lineage_replays_from_its_cards():
    by_intent = {c["intent"]: c for c in recorded_cards()}
    for name in experts.tasks_with_experts():
        expert, lineage = experts.load(name), lineage_of(name)
        replay = LineageReplay(expert, lineage)
        steps = [s for c in by_intent.values() for s in c["anchor"]["steps"] if s["task"] == name]
        for transition in spine(lineage):
            edge = (transition.before, transition.after)
            step = next(s for s in steps if (s["before"], s["after"]) == edge)
            child = materialise_step(step, expert.written_candidate(flags(step["before"])), tasks.get(name))
            assert child is not None and replay.state_of(child) == transition.after, \
                f"{name}: {transition.intent} from {{{transition.before}}}"


def test_the_rehearsal_serves_recorded_states_and_nothing_else():
    relu = experts.load("relu")
    lineage = lineage_of("relu")
    replay = LineageReplay(relu, lineage)
    state = relu.written_candidate(frozenset({"OPT_GRID_STRIDE"}))
    replay.submit("relu", state)
    odd = Candidate.from_source_and_plan(state.source.replace("__global__", "__global__ /* */ "),
                                         state.plan_dict())  # layout and comments aside: the same
    replay.submit("relu", odd)
    other = Candidate.from_source_and_plan(state.source + "\nint x;\n", state.plan_dict())
    replay.submit("relu", other)
    (_, first), (_, second), (_, third) = replay.collect(0)
    recorded = lineage.states["OPT_GRID_STRIDE"].measurement
    assert first.replayed and first.time_ms == recorded["time_ms"] and second.time_ms == recorded["time_ms"]
    assert third.status == "error" and third.message == NOT_A_STATE


def test_a_cards_order_precondition_prunes_the_order_the_probes_showed_to_fail():
    import copy

    from lineage.engine.skills import SkillSource
    from search.engine.types import NodeContext

    by_id = {c["id"]: c for c in recorded_cards()}
    restrict = copy.deepcopy(by_id["restrict-v1"])
    restrict["preconditions"]["order"]["required"] = {"GRID_STRIDE": ["relu"]}  # as a probe would say
    cards = [restrict, by_id["grid_stride-v1"]]
    plain = experts.load("relu").written_candidate(frozenset())

    def proposed(history=(), task="relu"):
        source = SkillSource(cards=cards, together=False)
        context = NodeContext(task=task, candidate=plain, measurement=None, diagnosis=None, history=history)
        return {p.params["card"] for p in source.propose(context)}, source.pruned

    cards_here, pruned = proposed()
    assert cards_here == {"grid_stride-v1"}  # restrict waits: grid stride can come first here
    assert pruned and all(first == ["GRID_STRIDE"] for _, first in pruned)
    assert "restrict-v1" in proposed(history=("GRID_STRIDE: relu's step from {the plain attempt}",))[0]
    unpruned = SkillSource(cards=cards, together=False, prune_orders=False)
    context = NodeContext(task="relu", candidate=plain, measurement=None, diagnosis=None)
    assert "restrict-v1" in {p.params["card"] for p in unpruned.propose(context)}
