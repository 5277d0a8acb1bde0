"""The worker drives a run one step per Celery message, each step queuing the next after
commit. A message carries the run's drive token: a duplicate, a redelivery or a message
queued before a pause finds the token moved on and does nothing, so a run never has two
driver chains. The broker here is a list; the task, the services, the rows and the
recorded H200 verdicts of the naive relu kernel are the real ones."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from profiling.evaluators import RecordedEvaluator
from profiling.harness import tasks as task_registry
from search import services, tasks
from search.models import Run, RunEvent
from tests.web.conftest import RUN_RECORDING

pytestmark = pytest.mark.django_db


@dataclass
class Broker:
    """What drive_run_enqueue published, in order; deliver() hands a message to the task
    the way a worker would, then publishes whatever the step queued once it committed."""

    capture: object
    queue: list[list[int]] = field(default_factory=list)
    delays: list[float | None] = field(default_factory=list)

    def publish(self, args, countdown=None) -> None:
        self.queue.append(list(args))
        self.delays.append(countdown)

    def deliver(self, message: list[int] | None = None) -> str | None:
        message = message if message is not None else self.queue.pop(0)
        with self.capture(execute=True):
            return tasks.drive_run.apply(args=message).get()

    def drain(self, limit: int = 20) -> int:
        """Deliver until nothing is queued; how many messages that took."""
        delivered = 0
        while self.queue and delivered < limit:
            self.deliver()
            delivered += 1
        return delivered


@pytest.fixture
def broker(monkeypatch, settings, django_capture_on_commit_callbacks) -> Broker:
    settings.OPTIML_EVALUATOR = f"recorded:{RUN_RECORDING}"
    broker = Broker(capture=django_capture_on_commit_callbacks)
    monkeypatch.setattr(tasks.drive_run, "apply_async",
                        lambda args, countdown=None: broker.publish(args, countdown))
    return broker


@pytest.fixture
def launch(broker, django_capture_on_commit_callbacks):
    """launch(budget) -> a run created as the web API creates it, its first step queued."""

    def launch(budget: int = 3) -> Run:
        relu = task_registry.get("relu")
        with django_capture_on_commit_callbacks(execute=True):
            return services.run_launch(task_name="relu", source=relu.naive_source,
                                       plan=relu.naive_plan, budget=budget)

    return launch


class CallingBack:
    """The recorded verdicts, calling `during` while the first candidate is evaluated:
    something that happens while a step is under way on the GPU."""

    def __init__(self, during) -> None:
        self.inner, self.during = RecordedEvaluator(RUN_RECORDING), during

    def gpu(self) -> str:
        return self.inner.gpu()

    def evaluate(self, task_name, candidate, options):
        during, self.during = self.during, None
        if during is not None:
            during()
        return self.inner.evaluate(task_name, candidate, options)


def _control(capture, run: Run, action: str) -> None:
    with capture(execute=True):
        services.run_control(run_id=run.pk, action=action)


def test_a_run_spends_its_budget_one_message_per_step(broker, launch):
    run = launch(budget=3)
    assert broker.queue == [[run.pk, 0]]

    assert broker.drain() == 3

    run.refresh_from_db()
    assert (run.status, run.evaluated, run.drive_token) == (Run.Status.FINISHED, 3, 3)
    assert RunEvent.objects.filter(run=run).last().kind == "run_finished"
    assert broker.delays == [None, None, None]  # every step made progress: no waiting


def test_a_redelivered_message_does_nothing_and_starts_no_second_chain(broker, launch):
    run = launch(budget=3)
    first = broker.queue[0]
    assert broker.deliver() == Run.Status.RUNNING
    events = RunEvent.objects.filter(run=run).count()

    assert broker.deliver(first) is None

    run.refresh_from_db()
    assert run.evaluated == 1 and RunEvent.objects.filter(run=run).count() == events
    assert broker.queue == [[run.pk, 1]]


def test_a_twin_delivered_while_a_step_runs_does_not_fork_the_chain(broker, launch):
    run = launch(budget=3)
    message = broker.queue.pop(0)
    twin = CallingBack(lambda: services.run_advance(run_id=run.pk, token=message[1],
                                                    evaluator=RecordedEvaluator(RUN_RECORDING)))

    with broker.capture(execute=True):
        outcome = services.run_advance(run_id=run.pk, token=message[1], evaluator=twin)

    assert outcome is None  # the twin finished first and handed the token on, not this step
    assert broker.queue == [[run.pk, 1]]
    broker.drain()
    run.refresh_from_db()
    assert run.status == Run.Status.FINISHED and run.evaluated >= run.budget


def test_a_pause_stops_the_chain_after_the_step_under_way(broker, launch):
    run = launch(budget=3)
    message = broker.queue.pop(0)
    pause = CallingBack(lambda: services.run_control(run_id=run.pk, action="pause"))

    with broker.capture(execute=True):
        services.run_advance(run_id=run.pk, token=message[1], evaluator=pause)

    run.refresh_from_db()
    assert run.status == Run.Status.PAUSED and run.evaluated == 1  # the step finished
    assert broker.queue == []  # and queued nothing after it


def test_a_message_queued_before_a_pause_does_nothing_after_it(broker, launch):
    run = launch(budget=3)
    broker.deliver()
    _control(broker.capture, run, "pause")

    assert broker.drain() == 1
    run.refresh_from_db()
    assert run.status == Run.Status.PAUSED and run.evaluated == 1


def test_resume_starts_exactly_one_chain_even_when_the_old_one_is_still_queued(broker, launch):
    run = launch(budget=3)
    broker.deliver()  # queues the step that carries token 1
    for action in ("pause", "resume", "pause", "resume"):
        _control(broker.capture, run, action)
    assert broker.queue == [[run.pk, 1], [run.pk, 3], [run.pk, 5]]

    outcomes = [broker.deliver() for _ in range(3)]

    assert outcomes == [None, None, Run.Status.RUNNING]
    assert broker.queue == [[run.pk, 6]]  # one live chain
    assert broker.drain() == 1
    run.refresh_from_db()
    assert (run.status, run.evaluated) == (Run.Status.FINISHED, 3)


def test_a_resume_while_the_paused_step_still_runs_leaves_one_chain(broker, launch):
    run = launch(budget=3)
    message = broker.queue.pop(0)

    def pause_and_resume() -> None:  # its enqueue runs when the step's capture ends
        services.run_control(run_id=run.pk, action="pause")
        services.run_control(run_id=run.pk, action="resume")

    with broker.capture(execute=True):
        services.run_advance(run_id=run.pk, token=message[1], evaluator=CallingBack(pause_and_resume))

    assert broker.queue == [[run.pk, 2]]  # the resume's chain; the old step queued nothing
    broker.drain()
    run.refresh_from_db()
    assert (run.status, run.evaluated) == (Run.Status.FINISHED, 3)


def test_stop_ends_the_chain(broker, launch):
    run = launch(budget=3)
    broker.deliver()
    _control(broker.capture, run, "stop")

    assert broker.deliver() is None
    run.refresh_from_db()
    assert (run.status, run.evaluated, broker.queue) == (Run.Status.STOPPED, 1, [])


def test_a_step_that_breaks_marks_the_run_failed_with_the_reason_and_ends_the_chain(broker, launch):
    run = launch(budget=3)
    broker.deliver()
    Run.objects.filter(pk=run.pk).update(state={"task": "relu"})  # a state no engine can load

    assert broker.deliver() == Run.Status.FAILED

    run.refresh_from_db()
    assert run.status == Run.Status.FAILED and run.message.startswith("ValueError: search state version")
    last = RunEvent.objects.filter(run=run).last()
    assert (last.kind, last.data["status"]) == ("run_status", "failed")
    assert broker.queue == []


def test_a_step_whose_candidate_another_worker_holds_waits_before_looking_again(broker, launch):
    from profiling import services as gate_services
    from profiling.evaluators import options_from_dict

    run = launch(budget=3)
    claim = gate_services.evaluation_claim(candidate=run.root_candidate, task=run.task,
                                           gpu=RecordedEvaluator(RUN_RECORDING).gpu(),
                                           gate_settings=options_from_dict(run.gate_options).identity())
    assert claim is not None  # the root is being measured elsewhere

    assert broker.deliver() == Run.Status.RUNNING

    run.refresh_from_db()
    assert run.evaluated == 0
    assert (broker.queue, broker.delays) == ([[run.pk, 1]], [None, services.IDLE_STEP_DELAY_S])


# -- a chain that was lost -----------------------------------------------------------------


def _age(run: Run, seconds: float) -> None:
    from datetime import timedelta

    from django.utils import timezone

    Run.objects.filter(pk=run.pk).update(updated=timezone.now() - timedelta(seconds=seconds))


def test_a_run_whose_chain_was_lost_gets_exactly_one_new_chain(broker, launch, settings):
    run = launch(budget=3)
    lost = broker.queue.pop(0)  # the worker died before delivering the first step
    _age(run, settings.OPTIML_RUN_STALL_S + 1)

    with broker.capture(execute=True):
        assert tasks.restart_stalled_runs.apply().get() == [run.pk]
        assert tasks.restart_stalled_runs.apply().get() == []  # its row moved: not stalled now

    assert len(broker.queue) == 1 and broker.queue[0] != lost
    assert broker.deliver(lost) is None  # the lost message, redelivered late, does nothing
    broker.drain()
    run.refresh_from_db()
    assert run.status == Run.Status.FINISHED and run.evaluated == 3


def test_runs_that_are_recent_paused_or_finished_are_left_alone(broker, launch, settings):
    recent = launch(budget=3)
    paused = launch(budget=3)
    services.run_control(run_id=paused.pk, action="pause")
    done = launch(budget=1)
    broker.drain()
    for run in (paused, done):
        _age(run, settings.OPTIML_RUN_STALL_S + 1)
    queued = len(broker.queue)

    with broker.capture(execute=True):
        assert services.run_restart_stalled(older_than_s=settings.OPTIML_RUN_STALL_S) == []

    assert len(broker.queue) == queued
    recent.refresh_from_db()
    assert recent.status == Run.Status.FINISHED  # drained to the end by its own chain
