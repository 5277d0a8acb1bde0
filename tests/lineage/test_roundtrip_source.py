"""The cards' roundtrip at the source level, on the H200 lineages: from each expert's plain
attempt, the card steps of its lineage's spine (the best forward path), applied by pattern
alone, must give each next state's plain source token for token. Whether the kernels they
give are right and fast is the gate's question (the roundtrip on the GPU); this checks
that the cards can rebuild the expert at all."""

import json
from pathlib import Path

import pytest

from lineage.engine import antiunify, cards, experts
from lineage.engine.skills import apply_step, recorded_cards
from lineage.engine.walker import Lineage

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"
LINEAGES = sorted(RESULTS.glob("*-h200-lineages*/lineage-*.json"))
# Measured 2026-12-01 on this tree: the lineages whose whole spine the cards rebuild.
REBUILT = {"cross_entropy", "layernorm", "maxpool3d", "reduce_sum", "relu", "softmax", "topk"}


def flags(state: str) -> frozenset[str]:
    return frozenset(f for f in state.split(",") if f)


@pytest.fixture(scope="module")
def spines():
    found = {c["intent"]: c for c in recorded_cards()}
    result = {}
    for path in LINEAGES:
        lineage = Lineage.from_dict(json.loads(path.read_text()))
        expert = experts.load(lineage.task)
        outcomes = []
        for step in cards.spine(lineage):
            edge = (lineage.task, step.before, step.after)
            card_step = next(s for s in found[step.intent]["anchor"]["steps"]
                             if (s["task"], s["before"], s["after"]) == edge)
            made = apply_step(card_step, expert.plain_source(flags(step.before)))
            wanted = antiunify.source_tokens(expert.plain_source(flags(step.after)))
            outcomes.append(made is not None and antiunify.source_tokens(made) == wanted)
        result[lineage.task] = outcomes
    return result


def test_every_spine_runs_from_the_plain_attempt_to_the_expert(spines):
    for task, outcomes in spines.items():
        expert = experts.load(task)
        assert len(outcomes) == len(expert.flags), f"{task}: the spine stops short of the expert"


def test_the_cards_rebuild_the_experts_step_by_step(spines):
    rebuilt = {task for task, outcomes in spines.items() if all(outcomes)}
    assert rebuilt >= REBUILT, f"no longer rebuilt: {sorted(REBUILT - rebuilt)}"
    steps = sum(len(o) for o in spines.values())
    assert sum(sum(o) for o in spines.values()) >= 0.85 * steps
