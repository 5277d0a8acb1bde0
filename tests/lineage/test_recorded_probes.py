"""The declared-order probes (lineage/engine/probes.py), and the ones recorded on the H200
(bench/results/*-h200-probes/): each still the expert's, and derived again here from the
recorded screen measurements (nvcc and partial evaluation decide the rest, live) with the
same outcome."""

import json
from pathlib import Path

import pytest

from lineage.engine import experts, probes
from search.engine.evaluators import ReplayEvaluator

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"
RECORDED = sorted(RESULTS.glob("*-h200-probes/probes-*.json"))


def test_each_declared_dependency_is_probed_from_a_valid_state_into_an_invalid_one():
    for task in experts.tasks_with_experts():
        expert = experts.load(task)
        planned = probes.probe_states(expert)
        assert len(planned) == sum(len(f.depends) for f in expert.flags)
        for flag, missing, start, probed in planned:
            assert expert.valid(start) and not expert.valid(probed) and probed == start | {flag}
            assert missing not in start and not start & probes.dependents(expert, missing)


def test_relus_nested_flags_change_nothing_without_their_prerequisite():
    relu = experts.load("relu")
    planned = {(f, m): (set(s), set(p)) for f, m, s, p in probes.probe_states(relu)}
    assert planned[("OPT_VEC4", "OPT_GRID_STRIDE")] == (set(), {"OPT_VEC4"})
    assert planned[("OPT_UNROLL", "OPT_VEC4")] == ({"OPT_GRID_STRIDE"}, {"OPT_GRID_STRIDE", "OPT_UNROLL"})

    class NothingMeasured:  # relu's probes never reach the evaluator: both are no_effect
        def submit(self, task, candidate):
            raise AssertionError("a no-effect probe was sent to the GPU")

        def collect(self, timeout_s):
            return []

    found = probes.probe(relu, NothingMeasured())
    assert [p.status for p in found] == [probes.NO_EFFECT] * 2
    assert all(p.precondition_held and p.decided_by == "unifdef" for p in found)
    assert "OPT_VEC4 needs OPT_GRID_STRIDE first" in found[0].finding


def test_there_are_recorded_probes_for_every_expert():
    assert {p.stem.removeprefix("probes-") for p in RECORDED} == set(experts.tasks_with_experts())


@pytest.fixture(params=RECORDED, ids=[f"{p.parent.name}/{p.stem}" for p in RECORDED])
def recorded(request):
    return request.param, *probes.from_dict(json.loads(request.param.read_text()))


def test_recorded_probes_are_the_experts_and_derive_again_to_the_same_findings(recorded):
    path, task, gpu, found = recorded
    expert = experts.load(task)
    assert gpu == "NVIDIA H200" and len(found) == len(probes.probe_states(expert))
    for probe, (flag, missing, _start, probed) in zip(found, probes.probe_states(expert), strict=True):
        assert (probe.flag, probe.missing) == (flag, missing)
        assert probe.candidate_hash == expert.candidate(probed).content_hash(), (
            f"{task}: the probe of {flag} without {missing} changed since it was measured: probe again")

    again = probes.probe(expert, ReplayEvaluator(path.parent / f"rec-probes-{task}.json"))

    assert [(p.status, p.guard, p.decided_by) for p in again] == [
        (p.status, p.guard, p.decided_by) for p in found]
    assert all(p.status != "error" for p in again)  # every probe that builds was measured
