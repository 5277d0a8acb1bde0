"""A finished run says in one sentence how it ended (explain.why_it_ended), so that a run
whose every kernel failed does not read as a plain "finished"."""

from __future__ import annotations

from engine_fakes import ROOT, synthetic_measurement, variant

from search.engine.explain import why_it_ended
from search.engine.tree import DONE, Tree, Untried
from search.engine.types import Measurement, Proposal


def _tree(root: Measurement, *children: Measurement) -> Tree:
    tree = Tree.with_root(Proposal(source="root", title="naive", rationale="start", candidate=ROOT))
    tree.root.state, tree.root.measurement = DONE, root
    for block, measurement in zip((128, 512, 1024), children, strict=False):
        candidate = variant(ROOT, BLOCK=block)
        proposal = Proposal(source="tunable", title=f"BLOCK {block}", rationale="t", candidate=candidate)
        untried = Untried(prior=1.0, candidate_hash=candidate.content_hash(), proposal=proposal)
        child = tree.add_child(0, untried)
        child.state, child.measurement = DONE, measurement
    return tree


def _failed(guard: str, message: str, status: str = "rejected", verdict=None) -> Measurement:
    return Measurement(status=status, guard=guard, message=message, verdict=verdict or {"status": status})


def test_a_host_without_a_gpu_is_named_with_the_root_s_own_words():
    incomplete = Measurement(status="error", message="no CUDA device on this host",
                             verdict={"status": "incomplete"})
    said = why_it_ended(_tree(incomplete, incomplete), evaluations=2, budget=30, exhausted=False)
    assert said.startswith("no GPU host") and "node #0" in said and "no CUDA device" in said


def test_every_candidate_failing_to_compile_is_said_so():
    broken = _failed("compile", "error: expected ';'")
    said = why_it_ended(_tree(broken, broken, broken), evaluations=3, budget=3, exhausted=False)
    assert said == "every candidate failed to compile (see node #0); budget spent (3 of 3 evaluations)"


def test_other_failures_name_the_root_s_verdict():
    said = why_it_ended(_tree(_failed("correctness", "max error 3.1 at L0")), evaluations=1, budget=9,
                        exhausted=True)
    assert said.startswith("no candidate passed the gate (see node #0, rejected: max error 3.1")
    assert said.endswith("every proposal was tried")


def test_a_search_that_found_nothing_faster_or_something_faster_says_which():
    root = synthetic_measurement(256, 1, 1)
    slower = Measurement(**{**root.to_dict(), "time_ms": root.time_ms * 2})
    tree = _tree(root, slower)
    tree.best_id = 0
    assert why_it_ended(tree, evaluations=2, budget=2, exhausted=False).startswith(
        "no candidate beat the starting kernel; budget spent")
    faster = Measurement(**{**root.to_dict(), "time_ms": root.time_ms / 2})
    tree = _tree(root, faster)
    tree.best_id = 1
    assert why_it_ended(tree, evaluations=2, budget=2, exhausted=False) == (
        "best: node #1 (2.00x the starting kernel); budget spent (2 of 2 evaluations)")
