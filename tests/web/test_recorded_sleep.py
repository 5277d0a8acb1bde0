"""OPTIML_EVALUATOR=recorded:<file>?sleep=<seconds>: recorded verdicts that take time, as the
gate's do, so that a worker can be killed in the middle of one (test_crash_safety.py)."""

from __future__ import annotations

import time

import pytest
from django.core.exceptions import ImproperlyConfigured

from profiling.evaluators import EvaluatorError, RecordedEvaluator, get_evaluator
from profiling.harness.candidate import Candidate as HarnessCandidate
from tests.web.conftest import RECORDINGS


def test_a_sleep_after_the_path_makes_each_verdict_take_that_long(settings, fast):
    settings.OPTIML_EVALUATOR = f"recorded:{RECORDINGS}?sleep=0.2"
    evaluator = get_evaluator()

    started = time.monotonic()
    verdict, source = evaluator.evaluate("relu", fast.harness(), None)

    assert time.monotonic() - started >= 0.2
    assert (verdict.candidate_hash, verdict.status, source) == (fast.content_hash, fast.status, "recorded")


def test_a_kernel_without_a_recording_is_refused_after_the_same_wait(fast):
    evaluator = RecordedEvaluator(RECORDINGS, sleep_s=0.1)
    # It compiles (the recorded evaluator compiles what it has no recording of) and is not recorded.
    unrecorded = HarnessCandidate.from_source_and_plan(fast.source + "// not recorded\n", fast.plan)

    started = time.monotonic()
    with pytest.raises(EvaluatorError, match="no recorded verdict"):
        evaluator.evaluate("relu", unrecorded, None)
    assert time.monotonic() - started >= 0.1


def test_without_a_sleep_the_path_is_the_whole_setting(settings):
    settings.OPTIML_EVALUATOR = f"recorded:{RECORDINGS}"

    evaluator = get_evaluator()

    assert (evaluator.path, evaluator.sleep_s) == (RECORDINGS, 0.0)


@pytest.mark.parametrize("query", ["sleep=-1", "sleep=soon", "sleep=inf", "sleep=nan", "delay=1"])
def test_anything_but_a_finite_sleep_after_the_path_is_refused(settings, query):
    settings.OPTIML_EVALUATOR = f"recorded:{RECORDINGS}?{query}"

    with pytest.raises(ImproperlyConfigured, match=r"\?sleep=<seconds>"):
        get_evaluator()
