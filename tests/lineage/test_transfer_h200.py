"""The transfer benchmark's call b (bench/results/2026-12-01-h200-transfer/), replayed
over what the H200 measured: from sgemm's naive kernel, skills + rewrites + tunables,
the rule judge, for as many evaluations as the recorded run made. The same tree and
best again, the best through sgemm's own lineage (`lineage:sgemm`), said apart from
transfer. If the sources or the judges change what is proposed, this test says which
kernel has no recording."""

import json
from pathlib import Path

import pytest

from bench.skills_roundtrip import MAX_DEPTH
from bench.skills_transfer import SOURCES
from lineage.engine.skills import SkillSource
from profiling.harness import tasks
from profiling.harness.candidate import Candidate
from search.engine.evaluators import NO_RECORDING, ReplayEvaluator
from search.engine.judges import RuleJudge
from search.engine.search import Search, SearchConfig, run_search

RESULTS = Path(__file__).parents[2] / "bench" / "results"
RUN = json.loads((RESULTS / "2026-12-01-h200-transfer.json").read_text())


def test_sgemms_transfer_run_replays_to_its_recorded_best_through_its_own_lineage():
    from search.engine.__main__ import _make_sources, fast_math_allowed

    recorded = RUN["tasks"]["sgemm"]
    assert recorded["call"] == "b" and recorded["through_own_lineage"]
    task = tasks.get("sgemm")
    judge = RuleJudge(read_forms=False)  # as the recorded run ranked unprofiled nodes
    search = Search("sgemm", Candidate.from_source_and_plan(task.naive_source, task.naive_plan),
                    judge=judge, fallback_judge=judge,
                    # as the run named them, as they were then (2026-12-01: the skills
                    # without measured reach or skeleton cards, the search without the lookahead)
                    sources=[SkillSource(measured_reach=False, skeletons=False)
                             if isinstance(s, SkillSource) else s for s in _make_sources(SOURCES.split(","))],
                    config=SearchConfig(budget=recorded["evaluations"], seed=0, max_depth=MAX_DEPTH,
                                        lookahead=0.0),
                    tolerance_allows_fast_math=fast_math_allowed(task))
    run_search(search, ReplayEvaluator(RESULTS / "2026-12-01-h200-transfer" / "tr-b" / "rec-sgemm.json"),
               budget=recorded["evaluations"])
    rows = search.tree.rows()
    unrecorded = [r["title"] for r in rows if r["status"] == "error"
                  and NO_RECORDING in (search.tree[r["id"]].measurement.message or "")]
    assert not unrecorded, f"proposed but never measured on the H200: {unrecorded}"
    assert search.summary()["best_time_ms"] == pytest.approx(recorded["best_ms"])
    best = min((r for r in rows if r["status"] == "passed" and r["time_ms"]), key=lambda r: r["time_ms"])
    path, node = [], best
    while node is not None:
        path.append(node["source"])
        node = next((r for r in rows if r["id"] == node["parent"]), None)
    assert "lineage:sgemm" in path and path[-1] == "root"
    assert [s for s in path if s.startswith("skill:")] == ["skill:vec4-v1", "skill:reg_tile-v1",
                                                           "skill:smem_tile-v1"]
