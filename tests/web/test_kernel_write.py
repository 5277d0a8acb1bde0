"""POST /api/kernels/write/: a first kernel written by the configured LLM from an intent,
against a real local OpenAI-compatible server that answers from a script; every way it
cannot be written is a message on the intent field."""

from __future__ import annotations

import pytest

from profiling.harness import tasks as task_registry
from tests.search.scripted_llm import WRITTEN_RELU, http_error, llm_server_fixture, reply, written_relu  # noqa: F401

pytestmark = pytest.mark.django_db

@pytest.fixture
def llm_env(monkeypatch, llm_server):
    monkeypatch.setenv("OPTIML_LLM_BASE_URL", llm_server.base_url)
    monkeypatch.setenv("OPTIML_LLM_MODEL", "scripted-7b")
    monkeypatch.setenv("OPTIML_LLM_API_KEY", "sk-test")
    monkeypatch.setenv("OPTIML_LLM_TIMEOUT_S", "2")
    monkeypatch.setenv("OPTIML_LLM_MAX_RETRIES", "0")
    return llm_server


def test_the_llm_writes_a_kernel_for_the_editor_and_names_itself(api, people, llm_env):
    llm_env.script(reply(written_relu()))

    response = api(people["alice"]).post("/api/kernels/write/", {"task": "relu", "intent": "clamp at 0"},
                                         format="json")

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["writer"] == "llm:scripted-7b" and body["title"] == "grid-stride relu"
    assert body["source"].strip() == WRITTEN_RELU.strip()
    assert body["plan"]["launches"][0]["kernel"] == "relu_grid"
    assert "clamp at 0" in llm_env.prompts()[0]


def test_without_an_llm_endpoint_the_intent_field_says_so(api, people, monkeypatch):
    monkeypatch.delenv("OPTIML_LLM_BASE_URL", raising=False)

    response = api(people["alice"]).post("/api/kernels/write/", {"task": "relu", "intent": "clamp at 0"},
                                         format="json")

    assert response.status_code == 400
    assert "no LLM endpoint is configured" in response.json()["intent"][0]


def test_an_llm_that_refuses_is_a_message_on_the_intent(api, people, llm_env):
    llm_env.script(http_error(401, "bad key"))

    response = api(people["alice"]).post("/api/kernels/write/", {"task": "relu", "intent": "clamp at 0"},
                                         format="json")

    assert response.status_code == 400
    assert "could not write a kernel" in response.json()["intent"][0]


@pytest.mark.parametrize(("body", "field"), [({"task": "relu", "intent": "  "}, "intent"),
                                             ({"task": "no-such-task", "intent": "x"}, "task"),
                                             ({"intent": "x"}, "task")])
def test_bad_requests_name_their_field_and_call_no_llm(api, people, llm_env, body, field):
    response = api(people["alice"]).post("/api/kernels/write/", body, format="json")

    assert response.status_code == 400 and field in response.json()
    assert llm_env.requests == []


def test_signed_out_visitors_cannot_spend_the_llm(api, llm_env):
    response = api().post("/api/kernels/write/", {"task": "relu", "intent": "x"}, format="json")
    assert response.status_code == 401 and llm_env.requests == []


def test_manage_optimize_starts_from_the_kernel_written_from_the_intent(settings, llm_env, tmp_path):
    """The run's root is the written kernel, named by its writer; its (never recorded)
    measurement is an honest failure to measure, not a number."""
    from io import StringIO

    from django.core.management import call_command

    from search import services
    from search.models import Run
    from tests.web.conftest import RUN_RECORDING

    settings.OPTIML_EVALUATOR = f"recorded:{RUN_RECORDING}"
    llm_env.script(reply(written_relu()))
    out = StringIO()

    call_command("optimize", "--task", "relu", "--budget", "1", "--intent", "clamp at 0", stdout=out)

    assert "starting kernel written by llm:scripted-7b from the intent: grid-stride relu" in out.getvalue()
    run = Run.objects.get()
    assert run.intent == "clamp at 0" and "relu_grid" in run.root_candidate.source
    root = services._search_for(run).tree.root
    assert root.proposal.source == "llm:scripted-7b" and root.proposal.params["intent"] == "clamp at 0"


def test_manage_optimize_says_when_no_llm_can_write_and_starts_from_the_naive_kernel(settings, monkeypatch):
    from io import StringIO

    from django.core.management import call_command

    from search.models import Run
    from tests.web.conftest import RUN_RECORDING

    settings.OPTIML_EVALUATOR = f"recorded:{RUN_RECORDING}"
    monkeypatch.delenv("OPTIML_LLM_BASE_URL", raising=False)
    out = StringIO()

    call_command("optimize", "--task", "relu", "--budget", "1", "--intent", "clamp at 0", stdout=out)

    assert "no LLM endpoint is configured" in out.getvalue() and "naive kernel" in out.getvalue()
    assert Run.objects.get().root_candidate.source == task_registry.get("relu").naive_source
