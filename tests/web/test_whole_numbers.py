"""Whole numbers in JSON bodies follow the query parameters' rule (optiml_web/params.py):
a JSON number, or a string of ASCII digits. DRF's IntegerField takes whatever int()
takes, and an outside audit found '١٢', '1_000' and ' 5 ' accepted in bodies that
queries refuse."""

from __future__ import annotations

import pytest

from profiling.harness import tasks as task_registry
from search.models import Run

pytestmark = pytest.mark.django_db


def run_request(**overrides) -> dict:
    relu = task_registry.get("relu")
    return {"task": "relu", "source": relu.naive_source, "plan": relu.naive_plan, "budget": 3,
            "judge": "rules", "seed": 0, **overrides}


@pytest.mark.parametrize("field", ["budget", "seed", "parallel"])
@pytest.mark.parametrize("value", ["١٢", "1_000", " 5 ", "5 ", "+5", "0x10", "", "²", "9" * 30, "007"])
def test_a_whole_number_written_otherwise_than_in_ascii_digits_is_refused(api, people, field, value):
    response = api(people["alice"]).post("/api/runs/", run_request(**{field: value}), format="json")

    assert response.status_code == 400 and field in response.json(), response.json()
    assert not Run.objects.exists()


@pytest.mark.parametrize("value", [2, "2"])
def test_a_json_number_or_ascii_digits_are_taken(api, people, value):
    response = api(people["alice"]).post("/api/runs/", run_request(budget=value), format="json")

    assert response.status_code == 201, response.json()
    assert Run.objects.get().budget == 2


@pytest.mark.parametrize(("sizes", "status"),
                         [({"n": "1_000"}, 400), ({"n": " 64"}, 400), ({"n": "64"}, 201)])
def test_a_declared_tasks_sizes_follow_the_same_rule(api, people, task_dir, sizes, status):
    definition = {"name": "whole-numbers", "description": "y = x", "sizes": sizes,
                  "inputs": [{"name": "x", "dtype": "float32", "shape": ["n"]}],
                  "outputs": [{"name": "y", "dtype": "float32", "shape": ["n"]}],
                  "reference": {"y": "x"}, "tolerances": {"float32": {"atol": 0, "rtol": 0}}}
    response = api(people["alice"]).post("/api/tasks/declared/", definition, format="json")

    assert response.status_code == status, response.json()
    if status == 400:
        assert "sizes" in response.json(), response.json()


@pytest.mark.parametrize("grid", ["1_000", "cdiv(n, 2_56)", " 4", "\u0664"])
def test_a_launch_plan_follows_the_same_rule(api, people, grid):
    relu = task_registry.get("relu")
    launch = {**relu.naive_plan["launches"][0], "grid": [grid]}
    plan = {**relu.naive_plan, "launches": [launch]}

    response = api(people["alice"]).post("/api/runs/", run_request(plan=plan), format="json")

    assert response.status_code == 400 and "plan" in response.json(), response.json()
    assert "ASCII" in str(response.json()) or "spaces" in str(response.json()), response.json()
    assert not Run.objects.exists()
