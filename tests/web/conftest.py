"""Shared pieces for the Django side's tests: verdicts recorded (by hand, for the schema)
in tests/fixtures/recorded/, served by the real RecordedEvaluator."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from profiling import services
from profiling.evaluators import RecordedEvaluator
from profiling.harness.candidate import Candidate as HarnessCandidate
from profiling.harness.gate import GateOptions
from profiling.models import Candidate, Task

RECORDINGS = Path(__file__).resolve().parents[1] / "fixtures" / "recorded" / "schema-h200.json"


@dataclass(frozen=True)
class Recorded:
    """One recording in the fixture: the candidate it is of, and what it says."""

    label: str
    source: str
    plan: dict
    content_hash: str
    status: str

    def harness(self) -> HarnessCandidate:
        return HarnessCandidate.from_source_and_plan(self.source, self.plan)


def _recorded(label_start: str) -> Recorded:
    for item in json.loads(RECORDINGS.read_text())["recorded"]:
        if item["label"].startswith(label_start):
            return Recorded(
                label=item["label"],
                source=item["candidate"]["source"],
                plan=item["candidate"]["plan"],
                content_hash=item["candidate_hash"],
                status=item["verdict"]["status"],
            )
    raise LookupError(label_start)


@pytest.fixture
def fast() -> Recorded:
    """A relu kernel recorded as passing in 0.512 ms."""
    return _recorded("relu, grid-stride")


@pytest.fixture
def baseline() -> Recorded:
    """A relu kernel recorded as passing in 0.614 ms: the stand-in for a naive kernel."""
    return _recorded("relu, stand-in baseline")


@pytest.fixture
def leaky() -> Recorded:
    """A relu kernel recorded as rejected by the wrong_values guard."""
    return _recorded("relu, leaky by mistake")


@pytest.fixture
def options() -> GateOptions:
    # Small and quick: these tests never reach a GPU, but options travel everywhere.
    return GateOptions(seeds=2, profile=False, time_limit_s=60)


class CountingEvaluator:
    """The real RecordedEvaluator, counting how often it is asked for a verdict."""

    def __init__(self, inner: RecordedEvaluator) -> None:
        self.inner = inner
        self.calls = 0

    def gpu(self) -> str:
        return self.inner.gpu()

    def evaluate(self, task_name, candidate, options):
        self.calls += 1
        return self.inner.evaluate(task_name, candidate, options)


@pytest.fixture
def recorded() -> CountingEvaluator:
    return CountingEvaluator(RecordedEvaluator(RECORDINGS))


@pytest.fixture
def use_recordings(settings) -> Path:
    """Make get_evaluator() (the Celery task, the command) serve the fixture's verdicts."""
    settings.OPTIML_EVALUATOR = f"recorded:{RECORDINGS}"
    return RECORDINGS


@pytest.fixture
def relu_task(db) -> Task:
    """The relu task row, as tasks_sync writes it from the harness registry."""
    from profiling.harness import tasks as task_registry

    return services.task_upsert(spec=task_registry.get("relu"))


@pytest.fixture
def store(db):
    """store(recording) -> the Candidate row of a recorded kernel."""

    def store(recording: Recorded) -> Candidate:
        return services.candidate_get_or_create(
            source=recording.source, plan=recording.plan, label=recording.label
        )

    return store


# -- runs, users and teams for the API and live-view tests -------------------------------

RUN_RECORDING = Path(__file__).resolve().parents[1] / "fixtures" / "recorded" / "h200-relu-naive.json"


@pytest.fixture(autouse=True)
def own_throttle_history(settings, request):
    """Each test counts its own requests against the per-user rates (search.throttles),
    in a cache of its own: user ids repeat from test to test, and a shared Redis would
    carry one test's runs into the next one's rate."""
    own = {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": request.node.nodeid}
    settings.CACHES = {**settings.CACHES, "throttle": own}


@pytest.fixture
def people(db, settings):
    """alice makes runs; bob is in her team; dana is an admin of it; carol is a stranger."""
    from django.contrib.auth import get_user_model

    from accounts import services as accounts

    # A deliberately slow hash is for real passwords; these make tests wait for nothing.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

    make = get_user_model().objects.create_user
    alice, bob, carol, dana = (make(name, password=f"{name}-secret-1") for name in
                               ("alice", "bob", "carol", "dana"))
    team = accounts.team_create(name="kernels", admin=dana)
    for member in (alice, bob):
        accounts.membership_set(team=team, user=member)
    return {"alice": alice, "bob": bob, "carol": carol, "dana": dana, "team": team}


@pytest.fixture
def api():
    """api(user) -> a DRF test client signed in as `user` (None: signed out)."""
    from rest_framework.test import APIClient

    def client_for(user=None, **kwargs):
        client = APIClient(**kwargs)
        if user is not None:
            client.force_login(user)
        return client

    return client_for


@pytest.fixture
def relu_run(db):
    """relu_run(budget, user=..., team=..., drive=True) -> a run over the real H200
    recording of the naive relu kernel (its children have no recording: failed nodes)."""
    from profiling.harness import tasks as task_registry
    from search import services

    def make(budget: int = 3, *, drive: bool = True, **fields):
        relu = task_registry.get("relu")
        run = services.run_create(task_name="relu", source=relu.naive_source, plan=relu.naive_plan,
                                  budget=budget, **fields)
        if drive:
            run = services.run_drive(run_id=run.pk, evaluator=RecordedEvaluator(RUN_RECORDING))
        return run

    return make


# -- declared tasks ------------------------------------------------------------------------


@pytest.fixture
def task_dir(tmp_path, settings, monkeypatch) -> Path:
    """settings.OPTIML_TASK_DIR in a temporary folder, the only one on the task path, as
    the profiling app arranges at start-up; the registry forgets what it loaded before."""
    from profiling.harness import tasks as task_registry

    directory = tmp_path / "tasks"
    directory.mkdir()
    settings.OPTIML_TASK_DIR = directory
    monkeypatch.setenv("OPTIML_TASK_PATH", "")
    task_registry._reset_for_tests()
    task_registry.add_directory(directory)
    yield directory
    task_registry._reset_for_tests()


def store_recorded_lineage(task: str):
    """The newest lineage of `task` recorded on the H200 (bench/results/), stored."""
    import json

    from lineage import services as lineage_services
    from lineage.engine.walker import Lineage as LineageData

    results = Path(__file__).parents[2] / "bench" / "results"
    path = sorted(results.glob(f"*-h200-lineages*/lineage-{task}.json"))[-1]
    return lineage_services.lineage_store(lineage=LineageData.from_dict(json.loads(path.read_text())),
                                          origin="import")


# -- writing a kernel from an intent ---------------------------------------------------------


@pytest.fixture
def write_job(api, django_capture_on_commit_callbacks, monkeypatch):
    """write_job(user, body) -> (the POST's answer, the job as its GET reads once its
    Celery task has run here, in this process, as a CPU worker runs it; None when the
    POST was refused). Nothing runs before the POST has answered and committed."""
    from search import tasks

    queued: list[int] = []
    monkeypatch.setattr(tasks.write_kernel, "apply_async", lambda args, **options: queued.append(args[0]))

    def write(user, body: dict):
        client = api(user)
        with django_capture_on_commit_callbacks(execute=True):
            response = client.post("/api/kernels/write/", body, format="json")
        if response.status_code != 202:
            assert not queued, "a refused request queued a job"
            return response, None
        assert queued == [response.json()["id"]]
        tasks.write_kernel.apply(args=[queued.pop()])
        job = client.get(response.json()["url"])
        assert job.status_code == 200, job.content
        return response, job.json()

    return write


def migrate(targets):
    """The database migrated to `targets` (e.g. [("profiling", "0003_...")]); the app
    registry as of then."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.fixture
def back_to_latest():
    """A migration test's database migrated forward again after it."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    yield
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
