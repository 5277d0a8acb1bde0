"""OptiML-G in the web app: experts configured in settings write a first kernel in the
job POST /api/kernels/write/ queues (run here as a CPU worker runs it), against real
local OpenAI-compatible servers that answer from scripts; nvcc (real, on this machine)
checks each kernel and its errors feed the repair;
every attempt is stored (who wrote it, where it stopped) and trains the router."""

from __future__ import annotations

import json
import shutil

import pytest
from django.core.management import call_command

from search.models import GenerationAttempt
from tests.search.scripted_llm import WRITTEN_RELU, WRITTEN_RELU_PLAN, ScriptedLLM, http_error, reply

pytestmark = [pytest.mark.django_db,
              pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")]
BROKEN = WRITTEN_RELU.replace("fmaxf(x[i], 0.0f);", "fmaxf(x[i], 0.0f)")


def kernel(source: str, title: str = "relu") -> dict:
    return {"title": title, "approach": "one pass", "source": source, "plan": WRITTEN_RELU_PLAN}


@pytest.fixture(name="experts")
def experts_fixture(settings, tmp_path):
    servers = {name: ScriptedLLM().start() for name in ("qwen", "hpc")}
    settings.OPTIML_GENERATION_EXPERTS = json.dumps([
        {"name": name, "kind": "api", "base_url": server.base_url, "model": f"{name}-model", "timeout_s": 2,
         "max_retries": 0} for name, server in servers.items()])
    settings.OPTIML_GENERATION_ROUTER = tmp_path / "router.safetensors"
    settings.OPTIML_GENERATION_MOT = tmp_path / "mot.safetensors"
    settings.OPTIML_GENERATION_K = 2
    yield servers
    for server in servers.values():
        server.stop()


@pytest.fixture(name="write")
def write_fixture(write_job):
    """write(user) -> the writing job once it ended."""

    def write(user, intent="clamp negatives to zero") -> dict:
        response, job = write_job(user, {"task": "relu", "intent": intent})
        assert response.status_code == 202, response.content
        return job

    return write


def test_the_experts_draft_compose_and_repair_and_every_attempt_is_kept(people, experts, write):
    experts["hpc"].script(reply(kernel(WRITTEN_RELU, "hpc's draft")))
    experts["qwen"].script(reply(kernel(BROKEN, "composed")), reply(kernel(WRITTEN_RELU, "repaired")))

    job = write(people["alice"])

    assert job["status"] == "done", job
    assert [(a["round"], a["writer"], a["experts"], a["stage"]) for a in job["attempts"]] == [
        (0, "qwen", ["qwen", "hpc"], "compile"), (1, "qwen", ["qwen"], "compiled")]
    body = job["written"]
    assert body["writer"] == "qwen" and body["title"] == "repaired" and body["experts"] == ["qwen"]
    assert [(a["round"], a["writer"], a["stage"]) for a in body["attempts"]] == [
        (0, "qwen", "compile"), (1, "qwen", "compiled")]
    assert "expected a \";\"" in experts["qwen"].prompts()[1]  # nvcc's words in the repair request
    rows = list(GenerationAttempt.objects.order_by("round"))
    assert [r.stage for r in rows] == ["compile", "compiled"] and rows[0].created_by == people["alice"]
    assert rows[0].experts == ["qwen", "hpc"] and len({r.generation for r in rows}) == 1
    assert {d["expert"] for d in rows[0].record["drafts"]} == {"qwen", "hpc"}


def test_with_one_expert_down_the_other_writes_and_the_drafts_say_who_failed(people, experts, write):
    experts["hpc"].script(http_error(503))
    experts["qwen"].script(reply(kernel(WRITTEN_RELU, "qwen alone")))

    job = write(people["alice"])

    assert job["status"] == "done" and job["written"]["title"] == "qwen alone"
    assert job["written"]["experts"] == ["qwen"] and job["attempts"][0]["experts"] == ["qwen"]
    drafts = {d["expert"]: d for d in GenerationAttempt.objects.get().record["drafts"]}
    assert "HTTP 503" in drafts["hpc"]["error"] and "error" not in drafts["qwen"]


def test_when_no_expert_writes_anything_usable_the_job_says_why(people, experts, write):
    experts["hpc"].script(http_error(503))
    experts["qwen"].script(http_error(503))

    job = write(people["alice"])

    assert job["status"] == "failed" and job["written"] is None
    message = job["message"]
    assert "could not write a kernel" in message and "HTTP 503" in message
    assert GenerationAttempt.objects.get().stage == "endpoint"


def test_a_misconfigured_expert_list_is_a_message_not_a_500(api, people, settings):
    for value, words in [("[{\"name\": \"x\"}]", "'kind'"), ("not json", "not JSON"),
                         ("@/nonexistent/experts.json", "No such file")]:
        settings.OPTIML_GENERATION_EXPERTS = value
        response = api(people["alice"]).post("/api/kernels/write/", {"task": "relu", "intent": "x"},
                                             format="json")
        assert response.status_code == 400, response.content
        assert "misconfigured" in response.json()["intent"][0] and words in response.json()["intent"][0]


def test_the_router_trains_on_the_stored_outcomes_and_then_routes(people, experts, settings, write):
    with pytest.raises(Exception, match="needs 8"):
        call_command("generation", "train-router")
    for _ in range(5):  # hpc writes kernels that compile; qwen's never do
        experts["hpc"].script(reply(kernel(WRITTEN_RELU)))
        experts["qwen"].script(reply(kernel(BROKEN)), reply(kernel(BROKEN)), reply(kernel(BROKEN)),
                               reply(kernel(BROKEN)))
        assert write(people["alice"])["status"] == "failed"
        settings.OPTIML_GENERATION_K = 1
        experts["hpc"].script(reply(kernel(WRITTEN_RELU)))
        settings.OPTIML_GENERATION_EXPERTS = json.dumps(list(reversed(json.loads(
            settings.OPTIML_GENERATION_EXPERTS))))  # hpc first: it writes alone
        assert write(people["alice"])["status"] == "done"
        settings.OPTIML_GENERATION_EXPERTS = json.dumps(list(reversed(json.loads(
            settings.OPTIML_GENERATION_EXPERTS))))
        settings.OPTIML_GENERATION_K = 2
    call_command("generation", "train-router")
    assert settings.OPTIML_GENERATION_ROUTER.exists()

    settings.OPTIML_GENERATION_K = 1
    experts["hpc"].script(reply(kernel(WRITTEN_RELU, "routed to hpc")))
    body = write(people["alice"])["written"]
    assert body["writer"] == "hpc" and body["title"] == "routed to hpc"
    routing = GenerationAttempt.objects.latest("created").record["routing"]
    assert routing["primary"] == "hpc" and "trained on" in routing["by"]


def test_evaluate_reports_pass_at_k_over_the_suites_intents_and_stores_the_attempts(experts, tmp_path):
    from io import StringIO

    # relu and softmax, two samples each, qwen alone (k=1): relu compiles at once, softmax never
    for _ in range(2):
        experts["qwen"].script(reply(kernel(WRITTEN_RELU)))
    experts["qwen"].script(*[reply(kernel(BROKEN))] * 4, *[reply(kernel(BROKEN))] * 4)
    out, report_path = StringIO(), tmp_path / "report.json"

    call_command("generation", "evaluate", "--experts", "qwen", "--tasks", "relu,softmax", "--samples", "2",
                 "--k", "2", "--json", str(report_path), stdout=out)

    report = json.loads(report_path.read_text())
    rows = {r["task"]: r for r in report["tasks"]}
    assert rows["relu"]["pass@1"] == 1.0 and rows["softmax"]["pass@2"] == 0.0
    assert report["pass@1"] == 0.5 and report["checked"] == "up to nvcc" and "no GPU here" in out.getvalue()
    assert "reference" not in experts["qwen"].prompts()[0].lower()
    assert GenerationAttempt.objects.filter(task="softmax").count() == 8  # 2 samples x (1 + 3 repairs)


def test_the_dataset_holds_the_suite_the_lineage_states_and_passed_nodes(tmp_path, relu_run):
    from io import StringIO

    from search.generation.dataset import load

    run = relu_run(1)  # its root passed the full gate on the H200 (the recording)
    out = StringIO()
    call_command("generation", "dataset", "--out", str(tmp_path / "pairs.json"), stdout=out)
    pairs = load(tmp_path / "pairs.json")
    origins = {p.origin.split(":")[0] for p in pairs}
    assert origins == {"naive", "lineage", "run"} and "(lineage, naive, run)" in out.getvalue()
    assert f"run:{run.pk}#0" in {p.origin for p in pairs}
    relu = next(p for p in pairs if p.origin == "naive:relu")
    assert "```cuda" in relu.target and "Task: relu" in relu.prompt
    assert task_reference_code_absent(relu.prompt)


def task_reference_code_absent(prompt: str) -> bool:
    from profiling.harness import tasks

    return tasks.get("relu").naive_source.strip() not in prompt


def test_train_mot_without_local_experts_says_what_it_needs(experts, tmp_path):
    with pytest.raises(Exception, match="no local experts are configured"):
        call_command("generation", "train-mot", "--pairs", str(tmp_path / "none.json"))


def test_a_corrupt_router_file_falls_back_to_the_configured_order_and_says_so(
    people, experts, settings, write
):
    settings.OPTIML_GENERATION_ROUTER.write_bytes(b"not a safetensors file")
    experts["hpc"].script(reply(kernel(WRITTEN_RELU)))
    experts["qwen"].script(reply(kernel(WRITTEN_RELU)))

    assert write(people["alice"])["status"] == "done"
    routing = GenerationAttempt.objects.get().record["routing"]
    assert routing["primary"] == "qwen" and "is unusable" in routing["by"]

