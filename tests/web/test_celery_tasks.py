"""The Celery side: evaluations are queued after commit, routed to the GPU queue, and run
through the same service (here eagerly, in this process)."""

from __future__ import annotations

import pytest

from optiml_web.celery import app
from profiling.models import Evaluation
from profiling.tasks import evaluate_candidate, evaluation_enqueue

pytestmark = pytest.mark.django_db


@pytest.fixture
def eager():
    previous = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = previous


def test_evaluations_are_routed_to_the_gpu_queue():
    route = app.amqp.router.route({}, evaluate_candidate.name)

    assert evaluate_candidate.name == "profiling.evaluate_candidate"
    assert route["queue"].name == "gpu"


def test_other_tasks_stay_on_the_default_queue():
    assert app.amqp.router.route({}, "search.advance_run")["queue"].name == "celery"


def test_an_enqueued_evaluation_runs_once_the_transaction_commits(
    eager, relu_task, store, fast, options, use_recordings, django_capture_on_commit_callbacks
):
    candidate = store(fast)

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        evaluation_enqueue(candidate=candidate, task_name="relu", options=options)
    assert Evaluation.objects.count() == 0
    for callback in callbacks:
        callback()

    evaluation = Evaluation.objects.get()
    assert evaluation.candidate == candidate
    assert (evaluation.status, evaluation.source) == ("passed", "recorded")


def test_a_repeated_message_costs_nothing_and_writes_nothing(
    eager, relu_task, store, fast, options, use_recordings
):
    candidate = store(fast)
    message = [candidate.pk, "relu", {"seeds": 2, "profile": False, "time_limit_s": 60}]

    first = evaluate_candidate.apply(args=message).get()
    finished_at = Evaluation.objects.get().finished_at
    second = evaluate_candidate.apply(args=message).get()

    assert first == second
    assert Evaluation.objects.count() == 1
    assert Evaluation.objects.get().finished_at == finished_at


def test_a_message_for_a_deleted_candidate_is_dropped(eager, relu_task, use_recordings):
    assert evaluate_candidate.apply(args=[987654, "relu", {}]).get() is None
    assert Evaluation.objects.count() == 0
