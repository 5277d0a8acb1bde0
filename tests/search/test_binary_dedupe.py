"""run_search with `binary_of`: the command line's binary dedupe (search/engine/binaries.py).

The binaries here are stand-ins (a kernel's binary named by the knobs it is said to
compile with), so these run without nvcc; tests/search/test_optimize_cli.py compiles for
real. The measurements are engine_fakes' SYNTHETIC table.
"""

from __future__ import annotations

import pytest
from engine_fakes import ROOT, FixedJudge, StepSource, knobs_of, write_recordings

from search.engine.evaluators import ReplayEvaluator
from search.engine.search import Search, SearchConfig, run_search


def new_search() -> Search:
    return Search("relu", ROOT, judge=FixedJudge(), sources=[StepSource()], fallback_judge=FixedJudge(),
                  config=SearchConfig(budget=8, seed=7), binary_sizes=[{"N": 1}])


@pytest.fixture
def evaluator(tmp_path) -> ReplayEvaluator:
    """The replay, noting every kernel handed to it in `evaluator.submitted`."""
    replay = ReplayEvaluator(write_recordings(tmp_path / "relu-synthetic.json"))
    replay.submitted = []
    submit = replay.submit
    replay.submit = lambda task, candidate: (replay.submitted.append(candidate.content_hash()),
                                             submit(task, candidate))
    return replay


def block_only(candidate) -> str:
    """As if the kernel read BLOCK alone: UNROLL and VEC change the text, not the binary."""
    return f"block-{knobs_of(candidate)['BLOCK']}"


def test_a_kernel_with_an_earlier_nodes_binary_is_done_from_its_measurement_not_submitted(evaluator):
    search = run_search(new_search(), evaluator, binary_of=block_only)

    duplicates = [n for n in search.tree.nodes.values() if n.duplicate_of is not None]
    # Five BLOCKs, five binaries: measured once each, then nothing is left to try.
    assert duplicates and search.evaluations == len(evaluator.submitted) == 5 < 8
    for node in duplicates:
        twin = search.tree[node.duplicate_of]
        assert node.candidate_hash not in evaluator.submitted
        assert twin.id < node.id and twin.binary == node.binary == block_only(node.proposal.candidate)
        assert node.reused and node.evaluation is None and node.measurement == twin.measurement
        assert node.untried == [] and node.diagnosis.bottleneck == "duplicate"
        assert f"node #{twin.id}" in node.diagnosis.summary
    measured = [n.binary for n in search.tree.nodes.values() if n.done and not n.reused]
    assert sorted(measured) == sorted(f"block-{b}" for b in (64, 128, 256, 512, 1024))


def test_a_duplicate_asked_while_its_twin_is_measured_waits_for_it(evaluator):
    def one_binary_for_two_blocks(candidate) -> str:
        block = knobs_of(candidate)["BLOCK"]
        return "block-128-or-512" if block in (128, 512) else f"block-{block}"

    events: list[tuple[str, int]] = []
    search = run_search(new_search(), evaluator, binary_of=one_binary_for_two_blocks, parallel=4,
                        on_event=lambda kind, data: events.append((kind, data.get("id"))))

    twin, = (n for n in search.tree.nodes.values() if n.proposal.title == "BLOCK 256->512")
    late, = (n for n in search.tree.nodes.values() if n.proposal.title == "BLOCK 256->128")
    assert late.duplicate_of == twin.id and late.candidate_hash not in evaluator.submitted
    # asked before its twin was measured, done only after it
    assert events.index(("node_added", late.id)) < events.index(("node_evaluated", twin.id)) \
        < events.index(("node_evaluated", late.id))
    assert late.measurement == twin.measurement and late.evaluation is None
    assert search.in_flight() == [] and not search.tree.pending()
    assert len(evaluator.submitted) == len(set(evaluator.submitted)) == search.evaluations


def test_without_binary_of_every_asked_kernel_is_submitted(evaluator):
    search = run_search(new_search(), evaluator)

    assert all(n.duplicate_of is None for n in search.tree.nodes.values())
    assert len(evaluator.submitted) == search.evaluations == 8
