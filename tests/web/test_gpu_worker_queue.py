"""Without demo mode and without a GPU worker, a run waits as "queued for a GPU worker"
instead of finishing, and New session says so before a run starts (issue 35;
search/gpu_queue.py, profiling/workers.py).

The server's evaluator is the gate here (the default); a GPU worker is there when its
heartbeat says so (a GpuWorker row with a recent beat). The broker is a list, as in
test_evaluation_leases.py: what a step queued is published once it commits.
"""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.utils import timezone

from optiml_web import celery as celery_app
from profiling.harness import tasks as task_registry
from profiling.models import GpuWorker
from profiling.workers import GPU_WORKER_BEAT_S, GPU_WORKER_LIVE_BEATS, gpu_worker_beat, gpu_worker_live
from search import broadcast, control_services, services, tasks
from search.gpu_queue import QUEUED_MESSAGE
from search.models import Run, RunEvent, RunNode
from tests.web.conftest import RUN_RECORDING

pytestmark = pytest.mark.django_db


class Broker:
    def __init__(self, capture) -> None:
        self.capture, self.queue = capture, []

    def publish(self, kind: str, args, countdown=None) -> None:
        self.queue.append((kind, list(args), countdown))

    def deliver_drive(self):
        index = next(i for i, (kind, _, _) in enumerate(self.queue) if kind == "drive")
        _, args, _ = self.queue.pop(index)
        with self.capture(execute=True):
            return tasks.drive_run.apply(args=args).get()

    def deliver_drives(self) -> None:
        """Every step message queued now (a stale one, whose token moved on, does nothing)."""
        for _ in range(len(self.of("drive"))):
            self.deliver_drive()

    def of(self, kind: str) -> list[list]:
        return [args for each, args, _ in self.queue if each == kind]


@pytest.fixture
def broker(monkeypatch, settings, django_capture_on_commit_callbacks) -> Broker:
    settings.OPTIML_EVALUATOR = "gate"
    settings.OPTIML_COMPILE_AHEAD = False
    broker = Broker(django_capture_on_commit_callbacks)
    monkeypatch.setattr(tasks.drive_run, "apply_async",
                        lambda args, countdown=None: broker.publish("drive", args, countdown))
    monkeypatch.setattr(tasks.evaluate_node, "apply_async",
                        lambda args, countdown=None, **options: broker.publish("evaluate", args))
    return broker


@pytest.fixture
def pushed(monkeypatch) -> list[tuple[str, dict]]:
    """The events announced to the run's socket (kind, data), as the viewers hear them."""
    heard = []
    monkeypatch.setattr(broadcast, "event_after_commit",
                        lambda *, run_id, seq, kind, data: heard.append((kind, data)))
    return heard


def _launch(broker: Broker, people=None, **fields) -> Run:
    relu = task_registry.get("relu")
    with broker.capture(execute=True):
        run = services.run_launch(task_name="relu", source=relu.naive_source, plan=relu.naive_plan, budget=3,
                                  user=people["alice"] if people else None, **fields)
    return run


def _first_step(broker: Broker, people=None, **fields) -> Run:
    run = _launch(broker, people, **fields)
    broker.deliver_drive()
    run.refresh_from_db()
    return run


def test_a_gate_run_without_a_gpu_worker_waits_queued_instead_of_finishing(broker, pushed):
    run = _first_step(broker)
    assert run.status == Run.Status.RUNNING and run.queued_since is not None
    assert run.message == QUEUED_MESSAGE
    assert QUEUED_MESSAGE.startswith("queued for a GPU worker: none is connected")
    assert broker.of("evaluate") == []  # nothing handed out to a worker with no GPU
    assert not RunNode.objects.filter(run=run, issued_at__isnull=False).exists()
    assert [args for kind, args, countdown in broker.queue if kind == "drive" and countdown] \
        == [[run.pk, run.drive_token]]  # the chain looks again later
    event = RunEvent.objects.filter(run=run, kind="run_status").get()
    assert event.data == {"status": "running", "message": QUEUED_MESSAGE,
                          "queued_since": run.queued_since.isoformat()}
    assert ("run_status", event.data) in pushed  # over the run's socket, like a pause


def test_it_keeps_waiting_without_a_new_event_while_no_worker_comes(broker):
    run = _first_step(broker)
    since = run.queued_since
    for _ in range(3):
        broker.deliver_drive()
    run.refresh_from_db()
    assert run.queued_since == since and run.evaluated == 0 and run.status == Run.Status.RUNNING
    assert RunEvent.objects.filter(run=run, kind="run_status").count() == 1


def test_it_leaves_the_queue_when_a_gpu_worker_appears_and_hands_its_root_out(broker, pushed):
    run = _first_step(broker)
    gpu_worker_beat(hostname="optiml@gpu-1", gpu="NVIDIA H200")
    broker.deliver_drive()
    run.refresh_from_db()
    assert run.queued_since is None and run.message == "" and run.status == Run.Status.RUNNING
    assert broker.of("evaluate") == [[run.pk, 0, None]]
    last = RunEvent.objects.filter(run=run, kind="run_status").last()
    assert last.data == {"status": "running", "message": "", "queued_since": None}
    assert ("run_status", last.data) in pushed


def test_a_worker_that_stopped_beating_is_gone_and_one_that_shut_down_is_gone_at_once():
    gpu_worker_beat(hostname="optiml@gpu-1", gpu="NVIDIA H100")
    assert gpu_worker_live()
    stale = timezone.now() - timedelta(seconds=GPU_WORKER_BEAT_S * GPU_WORKER_LIVE_BEATS + 1)
    GpuWorker.objects.update(last_beat=stale)
    assert not gpu_worker_live()
    gpu_worker_beat(hostname="optiml@gpu-1", gpu="NVIDIA H100")  # it beats again: one row, live
    assert GpuWorker.objects.count() == 1 and gpu_worker_live()


def test_a_run_starting_with_a_live_gpu_worker_never_queues(broker):
    gpu_worker_beat(hostname="optiml@gpu-1", gpu="NVIDIA H200")
    run = _first_step(broker)
    assert run.queued_since is None and broker.of("evaluate") == [[run.pk, 0, None]]
    assert not RunEvent.objects.filter(run=run, kind="run_status").exists()


def test_a_demo_run_never_waits_for_a_gpu_worker(broker):
    demo = _first_step(broker, evaluator="demo")
    assert demo.queued_since is None and broker.of("evaluate") == [[demo.pk, 0, None]]


def test_a_run_on_a_server_that_replays_recordings_never_waits_for_a_gpu_worker(broker, settings):
    settings.OPTIML_EVALUATOR = f"recorded:{RUN_RECORDING}"
    recorded = _first_step(broker)
    assert recorded.queued_since is None and broker.of("evaluate") == [[recorded.pk, 0, None]]


def test_pausing_a_queued_run_takes_it_out_and_resuming_queues_it_again(broker, pushed):
    run = _first_step(broker)
    paused = control_services.run_control(run_id=run.pk, action="pause")
    assert paused.status == Run.Status.PAUSED and paused.queued_since is None
    assert pushed[-1] == ("run_status", {"status": "paused", "message": paused.message, "queued_since": None})
    with broker.capture(execute=True):
        control_services.run_control(run_id=run.pk, action="resume")
    broker.deliver_drives()
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING and run.queued_since is not None and run.message == QUEUED_MESSAGE


def test_the_run_api_shows_the_queue_and_new_session_warns_before_a_run_starts(broker, api, people):
    run = _first_step(broker, people)
    body = api(people["alice"]).get(f"/api/runs/{run.pk}/").json()
    assert body["status"] == "running" and body["message"] == QUEUED_MESSAGE
    assert body["queued_since"] is not None
    listed = api(people["alice"]).get("/api/runs/").json()
    rows = listed["results"] if isinstance(listed, dict) else listed
    assert [row["queued_since"] is not None for row in rows if row["id"] == run.pk] == [True]
    choices = api(people["alice"]).get("/api/demo/").json()
    assert choices["gpu_worker_live"] is False
    assert "queued for a GPU worker" in choices["gate_note"]
    gpu_worker_beat(hostname="optiml@gpu-1", gpu="NVIDIA H200")
    choices = api(people["alice"]).get("/api/demo/").json()
    assert choices["gpu_worker_live"] is True and choices["gate_note"] == ""


def test_new_session_says_nothing_of_gpu_workers_when_the_server_replays_recordings(api, people, settings):
    settings.OPTIML_EVALUATOR = f"recorded:{RUN_RECORDING}"
    assert api(people["alice"]).get("/api/demo/").json()["gate_note"] == ""


def _consumer(queues: list[str]):
    return SimpleNamespace(hostname="optiml@gpu-7",
                           task_consumer=SimpleNamespace(queues=[SimpleNamespace(name=q) for q in queues]))


@pytest.mark.django_db(transaction=True)  # its beats are written from threads of their own
def test_a_worker_on_the_gpu_queue_of_a_gpu_host_beats_until_it_shuts_down(monkeypatch):
    from profiling.harness import gate

    monkeypatch.setattr(gate, "gpu_name", lambda: "NVIDIA H100 80GB HBM3")
    celery_app._gpu_worker_start(sender=_consumer(["gpu", "celery"]))
    try:
        worker = GpuWorker.objects.get()
        assert (worker.hostname, worker.gpu) == ("optiml@gpu-7", "NVIDIA H100 80GB HBM3")
        assert gpu_worker_live()
    finally:
        celery_app._gpu_worker_stop()
    assert not GpuWorker.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_cpu_worker_or_a_host_without_a_gpu_is_not_a_gpu_worker(monkeypatch):
    from profiling.harness import gate

    monkeypatch.setattr(gate, "gpu_name", lambda: "NVIDIA H100 80GB HBM3")
    celery_app._gpu_worker_start(sender=_consumer(["celery"]))
    monkeypatch.setattr(gate, "gpu_name", lambda: None)
    celery_app._gpu_worker_start(sender=_consumer(["gpu", "celery"]))
    celery_app._gpu_worker_stop()
    assert not GpuWorker.objects.exists()
