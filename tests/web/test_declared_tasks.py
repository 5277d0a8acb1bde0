"""Declaring a task in the browser's API: checked by the harness, stored, written where the
harness looks, seen by its owner and team only, and usable by a new session whose kernel
then goes through the real gate (nvcc on this host; no GPU, so "incomplete")."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from profiling.evaluators import GateEvaluator
from profiling.harness.gate import gpu_name
from profiling.models import DeclaredTask, Evaluation, Task
from search.models import Run

pytestmark = pytest.mark.django_db

KERNEL = """
extern "C" __global__ void double_relu(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.0f) * 2.0f;
}
"""


def owned(people) -> str:
    """The name alice's double-relu is given: her own, named for her."""
    return f"user-double-relu.{people['alice'].pk}"


def double_relu(**changes) -> dict:
    return {
        "name": "double-relu",
        "description": "y = 2 max(x, 0)",
        "sizes": {"n": 2**20},
        "inputs": [{"name": "x", "dtype": "float32", "shape": ["n"]}],
        "outputs": [{"name": "y", "dtype": "float32", "shape": ["n"]}],
        "reference": {"y": "np.maximum(x, 0) * 2"},
        "tolerances": {"float32": {"atol": 0, "rtol": 0}},
        **changes,
    }


@pytest.fixture
def declare(api, people, task_dir):
    """declare(user, **changes) -> the API's response to declaring double-relu."""

    def post(user=None, **changes):
        client = api(user or people["alice"])
        return client.post("/api/tasks/declared/", double_relu(**changes), format="json")

    return post


def test_a_declared_task_is_stored_written_for_the_harness_and_offered_to_a_new_session(
    api, people, declare, task_dir
):
    response = declare(team=people["team"].pk)

    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["name"], body["owner"], body["team"]) == (owned(people), "alice", people["team"].pk)
    assert body["definition"]["l0_sizes"][0] == {"n": 1}  # small sizes generated
    assert body["starting_plan"]["launches"][0]["args"] == ["x", "y", "n"]
    row = DeclaredTask.objects.get(name=owned(people))
    assert json.loads((task_dir / f"{owned(people)}.json").read_text()) == row.definition
    task_row = Task.objects.get(name=owned(people))
    assert task_row.bytes == 8 * 2**20 and task_row.naive_candidate is None
    offered = {t["name"]: t for t in api(people["alice"]).get("/api/tasks/").json()}
    assert offered[owned(people)]["declared"] is True and offered["relu"]["declared"] is False
    assert offered[owned(people)]["naive_source"] == ""
    assert offered[owned(people)]["naive_plan"] == body["starting_plan"]
    listed = api(people["alice"]).get("/api/tasks/declared/").json()
    assert [t["name"] for t in listed] == [owned(people)]
    assert api(people["alice"]).get(f"/api/tasks/declared/{owned(people)}/").json()["description"] == (
        "y = 2 max(x, 0)")


@pytest.mark.parametrize(
    ("changes", "field", "words"),
    [
        ({"name": "Double Relu!"}, "name", "a slug"),
        ({"sizes": {"n": "many"}}, "sizes", "valid integer"),
        ({"inputs": [{"name": "x", "shape": ["m"]}]}, "inputs", "inputs[0].shape: unknown name 'm'"),
        ({"inputs": [{"name": "x", "dtype": "complex64", "shape": ["n"]}]}, "inputs", "not a valid choice"),
        ({"reference": {"y": "__import__('os').system('touch /tmp/owned')"}}, "reference", "is not allowed"),
        ({"reference": {"y": "x.__class__"}}, "reference", "attribute 'x.__class__' is not allowed"),
        ({"reference": {"y": "np.sqrt(x)"}}, "reference", "NaN or infinity"),
        ({"reference": {"y": "np.sum(x)"}}, "reference", "reference.y: at sizes {'n': 1048576} it gives"),
        ({"sizes": {"n": 2**30}}, "inputs", "at most 268435456 elements"),
        ({"tolerances": {"float32": {"atol": -1, "rtol": 0}}}, "tolerances", "greater than or equal to 0"),
        ({"l0_sizes": [{"m": 3}]}, "l0_sizes", "give exactly the sizes n"),
        ({"flops": "n * k"}, "flops", "unknown name 'k'"),
        ({"team": 999}, "team", "not a member of team 999"),
    ],
)
def test_a_bad_definition_is_refused_field_by_field_and_writes_nothing(
    declare, task_dir, changes, field, words
):
    response = declare(**changes)

    assert response.status_code == 400
    errors = response.json()
    assert list(errors) == [field], errors
    assert words in json.dumps(errors), errors
    assert not DeclaredTask.objects.exists() and list(task_dir.iterdir()) == []
    assert not os.path.exists("/tmp/owned")


def test_a_name_is_declared_once(declare):
    assert declare().status_code == 201

    again = declare(reference={"y": "x * 3"})

    assert again.status_code == 400 and "you have a task named" in again.json()["name"][0]
    assert DeclaredTask.objects.get().definition["reference"] == {"y": "np.maximum(x, 0) * 2"}


def test_a_declared_task_is_seen_and_run_by_its_owner_and_team_only(api, people, declare):
    declare(team=people["team"].pk)
    plan = api(people["alice"]).get(f"/api/tasks/declared/{owned(people)}/").json()["starting_plan"]
    request = {"task": owned(people), "source": KERNEL, "budget": 1, "plan": plan}

    stranger = api(people["carol"])
    assert owned(people) not in [t["name"] for t in stranger.get("/api/tasks/").json()]
    assert stranger.get("/api/tasks/declared/").json() == []
    assert stranger.get(f"/api/tasks/declared/{owned(people)}/").status_code == 404
    refused = stranger.post("/api/runs/", request, format="json")
    assert refused.status_code == 400 and "not declared by you or your teams" in refused.json()["task"][0]
    typo = stranger.post("/api/runs/", {**request, "task": "reluu"}, format="json").json()["task"][0]
    assert "known tasks: " in typo and "relu" in typo and "user-double-relu" not in typo
    assert api(people["bob"]).post("/api/runs/", request, format="json").status_code == 201  # in the team


def test_a_run_on_a_declared_task_needs_a_kernel(api, people, declare):
    declare()

    request = {"task": owned(people), "budget": 1}

    response = api(people["alice"]).post("/api/runs/", request, format="json")

    assert response.status_code == 400 and "no naive kernel" in response.json()["source"][0]
    assert Run.objects.count() == 0


@pytest.mark.skipif(shutil.which("nvcc") is None or gpu_name() is not None,
                    reason="for hosts with nvcc and no GPU")
def test_a_run_on_a_declared_task_compiles_its_kernel_through_the_gate(
    api, people, declare, task_dir, tmp_path
):
    from search import services

    plan = declare().json()["starting_plan"]
    request = {"task": owned(people), "source": KERNEL, "plan": plan, "budget": 1}
    response = api(people["alice"]).post("/api/runs/", request, format="json")
    assert response.status_code == 201, response.json()
    # A worker on another host has the database but not the file: it writes it itself.
    (task_dir / f"{owned(people)}.json").unlink()

    run = services.run_step(run_id=response.json()["id"], evaluator=GateEvaluator(workdir=tmp_path / "work"))

    evaluation = Evaluation.objects.get(task__name=owned(people))
    assert evaluation.status == Evaluation.Status.INCOMPLETE, evaluation.message
    assert "needs a GPU host" in evaluation.message
    assert evaluation.verdict["compile"]["ok"] is True
    assert [k["kernel"] for k in evaluation.verdict["compile"]["kernels"]] == ["double_relu"]
    assert (task_dir / f"{owned(people)}.json").exists()
    assert run.evaluated == 1


def test_a_kernel_that_does_not_match_the_declared_task_is_refused_by_the_plan_check_at_once(
    api, people, declare
):
    """The gate's plan check runs when the run is created (profiling/harness/preflight.py):
    a plan naming a size the declared task does not have is a 400, and no run is queued."""
    from search.models import Run

    declare()
    plan = {"launches": [{"kernel": "double_relu", "grid": ["cdiv(N, 256)"], "block": [256],
                          "args": ["x", "y", "n"]}]}
    request = {"task": owned(people), "source": KERNEL, "plan": plan, "budget": 1}
    response = api(people["alice"]).post("/api/runs/", request, format="json")

    assert response.status_code == 400 and "unknown name 'N'" in str(response.json()["plan"])
    assert not Run.objects.exists() and not Evaluation.objects.exists()


def test_the_profiling_app_puts_the_task_folder_on_the_task_path():
    from django.conf import settings

    assert str(settings.OPTIML_TASK_DIR) in os.environ["OPTIML_TASK_PATH"].split(os.pathsep)
    assert settings.OPTIML_TASK_DIR.is_dir()


def test_the_admin_lists_declared_tasks_read_only(admin_client, declare):
    declare()
    row = DeclaredTask.objects.get()

    assert admin_client.get("/admin/profiling/declaredtask/").status_code == 200
    page = admin_client.get(f"/admin/profiling/declaredtask/{row.pk}/change/").content.decode()
    assert "np.maximum(x, 0) * 2" in page
    assert admin_client.get("/admin/profiling/declaredtask/add/").status_code == 403
