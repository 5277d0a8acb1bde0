"""The skill cards' roundtrip (issue 10's protocol), replayed over what the H200 measured
(bench/results/2026-12-01-h200-roundtrip/): from each expert's all-off state as written,
a search with the skill cards alone and the rule judge, for as many evaluations as the
recorded run made. Same cards, same judge, same seed: the same tree and the same best,
labelled as replayed. If card induction or the skill source changes what is proposed,
the new kernels have no recording and this test says which."""

import json
from pathlib import Path

import pytest

from lineage.engine import admission, experts
from lineage.engine.lineage_replay import LineageReplay
from lineage.engine.skills import recorded_cards
from search.engine.evaluators import NO_RECORDING
from search.engine.search import Search

RESULTS = Path(__file__).parents[2] / "bench" / "results"
RUN = json.loads((RESULTS / "2026-12-01-h200-roundtrip.json").read_text())
SHARE = 0.9


ADMISSION = json.loads((RESULTS / "2026-12-01-h200-admission.json").read_text())
_searches: dict[str, Search] = {}


def replayed_roundtrip(task_name: str) -> Search:
    """The recorded run again (admission.replay_roundtrip: skills as they were then,
    without the patterns-together proposals added since), once per task."""
    if task_name not in _searches:
        _searches[task_name] = admission.replay_roundtrip(
            task_name, RUN["tasks"][task_name]["evaluations"],
            RESULTS / "2026-12-01-h200-roundtrip" / f"rec-{task_name}.json")
    return _searches[task_name]


@pytest.mark.parametrize("task_name", sorted(RUN["tasks"]))
def test_the_roundtrip_replays_to_the_recorded_best(task_name):
    recorded = RUN["tasks"][task_name]
    search = replayed_roundtrip(task_name)
    rows = search.tree.rows()
    unrecorded = [r["title"] for r in rows if r["status"] == "error"
                  and NO_RECORDING in (search.tree[r["id"]].measurement.message or "")]
    assert not unrecorded, f"proposed but never measured on the H200: {unrecorded}"
    assert all(r["replayed"] for r in rows)
    assert all(r["source"].startswith("skill:") for r in rows[1:]), "skills alone"
    assert search.summary()["best_time_ms"] == pytest.approx(recorded["best_ms"])
    reproduced = recorded["expert_ms"] / search.summary()["best_time_ms"] >= SHARE
    assert reproduced == recorded["reproduced"]


def test_eight_of_ten_experts_were_reproduced_within_sixty_evaluations():
    # The target is 9 of 10. topk and self_attention were stopped by the time
    # limit the device budget allowed (26 and 6 evaluations), not by the budget of 60.
    # topk again with the whole budget (call d): still missed.
    assert RUN["reproduced"] == "8 of 10"
    missed = sorted(t for t, r in RUN["tasks"].items() if not r["reproduced"])
    assert missed == ["self_attention", "topk"]
    assert all(r["evaluations"] <= 60 for r in RUN["tasks"].values())
    full = RUN["topk_full_budget"]
    assert full["evaluations"] == 60 and not full["reproduced"] and full["share_of_expert_speed"] < 0.9


def test_the_committed_admission_is_what_the_rule_decides_on_the_recorded_trials():
    trials = []
    for name in sorted(RUN["tasks"]):
        lineage_path = sorted(RESULTS.glob(f"*-h200-lineages*/lineage-{name}.json"))[-1]
        from lineage.engine.walker import Lineage

        replay = LineageReplay(experts.load(name), Lineage.from_dict(json.loads(lineage_path.read_text())))
        trials += admission.trials(replayed_roundtrip(name), replay)
    decided = admission.admit([c["id"] for c in recorded_cards()], trials)
    assert {k: v["status"] for k, v in decided.items()} == \
        {k: v["status"] for k, v in ADMISSION["cards"].items()}
    assert ADMISSION["counts"] == {"failed": 1, "induced": 7, "verified": 16}
    # A failed roundtrip keeps its evidence: fast math gave 1.005x where 1.032x was recorded.
    (failed,) = [t for t in decided["fast_math-v1"]["failed_trials"] if t["kind"] == "own"]
    assert failed["task"] == "self_attention" and failed["measured"] < failed["expected"]


@pytest.mark.parametrize(("expected", "measured", "passed", "verdict"), [
    (4.0, 2.0, True, True), (4.0, 1.9, True, False),   # half the log-speed-up: 2x of 4x
    (1.21, 1.1, True, True), (1.21, 1.09, True, False),
    (1.0, 0.99, True, True), (1.0, 0.97, True, False),  # no claim: no harm, within noise
    (4.0, 8.0, False, False),                           # wrong is never reproduced
    (0.8, 0.8, True, None),                             # a step that hurt claims nothing
])
def test_the_reproduction_rule(expected, measured, passed, verdict):
    assert admission.reproduced(expected, measured, passed) is verdict
