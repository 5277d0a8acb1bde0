"""A dead GPU worker's evaluation is taken over within a minute under the production
settings, exactly once (issue 34, item 9; profiling/leases.py, search/leases.py).

A worker holds a lease on the Evaluation row it claims and on the run node it measures,
renewed by a heartbeat while it measures. A worker "dies" here the way kill -9 leaves
things: its claim and its lease written, then nothing more (its evaluator raises an
exception nothing catches, and no heartbeat moves the lease again); time passing is the
rows' timestamps moved back. The takeover then goes through the real beat task, the
run's steps and the evaluation task, with the recorded H200 verdicts of the naive relu
kernel; the broker is a list, as in test_run_driver.py. The production timeouts (gate
time limit 600 s, claim grace 300 s) stay as they are: before leases, such a node was
handed out again only after 1,500 s.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from optiml_web.celery import EXPIRED_LEASE_SWEEP_S
from profiling import services as gate_services
from profiling.evaluators import RecordedEvaluator, options_from_dict
from profiling.harness import tasks as task_registry
from profiling.harness.gate import GateOptions
from profiling.models import Evaluation
from search import node_services, services, tasks
from search.engine.types import Measurement
from search.models import Run, RunNode
from tests.web.conftest import RUN_RECORDING

pytestmark = pytest.mark.django_db

PRODUCTION_LEASE_S = 30.0  # optiml_web/settings.py's defaults, which these tests keep
PRODUCTION_HEARTBEAT_S = 10.0


class WorkerKilled(BaseException):
    """What kill -9 leaves: nothing after this point runs, no handler records a failure."""


class DyingEvaluator(RecordedEvaluator):
    """The recorded evaluator (the same identity as the next worker's) whose worker dies
    while the gate runs."""

    def evaluate(self, task_name, candidate, options):
        raise WorkerKilled


class Broker:
    """What the tasks published, in order; deliver() runs the oldest message's task as a
    worker would and publishes what it queued once that committed."""

    def __init__(self, capture) -> None:
        self.capture, self.queue = capture, []

    def publish(self, kind: str, args) -> None:
        self.queue.append((kind, list(args)))

    def deliver(self):
        kind, args = self.queue.pop(0)
        task = {"drive": tasks.drive_run, "evaluate": tasks.evaluate_node}[kind]
        with self.capture(execute=True):
            return task.apply(args=args).get()

    def beat(self) -> list[int]:
        """The beat's sweep of expired leases, what it queued published once it committed."""
        with self.capture(execute=True):
            return tasks.wake_runs_with_expired_leases.apply().get()

    def drain(self, limit: int = 60) -> None:
        for _ in range(limit):
            if not self.queue:
                return
            self.deliver()

    def of(self, kind: str) -> list[list]:
        return [args for each, args in self.queue if each == kind]


@pytest.fixture
def broker(monkeypatch, settings, django_capture_on_commit_callbacks) -> Broker:
    settings.OPTIML_EVALUATOR = f"recorded:{RUN_RECORDING}"
    settings.OPTIML_COMPILE_AHEAD = False
    broker = Broker(django_capture_on_commit_callbacks)
    monkeypatch.setattr(tasks.drive_run, "apply_async",
                        lambda args, countdown=None: broker.publish("drive", args))
    monkeypatch.setattr(tasks.evaluate_node, "apply_async",
                        lambda args, countdown=None, **options: broker.publish("evaluate", args))
    return broker


@pytest.fixture
def run(broker, django_capture_on_commit_callbacks) -> Run:
    """A run of budget 3 with the production gate options, its first step taken: the root
    (node 0) handed out to the `gpu` queue."""
    relu = task_registry.get("relu")
    with django_capture_on_commit_callbacks(execute=True):
        run = services.run_launch(task_name="relu", source=relu.naive_source, plan=relu.naive_plan, budget=3)
    assert options_from_dict(run.gate_options).time_limit_s == GateOptions().time_limit_s == 600
    broker.deliver()
    assert broker.of("evaluate") == [[run.pk, 0, None]]
    return run


def _die_measuring(broker: Broker, run: Run) -> tuple[object, Evaluation]:
    """The GPU worker takes node 0's message, claims the root's evaluation and is killed.
    Returns its node lease's token and its Evaluation claim, as they were."""
    args = broker.queue.pop(broker.queue.index(("evaluate", [run.pk, 0, None])))[1]
    with pytest.raises(WorkerKilled):
        node_services.node_evaluate(run_id=args[0], node_id=args[1], best_full_ms=args[2], worker="gpu0@dead",
                                    evaluator=DyingEvaluator(RUN_RECORDING))
    node = RunNode.objects.get(run=run, node_id=0)
    claim = Evaluation.objects.get(status=Evaluation.Status.RUNNING)
    assert node.worker == "gpu0@dead"
    assert node.lease_expires_at is not None and claim.lease_expires_at is not None
    return node.started_at, claim


def _age(seconds: float) -> None:
    """`seconds` pass with no heartbeat: the dead worker's claim and lease, as written, grow old."""
    delta = timedelta(seconds=seconds)
    for model in (RunNode, Evaluation):
        stamp = "started_at" if model is RunNode else "claimed_at"
        for row in model.objects.filter(lease_expires_at__isnull=False):
            model.objects.filter(pk=row.pk).update(
                **{stamp: getattr(row, stamp) - delta, "lease_expires_at": row.lease_expires_at - delta})


def test_the_production_settings_take_a_dead_workers_evaluation_over_within_a_minute(settings):
    from optiml_web.celery import app

    assert (settings.OPTIML_EVALUATION_LEASE_S, settings.OPTIML_EVALUATION_HEARTBEAT_S) == (
        PRODUCTION_LEASE_S, PRODUCTION_HEARTBEAT_S)
    sweep = app.conf.beat_schedule["wake-runs-with-expired-leases"]
    assert sweep["task"] == tasks.wake_runs_with_expired_leases.name
    # The last heartbeat, a lease later the lease runs out, a sweep later the run steps.
    assert settings.OPTIML_EVALUATION_LEASE_S + sweep["schedule"] <= 45 < 60


def test_a_dead_workers_node_is_handed_out_again_once_its_lease_runs_out_and_measured_once(broker, run):
    dead_lease, dead_claim = _die_measuring(broker, run)

    _age(PRODUCTION_LEASE_S - 1)  # still within its lease: nothing is taken from it
    assert broker.beat() == []
    broker.deliver()  # the chain looks again: node 0 is still out
    assert broker.of("evaluate") == [] and RunNode.objects.get(run=run, node_id=0).worker == "gpu0@dead"

    _age(2)  # 31 s after the last heartbeat: the lease ran out
    assert broker.beat() == [run.pk]
    token = Run.objects.get(pk=run.pk).drive_token
    assert broker.queue == [("drive", [run.pk, token])] * 2  # the chain's, and its twin from the sweep
    assert [broker.deliver() for _ in range(2)].count(None) == 1  # one steps and hands node 0 out again
    assert broker.of("evaluate") == [[run.pk, 0, None]]
    assert RunNode.objects.filter(run=run, node_id=0).values_list("started_at", "worker").get() == (None, "")

    broker.drain()  # the next worker takes the dead one's claim over and the run goes on

    run.refresh_from_db()
    assert (run.status, run.evaluated) == (Run.Status.FINISHED, 3)
    keys = Counter(Evaluation.objects.values_list("candidate", "task", "harness_version", "gpu",
                                                  "settings_key"))
    assert set(keys.values()) == {1}, "an evaluation was stored twice"
    assert not Evaluation.objects.filter(status=Evaluation.Status.RUNNING).exists()
    root = Evaluation.objects.get(pk=dead_claim.pk)
    assert root.claimed_at > dead_claim.claimed_at and root.status == Evaluation.Status.PASSED  # taken over
    evaluated = list(RunNode.objects.filter(run=run, detail__reused=False).values_list("node_id", flat=True))
    assert len(evaluated) == len(set(evaluated)) == 3
    # The presumed-dead worker's late result is refused: its node lease is not the row's.
    late = ("hash", Measurement(status="passed", time_ms=1.0), None)
    assert node_services.node_result_store(run_id=run.pk, node_id=0, measured=late, lease=dead_lease) is False


def test_a_presumed_dead_workers_late_verdict_is_dropped_and_the_takers_stands(broker, run):
    _dead_lease, dead_claim = _die_measuring(broker, run)
    _age(PRODUCTION_LEASE_S + 1)
    options = full_gate_options(run)
    taken = gate_services.evaluation_claim(candidate=dead_claim.candidate, task=dead_claim.task,
                                           gpu=dead_claim.gpu, gate_settings=options.identity(),
                                           **_same_evaluator(dead_claim))
    assert taken is not None and taken.pk == dead_claim.pk and taken.claimed_at > dead_claim.claimed_at
    # A second sweeper or worker racing for the same row gets nothing: the lease is live again.
    assert gate_services.evaluation_claim(candidate=dead_claim.candidate, task=dead_claim.task,
                                          gpu=dead_claim.gpu, gate_settings=options.identity(),
                                          **_same_evaluator(dead_claim)) is None

    kernel = dead_claim.candidate.to_harness()
    verdict, source = RecordedEvaluator(RUN_RECORDING).evaluate("relu", kernel, options)
    late = gate_services.evaluation_complete(evaluation=dead_claim, verdict=verdict, source=source)
    assert (late.status, late.claimed_at, late.verdict) == (Evaluation.Status.RUNNING, taken.claimed_at, None)

    stored = gate_services.evaluation_complete(evaluation=taken, verdict=verdict, source=source)
    assert stored.status == Evaluation.Status.PASSED and stored.lease_expires_at is None
    assert Evaluation.objects.count() == 1


def test_a_claim_within_its_lease_is_not_taken_even_long_after_it_was_made(broker, run):
    """Only the lease says a worker died: a live claim is never taken for being old."""
    _dead_lease, claim = _die_measuring(broker, run)
    Evaluation.objects.filter(pk=claim.pk).update(claimed_at=timezone.now() - timedelta(seconds=120))
    assert gate_services.evaluation_claim(candidate=claim.candidate, task=claim.task, gpu=claim.gpu,
                                          gate_settings=full_gate_options(run).identity(),
                                          **_same_evaluator(claim)) is None


@pytest.mark.django_db(transaction=True)
def test_a_live_workers_heartbeat_keeps_its_claim_past_many_leases(broker, run, settings):
    """The heartbeat thread renews the claim while the gate runs, on its own connection."""
    settings.OPTIML_EVALUATION_LEASE_S, settings.OPTIML_EVALUATION_HEARTBEAT_S = 0.6, 0.1
    options = full_gate_options(run)
    evaluator = RecordedEvaluator(RUN_RECORDING, sleep_s=2.0)  # over three leases
    finished = []

    def measure() -> None:
        try:
            finished.append(gate_services.evaluation_run(task_name="relu", candidate=run.root_candidate,
                                                         options=options, evaluator=evaluator))
        finally:
            connection.close()

    worker = threading.Thread(target=measure)
    worker.start()
    try:
        time.sleep(1.5)  # the first lease ran out long ago: only the heartbeat keeps it
        claim = Evaluation.objects.get(status=Evaluation.Status.RUNNING)
        assert claim.lease_expires_at > timezone.now()
        assert gate_services.evaluation_claim(candidate=claim.candidate, task=claim.task, gpu=claim.gpu,
                                              gate_settings=options.identity(),
                                              **_same_evaluator(claim)) is None
    finally:
        worker.join()
    assert finished[0].status == Evaluation.Status.PASSED and Evaluation.objects.count() == 1


def full_gate_options(run: Run) -> GateOptions:
    """The full gate's options as the run's worker asks for them."""
    from search.measuring import run_gate_options

    return run_gate_options(run=run, screening=False)


def _same_evaluator(claim: Evaluation) -> dict:
    """The claim's evaluator, where the key has one (issue 35): another worker's claim of the same key."""
    return {"evaluator": claim.evaluator} if hasattr(claim, "evaluator") else {}


assert EXPIRED_LEASE_SWEEP_S <= PRODUCTION_HEARTBEAT_S  # the sweep is not what makes a takeover slow


def test_a_heartbeat_no_shorter_than_the_lease_stops_the_process_at_start_up():
    env = {**os.environ, "OPTIML_EVALUATION_LEASE_S": "30", "OPTIML_EVALUATION_HEARTBEAT_S": "30"}
    started = subprocess.run([sys.executable, "-c", "import optiml_web.settings"], env=env,
                             capture_output=True, text=True, timeout=60)
    assert started.returncode != 0
    assert "ImproperlyConfigured: OPTIML_EVALUATION_HEARTBEAT_S=30.0 must be above 0 and below" \
        in started.stderr
