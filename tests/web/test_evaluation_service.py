"""The evaluation service: claim, evaluate, complete; once per (candidate, task, harness
version, GPU, gate settings), whatever the number of callers (tests/web/
test_verdict_identity.py: what the settings change)."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from profiling import selectors, services
from profiling.evaluators import EvaluatorError, RecordedEvaluator
from profiling.harness import HARNESS_VERSION
from profiling.harness.gate import GateOptions
from profiling.models import Evaluation

pytestmark = pytest.mark.django_db

STALE_AFTER = timedelta(minutes=15)
SETTINGS = GateOptions().identity()  # the standard gate's


def test_it_stores_a_recorded_passing_verdict_with_its_time(relu_task, store, fast, recorded, options):
    evaluation = services.evaluation_run(
        task_name="relu", candidate=store(fast), options=options, evaluator=recorded
    )

    evaluation.refresh_from_db()
    assert evaluation.status == Evaluation.Status.PASSED
    assert evaluation.source == Evaluation.Source.RECORDED
    assert evaluation.gpu == "NVIDIA H200"
    assert evaluation.harness_version == HARNESS_VERSION
    assert evaluation.median_ms == pytest.approx(0.5121)
    assert evaluation.spread_ms == pytest.approx(0.003)
    assert evaluation.verdict["candidate_hash"] == fast.content_hash
    assert evaluation.finished_at is not None


def test_a_repeated_call_does_no_work_twice_and_writes_one_row(relu_task, store, fast, recorded, options):
    candidate = store(fast)
    first = services.evaluation_run(
        task_name="relu", candidate=candidate, options=options, evaluator=recorded
    )
    finished_at = Evaluation.objects.get(pk=first.pk).finished_at

    second = services.evaluation_run(
        task_name="relu", candidate=candidate, options=options, evaluator=recorded
    )

    assert recorded.calls == 1
    assert second.pk == first.pk
    assert Evaluation.objects.count() == 1
    assert Evaluation.objects.get(pk=first.pk).finished_at == finished_at


def test_a_rejection_names_its_guard_and_survives_an_infinite_error(
    relu_task, store, leaky, recorded, options
):
    evaluation = services.evaluation_run(
        task_name="relu", candidate=store(leaky), options=options, evaluator=recorded
    )

    evaluation.refresh_from_db()
    assert evaluation.status == Evaluation.Status.REJECTED
    assert evaluation.guard == "wrong_values"
    assert evaluation.median_ms is None
    # Infinity is not JSON (PostgreSQL refuses it), so it is stored as a string.
    assert evaluation.verdict["correctness"][0]["max_rel_error"] == "inf"


def test_a_candidate_without_a_recording_fails_with_the_reason_and_is_not_retried(
    relu_task, store, fast, recorded, options
):
    unrecorded = services.candidate_get_or_create(
        source=fast.source.replace("grid-stride", "grid stride"), plan=fast.plan
    )

    evaluation = services.evaluation_run(
        task_name="relu", candidate=unrecorded, options=options, evaluator=recorded
    )
    again = services.evaluation_run(
        task_name="relu", candidate=unrecorded, options=options, evaluator=recorded
    )

    assert evaluation.status == Evaluation.Status.FAILED
    assert "no recorded verdict" in evaluation.message
    assert unrecorded.content_hash[:12] in evaluation.message
    assert evaluation.retryable is False
    assert evaluation.verdict is None
    assert again.pk == evaluation.pk
    assert recorded.calls == 1


class BrokenEvaluator:
    """An evaluator whose harness crashes: the failure must become a row, not a stack."""

    def __init__(self) -> None:
        self.calls = 0

    def gpu(self) -> str:
        return "NVIDIA H200"

    def evaluate(self, task_name, candidate, options):
        self.calls += 1
        raise RuntimeError("the harness subprocess vanished")


def test_an_evaluator_that_crashes_leaves_a_failed_row_that_a_later_call_retries(
    relu_task, store, fast, recorded, options
):
    candidate = store(fast)

    failed = services.evaluation_run(
        task_name="relu", candidate=candidate, options=options, evaluator=BrokenEvaluator()
    )
    retried = services.evaluation_run(
        task_name="relu", candidate=candidate, options=options, evaluator=recorded
    )

    assert failed.status == Evaluation.Status.FAILED
    assert failed.message == "evaluator error: RuntimeError: the harness subprocess vanished"
    assert failed.retryable is True
    assert failed.median_ms is None and failed.verdict is None
    assert retried.pk == failed.pk
    assert retried.status == Evaluation.Status.PASSED
    assert retried.message == ""
    assert Evaluation.objects.count() == 1


def test_a_verdict_for_another_candidate_is_refused(relu_task, store, fast, leaky, recorded, options):
    class MixedUpEvaluator(RecordedEvaluator):
        def evaluate(self, task_name, candidate, options):
            return super().evaluate(task_name, leaky.harness(), options)

    evaluation = services.evaluation_run(
        task_name="relu",
        candidate=store(fast),
        options=options,
        evaluator=MixedUpEvaluator(recorded.inner.path),
    )

    assert evaluation.status == Evaluation.Status.FAILED
    assert "not for 'relu'" in evaluation.message


def test_a_second_claim_on_the_same_key_loses(relu_task, store, fast):
    candidate = store(fast)

    first = services.evaluation_claim(
        candidate=candidate, task=relu_task, gpu="NVIDIA H200", gate_settings=SETTINGS,
        stale_after=STALE_AFTER,
    )
    second = services.evaluation_claim(
        candidate=candidate, task=relu_task, gpu="NVIDIA H200", gate_settings=SETTINGS,
        stale_after=STALE_AFTER,
    )

    assert first is not None and first.status == Evaluation.Status.RUNNING
    assert second is None
    assert Evaluation.objects.count() == 1


def test_the_same_kernel_on_another_gpu_is_another_evaluation(relu_task, store, fast):
    candidate = store(fast)

    h200 = services.evaluation_claim(
        candidate=candidate, task=relu_task, gpu="NVIDIA H200", gate_settings=SETTINGS,
        stale_after=STALE_AFTER,
    )
    none = services.evaluation_claim(candidate=candidate, task=relu_task, gpu="none", gate_settings=SETTINGS,
                                     stale_after=STALE_AFTER)

    assert h200 is not None and none is not None
    assert Evaluation.objects.count() == 2


def test_a_claim_abandoned_past_the_time_limit_is_taken_over(relu_task, store, fast):
    candidate = store(fast)
    dead = services.evaluation_claim(
        candidate=candidate, task=relu_task, gpu="NVIDIA H200", gate_settings=SETTINGS,
        stale_after=STALE_AFTER,
    )
    Evaluation.objects.filter(pk=dead.pk).update(claimed_at=timezone.now() - timedelta(hours=1))

    taken = services.evaluation_claim(
        candidate=candidate, task=relu_task, gpu="NVIDIA H200", gate_settings=SETTINGS,
        stale_after=STALE_AFTER,
    )

    assert taken is not None and taken.pk == dead.pk
    assert taken.claimed_at > timezone.now() - timedelta(minutes=1)


def test_a_late_result_from_an_abandoned_claim_does_not_overwrite_the_new_one(
    relu_task, store, fast, leaky, recorded, options
):
    candidate = store(fast)
    dead = services.evaluation_claim(
        candidate=candidate, task=relu_task, gpu="NVIDIA H200", gate_settings=SETTINGS,
        stale_after=STALE_AFTER,
    )
    Evaluation.objects.filter(pk=dead.pk).update(claimed_at=timezone.now() - timedelta(hours=1))
    dead.refresh_from_db()
    services.evaluation_claim(candidate=candidate, task=relu_task, gpu="NVIDIA H200", gate_settings=SETTINGS,
                              stale_after=STALE_AFTER)
    verdict, source = recorded.evaluate("relu", fast.harness(), options)

    after = services.evaluation_complete(evaluation=dead, verdict=verdict, source=source)

    assert after.status == Evaluation.Status.RUNNING
    assert after.verdict is None


def test_the_naive_baseline_is_the_stored_evaluation_of_the_tasks_naive_kernel(
    relu_task, store, baseline, fast, recorded, options
):
    relu_task.naive_candidate = store(baseline)
    relu_task.save()
    assert selectors.naive_ms_for(task=relu_task, gpu="NVIDIA H200") is None

    services.evaluation_run_naive(task_name="relu", options=options, evaluator=recorded)
    services.evaluation_run(task_name="relu", candidate=store(fast), options=options, evaluator=recorded)

    naive = selectors.naive_evaluation_for(task=relu_task, gpu="NVIDIA H200")
    assert naive.candidate.content_hash == baseline.content_hash
    assert selectors.naive_ms_for(task=relu_task, gpu="NVIDIA H200") == pytest.approx(0.6144)
    assert selectors.naive_ms_for(task=relu_task, gpu="none") is None


def test_tasks_sync_copies_every_harness_task_with_its_naive_kernel():
    from profiling.harness import tasks as task_registry

    tasks = services.tasks_sync()
    services.tasks_sync()

    names = sorted(spec.name for spec in task_registry.all_tasks())
    assert [task.name for task in tasks] == names
    relu = next(task for task in tasks if task.name == "relu")
    assert relu.vendor_ms == task_registry.get("relu").vendor.time_ms
    assert relu.bytes == 2 * 4 * 2**28
    assert relu.naive_candidate.source == task_registry.get("relu").naive_source


def test_an_unknown_task_is_refused_before_anything_is_written(store, fast, recorded, options):
    from profiling.harness.tasks import UnknownTask

    candidate = store(fast)
    with pytest.raises(UnknownTask, match="known tasks"):
        services.evaluation_run(
            task_name="no_such_task", candidate=candidate, options=options, evaluator=recorded
        )
    assert Evaluation.objects.count() == 0


def test_evaluation_list_narrows_by_status(relu_task, store, fast, leaky, recorded, options):
    for recording in (fast, leaky):
        services.evaluation_run(
            task_name="relu", candidate=store(recording), options=options, evaluator=recorded
        )

    rejected = selectors.evaluation_list(task=relu_task, status=Evaluation.Status.REJECTED)

    assert [e.candidate.content_hash for e in rejected] == [leaky.content_hash]
    assert selectors.evaluation_list(task=relu_task).count() == 2


class GatedEvaluator:
    """The real RecordedEvaluator, held inside evaluate() until the test lets it go, so
    that a second caller arrives while the first is still evaluating."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.calls = 0
        self.inside = threading.Event()
        self.release = threading.Event()

    def gpu(self) -> str:
        return self.inner.gpu()

    def evaluate(self, task_name, candidate, options):
        self.calls += 1
        self.inside.set()
        assert self.release.wait(timeout=30), "the test never released the evaluator"
        return self.inner.evaluate(task_name, candidate, options)


def _in_thread(target, results: list) -> threading.Thread:
    def run() -> None:
        try:
            results.append(target())
        except BaseException as error:  # reported by the test, not lost in the thread
            results.append(error)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="concurrent writers need a real server database"
)
def test_a_caller_arriving_mid_evaluation_gets_the_running_row_and_no_work_is_repeated(
    relu_task, store, fast, recorded, options
):
    candidate = store(fast)
    evaluator = GatedEvaluator(recorded)

    def run() -> Evaluation:
        return services.evaluation_run(
            task_name="relu", candidate=candidate, options=options, evaluator=evaluator
        )

    first_results: list = []
    first = _in_thread(run, first_results)
    assert evaluator.inside.wait(timeout=30)
    second_results: list = []
    second = _in_thread(run, second_results)
    second.join(timeout=30)
    evaluator.release.set()
    first.join(timeout=30)

    assert second_results[0].status == Evaluation.Status.RUNNING
    assert first_results[0].status == Evaluation.Status.PASSED
    assert evaluator.calls == 1
    assert Evaluation.objects.count() == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="concurrent writers need a real server database"
)
def test_of_four_simultaneous_claims_exactly_one_wins(relu_task, store, fast):
    candidate = store(fast)
    start = threading.Barrier(4)

    def claim() -> Evaluation | None:
        start.wait(timeout=30)
        return services.evaluation_claim(
            candidate=candidate, task=relu_task, gpu="NVIDIA H200", gate_settings=SETTINGS,
            stale_after=STALE_AFTER,
        )

    results: list = []
    threads = [_in_thread(claim, results) for _ in range(4)]
    for thread in threads:
        thread.join(timeout=30)

    assert len(results) == 4
    assert not [r for r in results if isinstance(r, BaseException)]
    assert len([r for r in results if r is not None]) == 1
    assert Evaluation.objects.count() == 1


def test_the_recorded_evaluator_refuses_a_recording_filed_under_the_wrong_candidate(tmp_path):
    path = tmp_path / "recordings.json"
    path.write_text(
        '{"gpu": "NVIDIA H200", "recorded": [{"task": "relu", "candidate_hash": "abc",'
        ' "verdict": {"task": "relu", "candidate_hash": "def", "status": "passed"}}]}'
    )

    with pytest.raises(EvaluatorError, match="recorded\\[0\\]") as caught:
        RecordedEvaluator(path)
    assert caught.value.permanent
