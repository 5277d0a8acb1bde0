"""Verdict identity: how a verdict was measured is part of what it is stored and looked up
under, so a verdict measured with weaker settings (one seed, one timed run, no profile)
never stands in for the standard gate's, nor the other way round; and for the same
settings a repeated request still costs nothing twice.

The verdicts are real H200 recordings, served by tests/web/stand_in_gate.py the way the
gate serves them (no profile when asked for none, the settings they were measured with)."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from optiml_web.celery import app
from profiling import selectors, services
from profiling.evaluators import RecordedEvaluator, options_to_dict
from profiling.harness import HARNESS_VERSION
from profiling.harness import tasks as task_registry
from profiling.harness.gate import GateOptions
from profiling.models import Evaluation
from profiling.serialization import LEGACY_SETTINGS_KEY, settings_key
from profiling.tasks import evaluate_candidate
from search import services as run_services
from search.models import RunNode
from tests.web.conftest import migrate
from tests.web.stand_in_gate import GateLikeRecorded

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "recorded"
SCHEMA = FIXTURES / "schema-h200.json"
NAIVE_RELU = FIXTURES / "h200-relu-naive.json"  # relu's own naive kernel, with its profile

STANDARD = GateOptions()
# What `evaluate --seeds 1 --runs 1 --no-profile` asks for.
WEAK = GateOptions(seeds=1, timing_runs=1, profile=False)


def key(options: GateOptions) -> str:
    return settings_key(options.identity())


def test_the_settings_key_depends_on_every_setting_and_on_nothing_else():
    assert key(STANDARD) == key(GateOptions(seed=7, workdir="/tmp/x", input_cache="/tmp/y", time_limit_s=5))
    assert settings_key({"a": 1, "b": [2]}) == settings_key({"b": [2], "a": 1})
    others = {key(GateOptions(**weaker)) for weaker in (
        {"seeds": 4}, {"timing_runs": 29}, {"profile": False}, {"levels": ("L0",)}, {"spot_checks": 1},
        {"sanitize": ()}, {"l1_sizes": {"n": 1024}}, {"warmup_runs": 0})}
    assert len(others) == 8 and key(STANDARD) not in others
    assert LEGACY_SETTINGS_KEY not in others | {key(STANDARD)}


@pytest.mark.django_db
def test_a_weak_verdict_is_not_served_to_the_standard_gate_and_the_standard_one_not_to_a_weak_ask(
        relu_task, store, fast):
    gate = GateLikeRecorded(SCHEMA)
    candidate = store(fast)

    def run(options: GateOptions) -> Evaluation:
        return services.evaluation_run(task_name="relu", candidate=candidate, options=options, evaluator=gate)

    weak, standard, weak_again = run(WEAK), run(STANDARD), run(WEAK)

    assert [o.identity() for o in gate.asked] == [WEAK.identity(), STANDARD.identity()]
    assert weak.pk != standard.pk and weak_again.pk == weak.pk
    assert (weak.settings_key, weak.settings) == (key(WEAK), WEAK.identity())
    assert (standard.settings_key, standard.settings) == (key(STANDARD), STANDARD.identity())
    assert weak.verdict["settings"] == WEAK.identity() and weak.verdict["profile"] is None
    assert standard.verdict["profile"]["metrics"]
    for options, row in ((WEAK, weak), (STANDARD, standard)):
        found = selectors.evaluation_for(candidate=candidate, task=relu_task, gpu=gate.gpu(),
                                         settings_key=key(options))
        assert found.pk == row.pk


@pytest.mark.django_db
@pytest.mark.parametrize("options", [STANDARD, WEAK], ids=["standard", "weak"])
def test_for_the_same_settings_a_repeated_request_costs_nothing_twice(relu_task, store, fast, options):
    gate = GateLikeRecorded(SCHEMA)
    candidate = store(fast)

    first = services.evaluation_run(task_name="relu", candidate=candidate, options=options, evaluator=gate)
    second = services.evaluation_run(task_name="relu", candidate=candidate, options=options, evaluator=gate)

    assert len(gate.asked) == 1 and first.pk == second.pk and Evaluation.objects.count() == 1


@pytest.fixture
def eager():
    previous = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = previous


@pytest.mark.django_db
def test_a_repeated_celery_message_writes_once_per_settings(eager, relu_task, store, fast, monkeypatch):
    gate = GateLikeRecorded(SCHEMA)
    monkeypatch.setattr(services, "get_evaluator", lambda: gate)
    candidate = store(fast)
    weak, standard = ([candidate.pk, "relu", options_to_dict(o)] for o in (WEAK, STANDARD))

    ids = [evaluate_candidate.apply(args=message).get() for message in (weak, weak, standard, standard)]

    assert ids[0] == ids[1] and ids[2] == ids[3] and ids[0] != ids[2]
    assert len(gate.asked) == 2 and Evaluation.objects.count() == 2


@pytest.mark.django_db
def test_a_claim_held_for_other_settings_does_not_block_these(relu_task, store, fast):
    candidate = store(fast)

    weak = services.evaluation_claim(candidate=candidate, task=relu_task, gpu="NVIDIA H200",
                                     gate_settings=WEAK.identity())
    standard = services.evaluation_claim(candidate=candidate, task=relu_task, gpu="NVIDIA H200",
                                         gate_settings=STANDARD.identity())
    again = services.evaluation_claim(candidate=candidate, task=relu_task, gpu="NVIDIA H200",
                                      gate_settings=STANDARD.identity())

    assert weak is not None and standard is not None and again is None


@pytest.mark.django_db
def test_a_verdict_measured_with_other_settings_than_asked_is_stored_under_those_never_as_asked(
        relu_task, store, fast):
    class WithoutSanitizers(GateLikeRecorded):
        """A host without compute-sanitizer: the gate's verdict says no tool ran."""

        def evaluate(self, task_name, candidate, options):
            verdict, source = super().evaluate(task_name, candidate, options)
            verdict.settings = {**verdict.settings, "sanitize": []}
            return verdict, source

    gate = WithoutSanitizers(SCHEMA)
    candidate = store(fast)
    measured = {**STANDARD.identity(), "sanitize": []}

    first = services.evaluation_run(task_name="relu", candidate=candidate, options=STANDARD, evaluator=gate)
    asked = Evaluation.objects.get(settings_key=key(STANDARD))
    again = services.evaluation_run(task_name="relu", candidate=candidate, options=STANDARD, evaluator=gate)

    # The caller gets the real verdict, labelled with how it was measured...
    assert first.status == Evaluation.Status.PASSED and first.settings_key == settings_key(measured)
    assert first.settings == measured and first.verdict["settings"] == measured
    # ...and the standard gate's row says why it has none, and may be measured again.
    assert (asked.status, asked.retryable, asked.verdict) == (Evaluation.Status.FAILED, True, None)
    assert "other gate settings than asked (sanitize)" in asked.message
    assert len(gate.asked) == 2 and again.pk == first.pk  # asked again; stored once
    assert Evaluation.objects.count() == 2


@pytest.mark.django_db
def test_a_recording_that_does_not_say_how_it_was_measured_answers_for_the_settings_asked(
        relu_task, store, fast):
    evaluation = services.evaluation_run(task_name="relu", candidate=store(fast), options=WEAK,
                                         evaluator=RecordedEvaluator(SCHEMA))

    assert evaluation.status == Evaluation.Status.PASSED
    assert evaluation.settings_key == key(WEAK) and evaluation.verdict["settings"] == WEAK.identity()


# -- the evaluate command and a later run ------------------------------------------------------


def evaluate(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("evaluate", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.fixture
def naive_relu_file(tmp_path) -> str:
    path = tmp_path / "naive.cu"
    path.write_text(task_registry.get("relu").naive_source)
    return str(path)


def run_from_naive_relu(gate):
    relu = task_registry.get("relu")
    run = run_services.run_create(task_name="relu", source=relu.naive_source, plan=relu.naive_plan,
                                  budget=1)
    return run_services.run_drive(run_id=run.pk, evaluator=gate)


@pytest.mark.django_db
def test_a_quick_evaluate_is_not_a_later_runs_root_which_gets_the_standard_gate_and_its_metrics(
        naive_relu_file, monkeypatch):
    gate = GateLikeRecorded(NAIVE_RELU)
    monkeypatch.setattr("profiling.management.commands.evaluate.get_evaluator", lambda: gate)

    out, _ = evaluate("--task", "relu", naive_relu_file, "--seeds", "1", "--runs", "1", "--no-profile",
                      "--no-naive")
    run = run_from_naive_relu(gate)

    assert "not the standard gate's" in out
    assert [o.identity() for o in gate.asked] == [WEAK.identity(), STANDARD.identity()]
    root = RunNode.objects.select_related("evaluation").get(run=run, node_id=0)
    assert root.evaluation.settings_key == key(STANDARD)
    assert root.detail["measurement"]["metrics"] and root.detail["measurement"]["bottleneck"]


@pytest.mark.django_db
def test_the_naive_baseline_is_measured_by_the_standard_gate_and_a_later_run_reuses_it(
        naive_relu_file, monkeypatch):
    gate = GateLikeRecorded(NAIVE_RELU)
    monkeypatch.setattr("profiling.management.commands.evaluate.get_evaluator", lambda: gate)

    _, err = evaluate("--task", "relu", naive_relu_file, "--seeds", "1", "--runs", "1", "--no-profile")
    assert "Evaluating the naive relu kernel first" in err
    measured = len(gate.asked)
    run = run_from_naive_relu(gate)

    assert [o.identity() for o in gate.asked] == [STANDARD.identity(), WEAK.identity()]
    assert measured == len(gate.asked)  # the run's root cost nothing: the baseline was it
    root = RunNode.objects.select_related("evaluation").get(run=run, node_id=0)
    assert root.evaluation.settings_key == key(STANDARD) and root.detail["measurement"]["metrics"]


# -- the migration -----------------------------------------------------------------------------

BEFORE = [("profiling", "0002_declaredtask")]
AFTER = [("profiling", "0003_evaluation_settings")]


def _legacy_rows(apps) -> tuple[int, int]:
    """Two rows as an older release stored them: one whose verdict names its settings (as
    verdicts do from this release on), one whose verdict does not."""
    Task, Candidate, Evaluation = (apps.get_model("profiling", name)
                                   for name in ("Task", "Candidate", "Evaluation"))
    task = Task.objects.create(name="relu")
    rows = []
    for index, verdict in enumerate(({"status": "passed", "settings": WEAK.identity()},
                                     {"status": "passed"})):
        candidate = Candidate.objects.create(content_hash=f"{index:064d}", source="//", plan={})
        rows.append(Evaluation.objects.create(
            candidate=candidate, task=task, harness_version=HARNESS_VERSION, gpu="NVIDIA H200",
            status="passed", verdict=verdict, claimed_at="2026-11-29T00:00:00Z").pk)
    return rows[0], rows[1]


@pytest.mark.django_db(transaction=True)
def test_the_migration_keys_old_rows_by_the_settings_they_name_or_as_legacy(back_to_latest):
    named, unnamed = _legacy_rows(migrate(BEFORE))

    Evaluation = migrate(AFTER).get_model("profiling", "Evaluation")

    assert Evaluation.objects.get(pk=named).settings_key == key(WEAK)
    assert Evaluation.objects.get(pk=named).settings == WEAK.identity()
    assert Evaluation.objects.get(pk=unnamed).settings_key == LEGACY_SETTINGS_KEY
    assert not Evaluation.objects.filter(settings_key=key(STANDARD)).exists()  # serves nobody


@pytest.mark.django_db(transaction=True)
def test_migrating_back_refuses_while_a_kernel_has_verdicts_under_several_settings(back_to_latest):
    named, _ = _legacy_rows(migrate(BEFORE))
    Evaluation = migrate(AFTER).get_model("profiling", "Evaluation")
    first = Evaluation.objects.get(pk=named)
    Evaluation.objects.create(candidate_id=first.candidate_id, task_id=first.task_id,
                              harness_version=first.harness_version, gpu=first.gpu,
                              settings_key=key(STANDARD), settings=STANDARD.identity(),
                              status="passed", claimed_at=first.claimed_at)

    with pytest.raises(RuntimeError, match="several gate settings"):
        migrate(BEFORE)
