"""Sizes are limited at the API, with the gate's own limit for kernels, before anything is
stored: a kernel the gate would refuse never reaches the database (a 30 MB one used to be
stored first, then refused)."""

from __future__ import annotations

import json

import pytest
from django.conf import settings as django_settings

from optiml_web.limits import MAX_DECLARED_TASK_BYTES, MAX_PLAN_BYTES
from profiling.harness import tasks as task_registry
from profiling.harness.policy import MAX_SOURCE_BYTES, PolicyViolation, check_source
from profiling.models import Candidate, DeclaredTask
from search.models import Run

pytestmark = pytest.mark.django_db


def relu_request(source: str | None = None, **changes) -> dict:
    relu = task_registry.get("relu")
    return {"task": "relu", "source": source or relu.naive_source, "plan": relu.naive_plan,
            "budget": 2, **changes}


def padded(size: int) -> str:
    """The naive relu kernel, padded with a comment to exactly `size` bytes of UTF-8."""
    kernel = task_registry.get("relu").naive_source
    return kernel + "//" + "x" * (size - len(kernel.encode()) - 3) + "\n"


def stored() -> tuple[int, int]:
    return Candidate.objects.count(), Run.objects.count()


def test_a_30_mb_kernel_is_refused_with_a_413_and_nothing_is_stored(api, people):
    before = stored()

    response = api(people["alice"]).post("/api/runs/", relu_request(padded(30 * 1024 * 1024)), format="json")

    assert response.status_code == 413
    assert "larger than this endpoint takes" in response.json()["detail"]
    assert stored() == before


def test_a_kernel_over_the_gates_limit_is_a_400_on_source_and_nothing_is_stored(api, people):
    before = stored()
    source = padded(MAX_SOURCE_BYTES + 1)
    with pytest.raises(PolicyViolation):  # the gate would refuse it: the API says so first
        check_source(source)

    response = api(people["alice"]).post("/api/runs/", relu_request(source), format="json")

    assert response.status_code == 400
    assert response.json() == {"source": [
        f"the kernel source is {MAX_SOURCE_BYTES + 1} bytes; the gate takes at most {MAX_SOURCE_BYTES} "
        "bytes (a kernel file, not a code base)"]}
    assert stored() == before


def test_a_kernel_at_the_gates_limit_is_taken(api, people):
    """The same limit, not a stricter one: and it fits the request body limit with room."""
    source = padded(MAX_SOURCE_BYTES)
    check_source(source)

    response = api(people["alice"]).post("/api/runs/", relu_request(source), format="json")

    assert response.status_code == 201, response.json()
    assert Candidate.objects.filter(source=source).exists()
    assert 4 * MAX_SOURCE_BYTES <= django_settings.DATA_UPLOAD_MAX_MEMORY_SIZE < 2 * 4 * MAX_SOURCE_BYTES


def test_a_multibyte_kernel_is_counted_in_bytes_not_characters(api, people):
    source = padded(100) + "// " + "é" * (MAX_SOURCE_BYTES // 2) + "\n"  # fewer characters than bytes

    response = api(people["alice"]).post("/api/runs/", relu_request(source), format="json")

    assert response.status_code == 400 and list(response.json()) == ["source"]


def test_a_launch_plan_over_its_limit_is_a_400_on_plan(api, people):
    plan = {**task_registry.get("relu").naive_plan, "tunables": {f"T{i}": i for i in range(8000)}}
    assert len(json.dumps(plan)) > MAX_PLAN_BYTES
    before = stored()

    response = api(people["alice"]).post("/api/runs/", relu_request(plan=plan), format="json")

    assert response.status_code == 400
    assert response.json()["plan"][0].startswith("the launch plan is ")
    assert f"at most {MAX_PLAN_BYTES} are taken" in response.json()["plan"][0]
    assert stored() == before


def test_an_intent_over_its_limit_is_a_400_on_intent(api, people):
    response = api(people["alice"]).post("/api/kernels/write/", {"task": "relu", "intent": "x" * 4001},
                                         format="json")

    assert response.status_code == 400 and list(response.json()) == ["intent"]


def test_a_declared_task_over_its_limit_is_refused_before_the_harness_runs_it(api, people, task_dir):
    definition = {"name": "big", "sizes": {"n": 1024}, "description": "",
                  "inputs": [{"name": "x", "shape": ["n"]}], "outputs": [{"name": "y", "shape": ["n"]}],
                  "reference": {"y": "x" + " + 0" * (MAX_DECLARED_TASK_BYTES // 4)}}

    response = api(people["alice"]).post("/api/tasks/declared/", definition, format="json")

    assert response.status_code == 400
    assert "at most 65536 are taken" in response.json()["non_field_errors"][0]
    assert DeclaredTask.objects.count() == 0 and not list(task_dir.iterdir())


@pytest.mark.parametrize(("body", "words"), [
    ("[" * 5000, "nested more than 64 levels"),
    ('{"task": "relu", "plan": {"a": "\\u0000"}}', "NUL character"),
    ('{"task": "relu", "intent": "\\ud800"}', "lone surrogate"),
    ('{"task": "relu", "budget": 1e400}', "too large to store"),
    ("{not json", "JSON parse error"),
])
def test_json_the_database_could_not_store_is_a_400_saying_why(api, people, body, words):
    response = api(people["alice"]).post("/api/runs/", body, content_type="application/json")

    assert response.status_code == 400
    assert words in response.json()["detail"]
    assert stored() == (0, 0)


def test_a_form_post_is_a_415_the_api_takes_json_only(api, people):
    response = api(people["alice"]).post("/api/runs/", {"task": "relu"}, format="multipart")

    assert response.status_code == 415
