"""The de-optimization walker's mechanics, over the real relu expert's states, measured
by a scripted stand-in for the GPU (tests/lineage/scripted_gpu.py: SYNTHETIC NUMBERS)."""

import json

import pytest

from lineage.engine import experts
from lineage.engine.walker import Lineage, key, walk
from profiling.harness import tasks
from tests.lineage.scripted_gpu import ScriptedGpu


def test_the_walk_reaches_the_plain_attempt_and_stores_forward_steps_as_plain_cuda():
    relu = experts.load("relu")
    lineage = walk(relu, ScriptedGpu(relu))

    assert lineage.complete and len(lineage.states) == len(relu.states())
    assert lineage.stopped.startswith("walked out") and "16 of 16" in lineage.stopped
    plain_steps = [t for t in lineage.transitions if t.before == ""]
    assert {t.flag for t in plain_steps} == {"OPT_RESTRICT", "OPT_LAUNCH_BOUNDS", "OPT_GRID_STRIDE"}
    vec4 = next(t for t in lineage.transitions if t.flag == "OPT_VEC4")
    assert vec4.intent == "VEC4" and "float4" in vec4.source_diff and "OPT_" not in vec4.source_diff
    assert vec4.speedup == pytest.approx(1.3) and vec4.metric_deltas["dram_bytes"] < 0
    assert vec4.diagnosis_before["bottleneck"]
    # The launch plan's diff, at the suite's sizes, with the flags evaluated away too.
    stride = next(t for t in plain_steps if t.flag == "OPT_GRID_STRIDE")
    n = tasks.get("relu").sizes["n"]
    assert f"-  grid ({-(-n // 256)})" in stride.plan_diff and "+  grid (131072)" in stride.plan_diff
    assert all("OPT_" not in t.plan_diff for t in lineage.transitions)
    assert vec4.plan_diff == ""  # float4 loads change the code, not the launch


def test_every_order_between_visited_states_is_an_edge():
    relu = experts.load("relu")
    lineage = walk(relu, ScriptedGpu(relu))
    # Each valid state with k removable flags has k accepted edges into it from above.
    edges = {(t.before, t.after) for t in lineage.transitions}
    for state in relu.states():
        for flag in relu.removable(state):
            assert (key(state - {flag}), key(state)) in edges


def test_a_failing_simplification_is_kept_as_evidence_and_not_walked_past():
    relu = experts.load("relu")
    broken = frozenset({"OPT_GRID_STRIDE"})
    lineage = walk(relu, ScriptedGpu(relu, failing=[broken]))

    rejected = [r for r in lineage.rejected if r.state == key(broken)]
    assert rejected and all(r.guard == "wrong_values" and "OPT_GRID_STRIDE" in r.precondition
                            for r in rejected)
    assert not any(t.after == key(broken) or t.before == key(broken) for t in lineage.transitions)
    assert lineage.complete  # the plain attempt is still reached through other orders


def test_the_bound_limits_what_is_measured():
    relu = experts.load("relu")
    gpu = ScriptedGpu(relu)
    lineage = walk(relu, gpu, max_states=4)
    assert gpu.submitted == 4 and len(lineage.states) == 4 and not lineage.complete
    assert lineage.stopped.startswith("the bound: 4 states measured (--max-states 4)")


def test_a_broken_expert_is_a_lineage_of_one_rejected_state():
    relu = experts.load("relu")
    lineage = walk(relu, ScriptedGpu(relu, failing=[relu.all_on()]))
    assert list(lineage.states) == [key(relu.all_on())] and not lineage.transitions
    assert lineage.stopped.startswith(
        "the expert (every flag on) did not pass the gate (rejected: wrong_values)")


def test_a_lineage_is_plain_json_and_reads_back_the_same():
    relu = experts.load("relu")
    lineage = walk(relu, ScriptedGpu(relu, failing=[frozenset({"OPT_VEC4", "OPT_GRID_STRIDE"})]))
    again = Lineage.from_dict(json.loads(lineage.dumps()))
    assert again == lineage


def test_a_walk_cut_off_by_rejections_says_so():
    relu = experts.load("relu")
    # Every state one step below the top fails: nothing below it is reachable.
    below = [relu.all_on() - {f} for f in relu.removable(relu.all_on())]
    lineage = walk(relu, ScriptedGpu(relu, failing=below))
    assert not lineage.complete and not lineage.transitions
    assert lineage.stopped.startswith("walked out without reaching the plain attempt")
