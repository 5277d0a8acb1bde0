"""The worker drives a run one step per Celery message, each step queuing the next after
commit, and each asked candidate is an evaluation message of its own (the `gpu` queue),
whose result wakes the run. A drive message carries the run's drive token: a duplicate, a
redelivery, a wake-up the chain has seen or a message queued before a pause finds the
token moved on and does nothing, so a run never has two driver chains. An evaluation
message that comes twice stores one result; one that is lost is sent again. The broker
here is a list; the tasks, the services, the rows and the recorded H200 verdicts of the
naive relu kernel are the real ones."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from profiling.evaluators import RecordedEvaluator
from profiling.harness import tasks as task_registry
from search import control_services, node_services, services, tasks
from search.models import Run, RunEvent, RunNode
from tests.web.conftest import RUN_RECORDING

pytestmark = pytest.mark.django_db


@dataclass
class Broker:
    """What drive_run_enqueue and evaluate_node_enqueue published, in order, as
    ("drive" | "evaluate", args, countdown); deliver() hands the oldest message (or a given
    one) to its task the way a worker would, then publishes whatever that queued once it
    committed. Countdowns are recorded, not waited for."""

    capture: object
    queue: list[tuple[str, list]] = field(default_factory=list)
    delays: list[float | None] = field(default_factory=list)
    delivered: list[tuple[str, list]] = field(default_factory=list)

    def publish(self, kind: str, args, countdown=None) -> None:
        self.queue.append((kind, list(args)))
        self.delays.append(countdown)

    def deliver(self, message: tuple[str, list] | None = None):
        message = message if message is not None else self.queue.pop(0)
        self.delivered.append(message)
        kind, args = message
        task = {"drive": tasks.drive_run, "evaluate": tasks.evaluate_node,
                "compile": tasks.compile_node}[kind]
        with self.capture(execute=True):
            return task.apply(args=args).get()

    def drain(self, limit: int = 60) -> int:
        """Deliver until nothing is queued; how many messages that took."""
        count = 0
        while self.queue and count < limit:
            self.deliver()
            count += 1
        return count

    def of(self, kind: str) -> list[list]:
        return [args for k, args in self.queue if k == kind]


@pytest.fixture
def broker(monkeypatch, settings, django_capture_on_commit_callbacks) -> Broker:
    """Evaluations straight to the GPU queue here; the compile ahead has tests of its own below."""
    settings.OPTIML_EVALUATOR = f"recorded:{RUN_RECORDING}"
    settings.OPTIML_COMPILE_AHEAD = False
    broker = Broker(capture=django_capture_on_commit_callbacks)
    monkeypatch.setattr(tasks.drive_run, "apply_async",
                        lambda args, countdown=None: broker.publish("drive", args, countdown))
    monkeypatch.setattr(tasks.evaluate_node, "apply_async",
                        lambda args, countdown=None, **options: broker.publish("evaluate", args, countdown))
    monkeypatch.setattr(tasks.compile_node, "apply_async",
                        lambda args, countdown=None, **options: broker.publish("compile", args, countdown))
    return broker


@pytest.fixture
def launch(broker, django_capture_on_commit_callbacks):
    """launch(budget, parallel) -> a run created as the web API creates it, its first step queued."""

    def launch(budget: int = 3, parallel: int = 1) -> Run:
        relu = task_registry.get("relu")
        with django_capture_on_commit_callbacks(execute=True):
            return services.run_launch(task_name="relu", source=relu.naive_source,
                                       plan=relu.naive_plan, budget=budget, parallel=parallel)

    return launch


def _control(capture, run: Run, action: str) -> None:
    with capture(execute=True):
        control_services.run_control(run_id=run.pk, action=action)


def _measured(run: Run) -> list[int]:
    return sorted(RunNode.objects.filter(run=run, state="done", detail__reused=False)
                  .values_list("node_id", flat=True))


def test_a_run_spends_its_budget_with_one_evaluation_message_per_candidate(broker, launch):
    run = launch(budget=3)
    assert broker.queue == [("drive", [run.pk, 0])]

    broker.drain()

    run.refresh_from_db()
    assert (run.status, run.evaluated) == (Run.Status.FINISHED, 3)
    assert RunEvent.objects.filter(run=run).last().kind == "run_finished"
    evaluated = [args[1] for kind, args in broker.delivered if kind == "evaluate"]
    assert sorted(evaluated) == _measured(run) and len(evaluated) == 3  # each once
    assert RunNode.objects.filter(run=run, state="pending").count() == 0


def test_a_run_hands_out_up_to_parallel_evaluations_at_once(broker, launch):
    run = launch(budget=7, parallel=3)
    broker.deliver()  # the first step: only the root can be asked
    assert [args[1] for args in broker.of("evaluate")] == [0]
    broker.deliver(broker.queue.pop(broker.queue.index(("evaluate", [run.pk, 0, None]))))
    wake = broker.queue.pop()  # the root's result wakes the run
    assert wake == ("drive", [run.pk, 1])
    broker.deliver(wake)
    assert len(broker.of("evaluate")) == 3  # three of the root's children at once

    most = 0
    while broker.queue:
        most = max(most, len(broker.of("evaluate")))
        broker.deliver()
    run.refresh_from_db()
    assert (run.status, run.evaluated) == (Run.Status.FINISHED, 7) and most <= 3
    assert len(_measured(run)) == 7


def test_a_repeated_evaluation_message_changes_nothing(broker, launch):
    from profiling.models import Evaluation

    run = launch(budget=3)
    broker.deliver()
    message = broker.queue.pop(broker.queue.index(("evaluate", [run.pk, 0, None])))
    assert broker.deliver(message) == "stored"
    queued, rows = list(broker.queue), Evaluation.objects.count()

    assert broker.deliver(message) == "known"  # before the run was told
    assert broker.queue == queued and Evaluation.objects.count() == rows  # no second wake-up
    broker.drain()
    assert broker.deliver(message) == "known"  # and after
    run.refresh_from_db()
    assert (run.status, run.evaluated) == (Run.Status.FINISHED, 3)


def test_a_lost_evaluation_message_is_sent_again_once_its_time_is_up(broker, launch):
    run = launch(budget=3)
    broker.deliver()
    lost = broker.queue.pop(broker.queue.index(("evaluate", [run.pk, 0, None])))  # never delivered
    for _ in range(3):  # the chain looks again now and then: nothing arrived, nothing is due
        broker.deliver()
    run.refresh_from_db()
    assert run.evaluated == 0 and broker.of("evaluate") == [] and len(broker.of("drive")) == 1

    _age_issue(run, services.evaluation_time_limit_s(run) + 1)
    broker.deliver()  # the chain's next look finds the evaluation overdue: sent again

    assert broker.of("evaluate") == [lost[1]]
    broker.drain()
    run.refresh_from_db()
    assert (run.status, run.evaluated) == (Run.Status.FINISHED, 3)


def test_a_redelivered_drive_message_does_nothing_and_starts_no_second_chain(broker, launch):
    run = launch(budget=3)
    first = broker.queue[0]
    assert broker.deliver() == Run.Status.RUNNING
    events = RunEvent.objects.filter(run=run).count()
    queued = list(broker.queue)

    assert broker.deliver(first) is None

    assert RunEvent.objects.filter(run=run).count() == events and broker.queue == queued


def test_a_wake_up_and_the_waiting_message_are_twins_only_one_steps(broker, launch):
    run = launch(budget=3)
    broker.deliver()  # hands the root out; the chain waits with token 1
    assert broker.of("drive") == [[run.pk, 1]]
    broker.deliver(broker.queue.pop(broker.queue.index(("evaluate", [run.pk, 0, None]))))
    assert broker.of("drive") == [[run.pk, 1], [run.pk, 1]]  # the waiting one and the wake-up

    outcomes = [broker.deliver(broker.queue.pop(0)) for _ in range(2)]
    assert outcomes.count(None) == 1  # the second finds the token moved on
    assert broker.of("drive") == [[run.pk, 2]]  # one chain
    broker.drain()
    run.refresh_from_db()
    assert (run.status, run.evaluated) == (Run.Status.FINISHED, 3)


def test_an_evaluation_delivered_while_paused_waits_for_the_resume(broker, launch):
    run = launch(budget=3)
    broker.deliver()
    _control(broker.capture, run, "pause")
    message = broker.queue.pop(broker.queue.index(("evaluate", [run.pk, 0, None])))
    assert broker.deliver(message) == "idle"
    assert broker.drain() >= 1  # the old chain's message does nothing
    run.refresh_from_db()
    assert (run.status, run.evaluated) == (Run.Status.PAUSED, 0)

    _control(broker.capture, run, "resume")
    broker.drain()
    run.refresh_from_db()
    assert (run.status, run.evaluated) == (Run.Status.FINISHED, 3)
    assert [args for kind, args in broker.delivered if kind == "evaluate"].count([run.pk, 0, None]) == 2


def test_resume_starts_exactly_one_chain_even_when_the_old_one_is_still_queued(broker, launch):
    run = launch(budget=3)
    broker.deliver()  # queues the step that carries token 1, and the root's evaluation
    for action in ("pause", "resume", "pause", "resume"):
        _control(broker.capture, run, action)
    assert broker.of("drive") == [[run.pk, 1], [run.pk, 3], [run.pk, 5]]

    broker.drain()
    run.refresh_from_db()
    assert (run.status, run.evaluated) == (Run.Status.FINISHED, 3)
    drives = [args for kind, args in broker.delivered if kind == "drive"]
    assert len({tuple(args) for args in drives}) == len(drives) - sum(  # tokens never fork:
        1 for i, args in enumerate(drives) if args in drives[:i])  # a repeat is a twin, no more


def test_stop_ends_the_chain(broker, launch):
    run = launch(budget=3)
    broker.deliver()
    _control(broker.capture, run, "stop")

    broker.drain()
    run.refresh_from_db()
    assert (run.status, run.evaluated, broker.queue) == (Run.Status.STOPPED, 0, [])


def test_a_step_that_breaks_marks_the_run_failed_with_the_reason_and_ends_the_chain(broker, launch):
    from search import state

    run = launch(budget=3)
    broker.deliver()
    Run.objects.filter(pk=run.pk).update(state={"task": "relu"})  # a state no engine can load
    state.search_forget(run.pk)

    broker.drain()

    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    # The kind of error, not its text (the operator's, in the log with its traceback).
    assert run.message == ("a step of the run failed: an unexpected ValueError "
                           "(the server's log has the details)")
    last = RunEvent.objects.filter(run=run).last()
    assert (last.kind, last.data["status"]) == ("run_status", "failed")
    assert broker.queue == []


def test_an_evaluation_whose_kernel_another_worker_holds_looks_again_later(broker, launch):
    from profiling import services as gate_services
    from profiling.evaluators import options_from_dict

    run = launch(budget=3)
    broker.deliver()
    evaluator = RecordedEvaluator(RUN_RECORDING)
    claim = gate_services.evaluation_claim(candidate=run.root_candidate, task=run.task, gpu=evaluator.gpu(),
                                           gate_settings=options_from_dict(run.gate_options).identity(),
                                           evaluator=evaluator.identity())
    assert claim is not None  # the root is being measured elsewhere

    assert node_services.node_evaluate(run_id=run.pk, node_id=0, best_full_ms=None) == "held"

    run.refresh_from_db()
    assert run.evaluated == 0 and RunNode.objects.get(run=run, node_id=0).result is None
    assert tasks.HELD_RETRY_S > 0
    # ... and it waits in the queue again, no worker on its row (selectors.run_pace)
    assert RunNode.objects.filter(run=run, node_id=0).values_list("started_at", "worker").get() == (None, "")


def test_the_queue_counts_what_waits_for_a_gpu_worker_what_is_ahead_and_what_is_measured(broker, launch):
    from django.utils import timezone

    from search import selectors

    first, second = launch(budget=3), launch(budget=3)
    for run in (first, second):  # each run's first step: its root goes to the GPU queue
        broker.deliver(next(m for m in broker.queue if m[0] == "drive" and m[1][0] == run.pk))
        broker.queue.remove(broker.delivered[-1])
    # Both roots wait in the GPU queue, the first run's issued first: it waits behind
    # nobody, the second behind it.
    assert {"queued": 1, "queued_ahead": 0, "measuring": 0}.items() <= selectors.run_pace(run=first).items()
    assert {"queued": 1, "queued_ahead": 1}.items() <= selectors.run_pace(run=second).items()

    stored = node_services.node_evaluate(run_id=first.pk, node_id=0, best_full_ms=None, worker="gpu0@h1")
    assert stored == "stored"

    measured = RunNode.objects.get(run=first, node_id=0)
    assert measured.worker == "gpu0@h1" and measured.started_at is not None  # who measured it
    assert selectors.run_pace(run=second)["queued_ahead"] == 0  # taken: nothing is ahead now
    # While a worker measures a node, the run counts it (as node_evaluate leaves the row
    # then); which worker it is stays on the row, for the operator.
    RunNode.objects.filter(run=second, node_id=0).update(started_at=timezone.now(), worker="gpu1@h2")
    pace = selectors.run_pace(run=second)
    assert {"queued": 0, "measuring": 1}.items() <= pace.items() and "gpu1@h2" not in str(pace)


# -- a chain that was lost -----------------------------------------------------------------


def _age(run: Run, seconds: float) -> None:
    from datetime import timedelta

    from django.utils import timezone

    Run.objects.filter(pk=run.pk).update(updated=timezone.now() - timedelta(seconds=seconds))


def _age_issue(run: Run, seconds: float) -> None:
    from datetime import timedelta

    from django.utils import timezone

    RunNode.objects.filter(run=run, state="pending").update(
        issued_at=timezone.now() - timedelta(seconds=seconds))


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
    control_services.run_control(run_id=paused.pk, action="pause")
    done = launch(budget=1)
    broker.drain()
    for run in (paused, done):
        _age(run, settings.OPTIML_RUN_STALL_S + 1)
    queued = len(broker.queue)

    with broker.capture(execute=True):
        assert control_services.run_restart_stalled(older_than_s=settings.OPTIML_RUN_STALL_S) == []

    assert len(broker.queue) == queued
    recent.refresh_from_db()
    assert recent.status == Run.Status.FINISHED  # drained to the end by its own chain


# -- compiled ahead, on a CPU worker (real nvcc) -------------------------------------------


@pytest.fixture
def ahead(broker, settings):
    settings.OPTIML_COMPILE_AHEAD = True
    return broker


def _text_only_change(run: Run) -> str:
    """The root's kernel with a comment added: another kernel (another hash), the same cubin."""
    return RunNode.objects.get(run=run, node_id=0).candidate.source + "\n// nothing changes here\n"


def test_each_asked_node_is_compiled_on_a_cpu_worker_before_its_evaluation(ahead, launch):
    run = launch(budget=3)
    ahead.deliver()
    assert ahead.of("compile") == [[run.pk, 0, None]] and ahead.of("evaluate") == []
    ahead.deliver(ahead.queue.pop(ahead.queue.index(("compile", [run.pk, 0, None]))))
    assert ahead.of("evaluate") == [[run.pk, 0, None]]  # then the GPU's turn
    assert len(RunNode.objects.get(run=run, node_id=0).binary) == 64

    ahead.drain()
    run.refresh_from_db()
    assert (run.status, run.evaluated) == (Run.Status.FINISHED, 3)
    compiled = sorted(args[1] for kind, args in ahead.delivered if kind == "compile")
    evaluated = sorted(args[1] for kind, args in ahead.delivered if kind == "evaluate")
    assert compiled == evaluated == _measured(run)


def test_a_node_that_compiles_to_another_nodes_binary_is_not_measured_again(ahead, launch):
    from profiling.harness.candidate import Candidate as HarnessCandidate
    from search import state
    from search.engine.tree import Untried
    from search.engine.types import Proposal

    run = launch(budget=4)
    ahead.deliver()  # the root: compiled, then evaluated
    while ahead.of("compile") or ahead.of("evaluate"):
        ahead.deliver(ahead.queue.pop(next(i for i, m in enumerate(ahead.queue) if m[0] != "drive")))
    # Offer the root a child that differs only in a comment, best prior first.
    run.refresh_from_db()
    search = services._search_for(run)
    root = search.tree.root.proposal.candidate
    twin = HarnessCandidate.from_source_and_plan(_text_only_change(run), root.plan_dict())
    search.tree.root.add_untried([Untried(prior=99.0, candidate_hash=twin.content_hash(), proposal=Proposal(
        source="rewrite:comment", title="a comment", rationale="changes only the text", candidate=twin))])
    search.tree.touch(0)
    from django.db import transaction

    with transaction.atomic():
        state.search_save(Run.objects.select_for_update().get(pk=run.pk), search)

    ahead.drain()

    run.refresh_from_db()
    node = RunNode.objects.get(run=run, candidate__content_hash=twin.content_hash())
    assert node.state == "done" and node.engine["duplicate_of"] == 0 and node.detail["reused"]
    assert node.evaluation is None and node.binary == RunNode.objects.get(run=run, node_id=0).binary
    assert [args[1] for kind, args in ahead.delivered if kind == "evaluate"].count(node.node_id) == 0
    assert node.engine["untried"] == [] and node.engine["diagnosis"]["bottleneck"] == "duplicate"
    assert (run.status, run.evaluated) == (Run.Status.FINISHED, 4)  # the duplicate cost no evaluation
