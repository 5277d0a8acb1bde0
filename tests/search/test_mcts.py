"""select (PUCT + virtual loss), expand (progressive widening), backpropagate, as functions."""

from __future__ import annotations

import math

import numpy as np
import pytest
from engine_fakes import ROOT, FixedJudge, StepSource, variant

from search.engine import mcts
from search.engine.search import Search, SearchConfig
from search.engine.tree import DONE, Tree, Untried
from search.engine.types import Measurement, Proposal


def item(prior: float = 0.5, **knobs: int) -> Untried:
    candidate = variant(ROOT, **knobs)
    return Untried(prior=prior, candidate_hash=candidate.content_hash(),
                   proposal=Proposal(source="tunable", title=str(knobs), rationale="",
                                     candidate=candidate))


def finish(tree: Tree, node_id: int, reward: float, untried: list[Untried] = ()) -> None:
    node = tree[node_id]
    node.state, node.reward = DONE, reward
    node.measurement = Measurement(status="passed" if reward > -1 else "rejected", time_ms=1.0)
    node.add_untried(list(untried))
    mcts.backpropagate(tree, node_id, reward)


def root_only(untried: list[Untried]) -> Tree:
    tree = Tree.with_root(Proposal(source="root", title="root", rationale="", candidate=ROOT))
    finish(tree, 0, 0.0, untried)
    return tree


@pytest.mark.parametrize(("visits", "c", "alpha", "limit"),
                         [(0, 2.0, 0.5, 2), (1, 2.0, 0.5, 2), (4, 2.0, 0.5, 4), (10, 2.0, 0.5, 7),
                          (16, 1.0, 0.25, 2), (30, 1.0, 0.5, 6)])
def test_widening_allows_ceil_c_visits_to_the_alpha_children(visits, c, alpha, limit):
    assert mcts.widening_limit(visits, widening_c=c, widening_alpha=alpha) == limit


def test_expand_stops_at_the_widening_limit_without_virtual_visits():
    tree = root_only([item(BLOCK=b) for b in (64, 128, 512, 1024)] + [item(VEC=2)])
    tree.root.visits = 4

    added = []
    while (child := mcts.expand(tree, 0, widening_c=1.0, widening_alpha=0.5, virtual_loss=0)) is not None:
        added.append(child)

    assert len(added) == math.ceil(1.0 * 4 ** 0.5) == 2
    assert len(tree.root.untried) == 3


def test_pending_children_count_as_visits_for_widening():
    tree = root_only([item(BLOCK=b) for b in (64, 128, 512, 1024)] + [item(VEC=2)])
    tree.root.visits = 4

    while mcts.expand(tree, 0, widening_c=1.0, widening_alpha=0.5) is not None:
        pass

    # 3 children: with two pending, ceil(sqrt(4 + 2)) = 3; with three, ceil(sqrt(7)) = 3.
    assert len(tree.root.children) == 3


def test_expand_takes_the_best_prior_first():
    tree = root_only([item(0.2, BLOCK=64), item(0.9, VEC=2), item(0.5, UNROLL=2)])

    child = mcts.expand(tree, 0)

    assert tree[child].proposal.title == "{'VEC': 2}" and tree[child].prior == 0.9
    assert tree[child].state == "pending"


def test_expand_drops_an_untried_kernel_that_entered_the_tree_elsewhere():
    tree = root_only([item(0.9, VEC=2), item(0.5, UNROLL=2)])
    first = mcts.expand(tree, 0)
    finish(tree, first, 0.1, [item(0.9, UNROLL=2, VEC=2)])
    tree[first].untried.append(item(0.1, UNROLL=2))  # the same kernel the root still holds

    mcts.expand(tree, first)
    mcts.expand(tree, first)

    assert tree[first].dropped_duplicates == 0
    tree.root.visits = 100
    assert mcts.expand(tree, 0) is None  # its UNROLL=2 is already node 3
    assert tree.root.dropped_duplicates == 1


def test_select_returns_nothing_while_the_root_is_pending():
    tree = Tree.with_root(Proposal(source="root", title="root", rationale="", candidate=ROOT))

    assert mcts.select(tree, np.random.default_rng(0)) is None


def test_select_returns_nothing_when_every_path_is_pending_failed_or_exhausted():
    tree = root_only([item(VEC=2), item(UNROLL=2)])
    a = mcts.expand(tree, 0)
    finish(tree, a, -1.5)  # failed: no proposals
    b = mcts.expand(tree, 0)  # pending

    assert tree[b].state == "pending"
    assert mcts.select(tree, np.random.default_rng(0), widening_c=1.0) is None


def test_select_follows_the_higher_prior_when_values_are_equal():
    tree = root_only([item(0.8, VEC=2), item(0.2, UNROLL=2)])
    a, b = mcts.expand(tree, 0), mcts.expand(tree, 0)
    finish(tree, a, 0.1, [item(BLOCK=512, VEC=2)])
    finish(tree, b, 0.1, [item(BLOCK=512, UNROLL=2)])
    tree.root.untried.clear()

    assert mcts.select(tree, np.random.default_rng(0)) == a


def virtual_loss_tree() -> tuple[Tree, int, int]:
    """Root with three evaluated children: A (value 1.0), B (0.6), C (failed, -1.0). Only A
    and B have proposals left, the root has none: the next descent chooses between them."""
    tree = root_only([item(VEC=2), item(UNROLL=2), item(BLOCK=64)])
    a, b, c = (mcts.expand(tree, 0, widening_c=3.0) for _ in range(3))
    finish(tree, a, 1.0, [item(VEC=2, BLOCK=512), item(VEC=4)])
    finish(tree, b, 0.6, [item(UNROLL=2, BLOCK=512), item(UNROLL=4)])
    finish(tree, c, -1.0)
    return tree, a, b


def test_virtual_loss_sends_the_second_of_two_parallel_asks_down_another_path():
    tree, a, b = virtual_loss_tree()
    rng = np.random.default_rng(0)

    first = mcts.select(tree, rng)
    mcts.expand(tree, first)  # now pending below A
    second = mcts.select(tree, rng)

    assert (first, second) == (a, b)


def test_without_virtual_loss_both_asks_go_down_the_same_path():
    tree, a, _ = virtual_loss_tree()
    rng = np.random.default_rng(0)

    first = mcts.select(tree, rng, virtual_loss=0.0)
    mcts.expand(tree, first, virtual_loss=0.0)
    second = mcts.select(tree, rng, virtual_loss=0.0)

    assert first == second == a


def test_parallel_asks_spread_over_distinct_kernels():
    search = Search("relu", ROOT, judge=FixedJudge(), sources=[StepSource()])
    [(root_id, _)] = search.ask(4)  # only the root exists, pending
    search.tell(ROOT.content_hash(), Measurement(status="passed", time_ms=1.0))

    asked = search.ask(4)

    assert len(asked) == 4
    assert len({candidate.content_hash() for _, candidate in asked}) == 4
    assert all(search.tree[node_id].parent == root_id for node_id, _ in asked)


def test_without_virtual_loss_widening_lets_fewer_parallel_asks_out():
    search = Search("relu", ROOT, judge=FixedJudge(), sources=[StepSource()],
                    config=SearchConfig(virtual_loss=0.0))
    search.ask(1)
    search.tell(ROOT.content_hash(), Measurement(status="passed", time_ms=1.0))

    assert len(search.ask(4)) == 2  # ceil(2 * 1^0.5): nothing else until results arrive


def test_backpropagate_adds_each_nodes_own_reward_on_the_way_up():
    tree = root_only([item(VEC=2)])
    a = mcts.expand(tree, 0)
    finish(tree, a, 0.2, [item(VEC=4)])
    b = mcts.expand(tree, a)
    finish(tree, b, 0.3)

    assert (tree[b].visits, tree[b].value) == (1, pytest.approx(0.3))
    assert (tree[a].visits, tree[a].value_sum) == (2, pytest.approx(0.2 + 0.5))
    assert (tree.root.visits, tree.root.value_sum) == (3, pytest.approx(0.0 + 0.2 + 0.5))


def test_q_is_normalised_by_the_values_seen_in_the_tree():
    tree, a, b = virtual_loss_tree()

    assert mcts.value_bounds(tree) == (pytest.approx(-1.0), pytest.approx(1.0))
    scores = mcts.puct_scores(tree, tree.root, [tree[a], tree[b]], {}, c_puct=0.0,
                              c_puct_base=1e9, virtual_loss=1.0)
    assert scores == [pytest.approx(1.0, abs=1e-6), pytest.approx(0.8, abs=1e-6)]


def test_children_the_gate_failed_do_not_hold_a_node_at_its_widening_limit():
    # Five children, all rejected: five visits and five children, over the limit of
    # ceil(2 * sqrt(6)) = 5 if failures counted. The node must still take its sixth.
    tree = root_only([item(BLOCK=b) for b in (32, 64, 128, 512, 1024)] + [item(VEC=2)])
    for _ in range(5):
        child = mcts.expand(tree, 0)
        finish(tree, child, -2.0)  # rejected
    assert mcts.select(tree, np.random.default_rng(0)) == 0
    assert mcts.expand(tree, 0) is not None and not tree.root.untried


def test_selects_memo_agrees_with_reading_the_whole_tree_at_every_step():
    """SelectMemo keeps the values and open nodes up to date from the touched nodes only;
    through a search with evaluations in flight and failures, it must equal a fresh read."""
    from bench.step_cost import ScaledVerdicts, Variants
    from profiling.harness import tasks as task_registry
    from profiling.harness.candidate import Candidate
    from search.engine.evaluators import measurement_from_verdict
    from search.engine.judges import RuleJudge

    relu = task_registry.get("relu")
    root = Candidate.from_source_and_plan(relu.naive_source, relu.naive_plan)
    search = Search("relu", root, judge=RuleJudge(), sources=[Variants()], config=SearchConfig(budget=400))
    verdicts, rng = ScaledVerdicts(), np.random.default_rng(3)
    in_flight: list = []
    for _ in range(150):
        in_flight += search.ask(int(rng.integers(1, 4)))
        rng.shuffle(in_flight)
        for _, candidate in in_flight[: int(rng.integers(0, len(in_flight) + 1))]:
            verdict, _ = verdicts.evaluate("relu", candidate, None)
            measurement = measurement_from_verdict(verdict, replayed=True)
            if rng.random() < 0.15:  # now and then a kernel the gate rejects
                measurement = Measurement(status="rejected", guard="correctness", message="wrong")
            search.tell(candidate.content_hash(), measurement)
        in_flight = [(i, c) for i, c in in_flight if not search.tree[i].done]
        memo, widening = search.tree.memo, search.config.widening()
        inflight = mcts.pending_below(search.tree)
        memo.refresh(search.tree, inflight)
        assert memo.open == mcts.open_nodes(search.tree, inflight, **widening)
        assert memo.bounds() == mcts.value_bounds(search.tree)
    assert len(search.tree) > 150
