"""The New session form's pre-flight (issue 35, POST /api/runs/preflight/): the gate's CPU
stage on the kernel and plan, its findings by field and line, and never a run."""

from __future__ import annotations

import shutil
import threading
import time

import pytest

from profiling.harness import compile as compile_module
from profiling.harness import preflight
from profiling.harness import tasks as task_registry
from search import preflight_apis
from search.models import Run

pytestmark = pytest.mark.django_db
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")

URL = "/api/runs/preflight/"


@pytest.fixture(autouse=True)
def own_cubin_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("OPTIML_CACHE_DIR", str(tmp_path / "cubins"))


def relu_body(source_change=lambda s: s, **plan_changes) -> dict:
    task = task_registry.get("relu")
    launch = {**task.naive_plan["launches"][0], **plan_changes}
    return {"task": "relu", "source": source_change(task.naive_source),
            "plan": {**task.naive_plan, "launches": [launch]}}


@needs_nvcc
def test_a_kernel_that_compiles_is_ok_and_makes_no_run(api, people):
    answer = api(people["alice"]).post(URL, relu_body(), format="json")

    assert answer.status_code == 200, answer.json()
    assert answer.json() == {"ok": True, "findings": [], "not_compiled": ""}
    assert not Run.objects.exists()


@needs_nvcc
def test_a_compile_error_comes_back_at_its_line_and_makes_no_run(api, people):
    body = relu_body(lambda source: source.replace("fmaxf", "fmaxx"))
    line = next(n for n, text in enumerate(body["source"].splitlines(), 1) if "fmaxx" in text)

    answer = api(people["alice"]).post(URL, body, format="json").json()

    assert answer["ok"] is False
    assert [(f["field"], f["line"]) for f in answer["findings"]] == [("source", line)]
    assert "fmaxx" in answer["findings"][0]["message"]
    assert not Run.objects.exists()


def test_a_plan_no_gpu_can_launch_is_a_plan_finding(api, people):
    answer = api(people["alice"]).post(URL, relu_body(block=[4096, 1, 1]), format="json").json()

    assert answer["ok"] is False
    assert [(f["field"], f["line"]) for f in answer["findings"]] == [("plan", None)]
    assert "block [4096, 1, 1]" in answer["findings"][0]["message"]


def test_without_nvcc_it_says_it_could_not_compile_and_the_run_may_start(api, people, monkeypatch):
    which = shutil.which
    monkeypatch.setattr(compile_module.shutil, "which", lambda name: None if name == "nvcc" else which(name))

    answer = api(people["alice"]).post(URL, relu_body(), format="json").json()

    assert answer["ok"] is True and answer["findings"] == []
    assert "nvcc is not installed" in answer["not_compiled"]


def test_an_unknown_task_or_a_plan_that_is_not_one_is_a_400_by_field(api, people):
    client = api(people["alice"])

    unknown = client.post(URL, {**relu_body(), "task": "no-such-task"}, format="json")
    not_a_plan = client.post(URL, {**relu_body(), "plan": [1, 2]}, format="json")

    assert unknown.status_code == 400 and "task" in unknown.json()
    assert not_a_plan.status_code == 400 and "plan" in not_a_plan.json()


def test_a_visitor_is_asked_to_sign_in(api):
    assert api().post(URL, relu_body(), format="json").status_code == 401


def test_pre_flight_has_a_rate_of_its_own(api, people, settings):
    settings.OPTIML_THROTTLE_RATES = {**settings.OPTIML_THROTTLE_RATES, "run_preflight": "1/hour"}
    client = api(people["alice"])
    body = relu_body(block=[4096, 1, 1])  # refused before nvcc: nothing to wait for

    assert client.post(URL, body, format="json").status_code == 200
    assert client.post(URL, body, format="json").status_code == 429


def test_a_compile_that_takes_too_long_is_left_to_finish_and_the_answer_says_so(api, people, monkeypatch):
    released = threading.Event()

    def slow_compile(task, candidate, **options):
        released.wait(5)
        return preflight.Preflight()

    monkeypatch.setattr(preflight_apis, "PREFLIGHT_WAIT_S", 0.2)
    monkeypatch.setattr(preflight, "preflight", slow_compile)
    started = time.monotonic()
    try:
        answer = api(people["alice"]).post(URL, relu_body(), format="json").json()
    finally:
        released.set()

    assert time.monotonic() - started < 3
    assert answer["ok"] is True and "took longer than 0.2 s" in answer["not_compiled"]


def test_while_the_server_compiles_others_the_plan_is_still_checked(api, people, monkeypatch):
    monkeypatch.setattr(preflight_apis, "_slots", threading.BoundedSemaphore(1))
    preflight_apis._slots.acquire()  # another pre-flight holds the only slot
    client = api(people["alice"])

    busy = client.post(URL, relu_body(), format="json").json()
    bad_plan = client.post(URL, relu_body(block=[4096, 1, 1]), format="json").json()

    assert busy["ok"] is True and "already compiling" in busy["not_compiled"]
    assert [f["field"] for f in bad_plan["findings"]] == ["plan"]
