"""A launch plan the gate would refuse on any GPU is refused when the run is created: a
400 naming the problem, and no run (an outside audit found grids of 2^31, 0 and -1,
`9**9**9`, blocks of 4096, 2^40 bytes of shared memory, unknown names and forbidden
compile options all accepted, then refused by a queued evaluation)."""

from __future__ import annotations

import copy

import pytest

from profiling.harness import tasks as task_registry
from search.models import Run

pytestmark = pytest.mark.django_db


def request_with(change) -> dict:
    relu = task_registry.get("relu")
    plan = copy.deepcopy(relu.naive_plan)
    change(plan)
    return {"task": "relu", "source": relu.naive_source, "plan": plan, "budget": 3, "judge": "rules",
            "seed": 0}


def launch(field, value):
    def change(plan):
        plan["launches"][0][field] = value
    return change


@pytest.mark.parametrize(("change", "said"), [
    (launch("grid", [2**31]), "exceeds the limits of every GPU"),
    (launch("grid", ["cdiv(n, BLOCK)", 65536]), "exceeds the limits of every GPU"),
    (launch("grid", [0]), "must be positive"),
    (launch("grid", [-1]), "must be positive"),
    (launch("grid", ["9**9**9"]), "launch plan"),
    (launch("block", [4096]), "exceeds the limits of every GPU"),
    (launch("block", [32, 32, 2]), "1024 threads"),
    (launch("shared_bytes", 2**40), "more than any GPU gives a block"),
    (launch("grid", ["cdiv(m, BLOCK)"]), "launch plan"),
    (lambda plan: plan.update(compile_options=["-Xlinker=/etc/passwd"]), "is not allowed"),
])
def test_a_plan_no_gpu_would_run_is_refused_before_a_run_exists(api, people, change, said):
    response = api(people["alice"]).post("/api/runs/", request_with(change), format="json")

    assert response.status_code == 400, response.json()
    assert said in str(response.json()["plan"]), response.json()
    assert not Run.objects.exists()


def test_a_plan_at_the_limits_is_accepted(api, people):
    def at_limits(plan):
        plan["launches"][0].update(block=[1024], shared_bytes=227 * 1024)
        plan["tunables"] = {"BLOCK": 1024}

    response = api(people["alice"]).post("/api/runs/", request_with(at_limits), format="json")

    assert response.status_code == 201, response.json()
