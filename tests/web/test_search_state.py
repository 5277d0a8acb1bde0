"""A run's search state lives in its rows (search.state): Run.state holds the header and
each RunNode its node. A step writes only the nodes it changed, and the process that
saved keeps the search in memory while the row carries its token. Whatever a step did,
the rows alone rebuild exactly the search the driving process holds."""

from __future__ import annotations

import json

import pytest

from bench.step_cost import ScaledVerdicts
from profiling.evaluators import RecordedEvaluator
from profiling.harness import tasks as task_registry
from search import node_services, services, state
from search.models import Run, RunNode
from tests.web.conftest import RUN_RECORDING

pytestmark = pytest.mark.django_db


@pytest.fixture
def wide(settings):
    """Trees that grow past what relu's recordings hold: the step-cost benchmark's stand-ins
    (six `#define` variants per node; the naive relu H200 verdict, its time scaled per kernel)."""
    settings.OPTIML_PROPOSAL_SOURCES = [*settings.OPTIML_PROPOSAL_SOURCES, "bench.step_cost.Variants"]
    settings.OPTIML_SCREEN = False
    return ScaledVerdicts()


def _same(a: dict, b: dict) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _launch(budget: int, parallel: int) -> Run:
    relu = task_registry.get("relu")
    return services.run_create(task_name="relu", source=relu.naive_source, plan=relu.naive_plan,
                               budget=budget, parallel=parallel)


def _kept(run: Run):
    token, search = state._kept[run.pk]
    assert token == Run.objects.get(pk=run.pk).state_token
    return search


@pytest.mark.parametrize("parallel", [1, 3])
def test_after_every_step_the_rows_hold_exactly_the_search_in_memory(parallel, wide):
    evaluator = wide
    run = _launch(budget=30, parallel=parallel)
    steps = 0
    while Run.objects.get(pk=run.pk).status == Run.Status.RUNNING and steps < 60:
        services.run_dispatch(run_id=run.pk, evaluator=evaluator)
        run.refresh_from_db()
        in_memory = _kept(run).to_dict()
        assert _same(state.state_of(run), in_memory), f"the rows differ from the search after step {steps}"
        for row in RunNode.objects.filter(run=run, state="pending", result__isnull=True):
            node_services.node_evaluate(run_id=run.pk, node_id=row.node_id, best_full_ms=None,
                                        evaluator=evaluator)
        steps += 1
    run.refresh_from_db()
    assert (run.status, run.evaluated) == (Run.Status.FINISHED, 30)

    state.search_forget(run.pk)  # another worker: the search only from the rows
    rebuilt = state.search_load(run, parts=lambda: services._parts_for(run))
    assert _same(rebuilt.to_dict(), state.state_of(run))
    assert len(rebuilt.tree) == RunNode.objects.filter(run=run).count() == 30  # none reused


def test_backpropagation_marks_only_the_counts_of_the_path_as_changed(wide):
    evaluator = wide
    run = _launch(budget=30, parallel=1)
    for _ in range(20):
        services.run_step(run_id=run.pk, evaluator=evaluator)
    run.refresh_from_db()
    search = _kept(run)
    deep = max(search.tree.nodes.values(), key=lambda n: n.depth)
    assert deep.depth >= 2
    from search.engine import mcts

    assert search.tree.take_changed() == ([], [])  # search_save took them
    mcts.backpropagate(search.tree, deep.id, 0.25)
    changed, counted = search.tree.take_changed()
    assert changed == [] and counted == [n.id for n in search.tree.path(deep.id)]
    state.search_forget(run.pk)


def test_a_kept_search_is_not_used_once_someone_else_saved_the_run():
    evaluator = RecordedEvaluator(RUN_RECORDING)
    run = _launch(budget=6, parallel=1)
    services.run_step(run_id=run.pk, evaluator=evaluator)
    run.refresh_from_db()
    kept = _kept(run)
    Run.objects.filter(pk=run.pk).update(state_token="0" * 32)  # another process saved it
    run.refresh_from_db()

    loaded = state.search_load(run, parts=lambda: services._parts_for(run))

    assert loaded is not kept and _same(loaded.to_dict(), kept.to_dict())


def test_a_step_that_fails_half_way_leaves_the_rows_as_they_were_and_the_next_one_rebuilds(monkeypatch):
    evaluator = RecordedEvaluator(RUN_RECORDING)
    run = _launch(budget=6, parallel=1)
    services.run_step(run_id=run.pk, evaluator=evaluator)
    run.refresh_from_db()
    before = state.state_of(run)

    def broken(*args, **kwargs):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(state, "node_rows_create", broken)
    with pytest.raises(RuntimeError):
        services.run_step(run_id=run.pk, evaluator=evaluator)
    monkeypatch.undo()

    run.refresh_from_db()
    assert _same(state.state_of(run), before) and run.pk not in state._kept  # nothing half-kept
    services.run_drive(run_id=run.pk, evaluator=evaluator)
    run.refresh_from_db()
    assert (run.status, run.evaluated) == (Run.Status.FINISHED, 6)
