"""A starting kernel written by the LLM from the user's intent, against a real local
OpenAI-compatible server that answers from a script; and the CLI around it, which
starts from the naive kernel (and says so) whenever no kernel can be written."""

from __future__ import annotations

import pytest
from engine_fakes import write_recordings
from scripted_llm import (  # noqa: F401
    WRITTEN_RELU,
    ScriptedLLM,
    http_error,
    llm_server_fixture,
    malformed,
    reply,
    written_relu,
)

from profiling.harness import tasks
from profiling.harness.compile import compile_candidate
from profiling.harness.gate import check_plan
from search.engine.__main__ import build_parser, optimize
from search.engine.judges import LLMJudge, RuleJudge
from search.engine.types import JudgeError

ANSWER = written_relu(f"```cuda\n{WRITTEN_RELU}```")  # fenced, as models often do


def writer(server: ScriptedLLM) -> LLMJudge:
    return LLMJudge(base_url=server.base_url, model="scripted-7b", api_key="sk-test", timeout_s=0.5,
                    max_retries=2, backoff_s=0.001)


def test_the_llm_writes_a_starting_kernel_that_the_gate_can_compile(llm_server):
    llm_server.script(reply(ANSWER))

    proposal = writer(llm_server).write_kernel(tasks.get("relu"), "  clamp negatives to zero  ")

    assert proposal.source == "llm:scripted-7b" and proposal.title == "grid-stride relu"
    assert proposal.params == {"model": "scripted-7b", "intent": "clamp negatives to zero"}
    assert proposal.candidate.source.strip() == WRITTEN_RELU.strip()  # fences stripped
    check_plan(tasks.get("relu"), proposal.candidate, tasks.get("relu").sizes)
    assert compile_candidate(proposal.candidate).ok
    prompt = llm_server.prompts()[0]
    assert "clamp negatives to zero" in prompt
    assert "x: float32[n]" in prompt and "y: float32[n]" in prompt  # the task's contract
    assert "float32: |out - ref| <= " in prompt  # the tolerance it will be held to


def test_a_malformed_or_unusable_kernel_is_asked_for_again(llm_server):
    llm_server.script(malformed("here is your kernel!"),
                      reply({**ANSWER, "plan": {"launches": "not a list"}}),
                      reply(ANSWER))
    judge = writer(llm_server)

    proposal = judge.write_kernel(tasks.get("relu"), "relu")

    assert proposal.title == "grid-stride relu"
    assert judge.usage.calls == 3 and judge.usage.retries == 2
    assert [e["purpose"] for e in judge.transcript] == ["write"] * 3
    assert "not a candidate" in judge.transcript[1]["error"]


def test_a_refusing_endpoint_ends_in_a_judge_error(llm_server):
    llm_server.script(http_error(401, "bad key"))

    with pytest.raises(JudgeError, match="refused"):
        writer(llm_server).write_kernel(tasks.get("relu"), "relu")


def test_no_intent_is_not_sent(llm_server):
    with pytest.raises(JudgeError, match="no intent"):
        writer(llm_server).write_kernel(tasks.get("relu"), "   ")
    assert llm_server.requests == []


def run_cli(tmp_path, judge, *extra: str) -> list[str]:
    from search.engine.evaluators import ReplayEvaluator

    recordings = write_recordings(tmp_path / "relu.json")
    args = build_parser().parse_args(["optimize", "--task", "relu", "--budget", "2",
                                      "--replay", str(recordings), *extra])
    lines: list[str] = []
    evaluator = ReplayEvaluator(recordings)
    optimize(args, judge=judge, fallback_judge=RuleJudge(), sources=[], evaluator=evaluator,
             out=lines.append)
    return lines


def test_the_cli_starts_from_the_written_kernel_and_labels_its_writer(tmp_path, llm_server):
    llm_server.script(reply(ANSWER))

    lines = run_cli(tmp_path, writer(llm_server), "--intent", "clamp negatives to zero")

    text = "\n".join(lines)
    assert "starting kernel written by llm:scripted-7b from the intent: grid-stride relu" in text
    # the written kernel was never measured on the GPU: the replay says so, nothing is invented
    assert "node 0 llm:scripted-7b: grid-stride relu -> error" in text


def test_without_an_llm_an_intent_starts_from_the_naive_kernel_and_says_so(tmp_path):
    lines = run_cli(tmp_path, RuleJudge(), "--intent", "clamp negatives to zero")

    assert any("needs an LLM to write one" in line for line in lines)
    [root] = [line for line in lines if line.startswith("[  1/2] node 0 ")]
    assert "root: naive kernel (the task's) -> " in root and "error" not in root


def test_when_the_llm_cannot_write_the_search_starts_from_the_naive_kernel(tmp_path, llm_server):
    llm_server.script(http_error(401, "bad key"))

    lines = run_cli(tmp_path, writer(llm_server), "--intent", "relu")

    assert any("could not write a kernel from the intent" in line for line in lines)
    assert any("node 0 root: naive kernel" in line for line in lines)
