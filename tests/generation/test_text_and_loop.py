"""Experts collaborating in text, against real local OpenAI-compatible servers that
answer from scripts (one per expert), and the generate -> gate -> repair loop fed by
the real compiler (nvcc runs here) and, for L0, the CPU emulator standing in for the
GPU this machine does not have."""

from __future__ import annotations

import json
import shutil

import pytest

from profiling.harness import tasks
from profiling.harness.gate import gpu_name
from search.generation.experts import ApiExpert, ExpertConfigError, ExpertSpec, parse_experts
from search.generation.loop import Check, GateChecker, generate
from search.generation.router import Router
from search.generation.text import TextCollaboration
from tests.search.cuda_on_cpu import CpuKernels, inputs_for, mismatch
from tests.search.scripted_llm import (
    WRITTEN_RELU,
    WRITTEN_RELU_PLAN,
    ScriptedLLM,
    http_error,
    malformed,
    reply,
)

pytest.importorskip("torch")  # the router

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
RELU = tasks.get("relu")
BROKEN = WRITTEN_RELU.replace("fmaxf(x[i], 0.0f);", "fmaxf(x[i], 0.0f)")  # a missing semicolon
WRONG = WRITTEN_RELU.replace("fmaxf(x[i], 0.0f)", "x[i]")  # compiles, and is not relu


def kernel(source: str, title: str = "grid-stride relu", approach: str = "one coalesced pass") -> dict:
    return {"title": title, "approach": approach, "source": source, "plan": WRITTEN_RELU_PLAN}


@pytest.fixture(name="servers")
def servers_fixture():
    started = {name: ScriptedLLM().start() for name in ("qwen", "hpc", "star")}
    yield started
    for server in started.values():
        server.stop()


def team(servers, order=("qwen", "hpc", "star"), k=3, timeout_s=2.0) -> TextCollaboration:
    experts = {name: ApiExpert(ExpertSpec(name=name, kind="api", base_url=servers[name].base_url,
                                          model=f"{name}-model", api_key="k", timeout_s=timeout_s,
                                          max_retries=1)) for name in order}
    return TextCollaboration(experts, Router(list(order)), k=k)


class CompileThenEmulate:
    """The real gate up to nvcc and the plan; L0 on the CPU emulator (no GPU here)."""

    def __init__(self, workdir):
        self.gate, self.workdir, self.calls = GateChecker(), workdir, 0

    def check(self, task, candidate):
        self.calls += 1
        first = self.gate.check(task, candidate)
        if first.stage != "compiled":
            return first
        kernels = CpuKernels(candidate, self.workdir / candidate.content_hash()[:12])
        for sizes in task.l0_sizes:
            inputs = inputs_for(task, sizes)
            why = mismatch(task, sizes, inputs, kernels.run(task, sizes, inputs))
            if why:
                return Check(False, "L0", f"at sizes {sizes}: {why}", "wrong_values")
        return Check(True, "passed", "passed L0 (emulated on the CPU)")


def test_the_experts_configuration_is_checked_entry_by_entry():
    specs = parse_experts([{"name": "qwen", "kind": "api", "base_url": "http://h:8000/v1", "model": "q",
                            "api_key_env": "QWEN_KEY"}, {"name": "hpc", "kind": "local", "path": "/m/hpc"}],
                          environ={"QWEN_KEY": "secret"})
    assert [s.name for s in specs] == ["qwen", "hpc"] and specs[0].api_key == "secret"
    assert "secret" not in json.dumps(specs[0].public()) and "secret" not in repr(specs[0])
    for entries, message in [
        ({"name": "x"}, "JSON list"), ([{"name": "x", "kind": "gpu"}], "'kind'"),
        ([{"name": "x", "kind": "api", "model": "m"}], "'base_url'"),
        ([{"name": "x", "kind": "local"}], "'path'"),
        ([{"name": "x", "kind": "api", "base_url": "u", "model": "m", "api_key_env": "NOPE"}], "NOPE"),
        ([{"name": "a b", "kind": "local", "path": "p"}], "'name'"),
        ([{"name": "x", "kind": "local", "path": "p", "temperature": 2}], "unknown fields temperature"),
        ([{"name": "x", "kind": "local", "path": "p"}] * 2, "twice"),
        ([{"name": "x", "kind": "local", "path": "p", "timeout_s": -1}], "timeout_s"),
    ]:
        with pytest.raises(ExpertConfigError, match=message):
            parse_experts(entries, environ={})


@needs_nvcc
def test_peers_draft_the_primary_composes_and_the_kernel_passes(servers, tmp_path):
    servers["hpc"].script(reply(kernel(WRONG, "copy", "a grid-stride loop")))
    servers["star"].script(reply(kernel(WRITTEN_RELU, "relu", "fmaxf per element")))
    servers["qwen"].script(reply(kernel(WRITTEN_RELU, "composed relu", "the loop of hpc, the max of star")))
    checker = CompileThenEmulate(tmp_path)

    generation = generate(RELU, "clamp negatives to zero", team(servers), checker, rounds=2)

    [attempt] = generation.attempts
    assert attempt.passed and attempt.writer == "qwen" and attempt.experts == ["qwen", "hpc", "star"]
    assert generation.written.title == "composed relu" and generation.seconds_to_pass is not None
    composed = servers["qwen"].prompts()[0]  # the primary read both drafts as thoughts
    assert "Draft by hpc: copy" in composed and "Draft by star: relu" in composed
    assert "clamp negatives to zero" in composed and "fmaxf per element" in composed
    assert "reference" not in servers["hpc"].prompts()[0].lower()  # the contract, never its code
    drafts = {d["expert"]: d for d in attempt.record["drafts"]}
    assert drafts["hpc"]["title"] == "copy" and drafts["qwen"]["approach"].startswith("the loop")
    routing = attempt.record["routing"]
    assert routing["primary"] == "qwen" and "configured order" in routing["by"]


@needs_nvcc
def test_the_repair_loop_is_fed_nvccs_errors_and_the_checkers_mismatch(servers, tmp_path):
    servers["qwen"].script(reply(kernel(BROKEN)), reply(kernel(WRONG)), reply(kernel(WRITTEN_RELU)))

    generation = generate(RELU, "relu", team(servers, k=1), CompileThenEmulate(tmp_path), rounds=3)

    stages = [a.stage for a in generation.attempts]
    assert stages == ["compile", "L0", "passed"], [a.message for a in generation.attempts]
    first_repair, second_repair = servers["qwen"].prompts()[1:]
    assert "nvcc rejected it" in first_repair and "expected a \";\"" in first_repair  # nvcc's own words
    assert "fmaxf(x[i], 0.0f)\n" in first_repair  # the kernel it is asked to fix
    assert "correctness check at small sizes failed" in second_repair and "y:" in second_repair
    assert [a.round for a in generation.attempts] == [0, 1, 2] and generation.passed
    assert not generation.passed_first_try


def test_an_expert_that_is_down_or_talks_nonsense_does_not_stop_the_others(servers, tmp_path):
    servers["hpc"].script(http_error(503), http_error(503))  # down: both tries fail
    servers["star"].script(malformed(), malformed("{\"source\": 3}"))  # never a candidate
    servers["qwen"].script(reply(kernel(WRITTEN_RELU)))

    step = team(servers).first(RELU, "relu")

    assert step.written is not None and step.experts == ("qwen",)
    errors = {d.expert: d.error for d in step.drafts}
    assert "HTTP 503" in errors["hpc"] and "'source' must be" in errors["star"] and errors["qwen"] == ""
    assert "Draft by" not in servers["qwen"].prompts()[0]  # no usable drafts: the plain request


def test_a_failing_primary_lets_the_first_usable_draft_stand_in_and_says_so(servers):
    servers["hpc"].script(reply(kernel(WRITTEN_RELU, "hpc's relu")))
    servers["star"].script(http_error(500), http_error(500))
    servers["qwen"].script(http_error(401, "bad key"))  # not worth retrying

    step = team(servers).first(RELU, "relu")

    assert step.written.title == "hpc's relu" and step.experts == ("hpc",)
    assert "the primary qwen failed" in step.note and "HTTP 401" in step.note


def test_a_timeout_everywhere_ends_the_generation_with_the_reason(servers, tmp_path):
    from tests.search.scripted_llm import slow

    for server in servers.values():
        server.script(slow(1.0), slow(1.0))

    generation = generate(RELU, "relu", team(servers, timeout_s=0.2), CompileThenEmulate(tmp_path), rounds=3)

    [attempt] = generation.attempts
    assert attempt.stage == "endpoint" and "no reply within 0.2 s" in attempt.message
    assert generation.written is None and not generation.passed


@needs_nvcc
@pytest.mark.skipif(gpu_name() is not None, reason="this host has a GPU: L0 runs")
def test_on_a_host_without_a_gpu_the_loop_stops_at_the_compiled_kernel(servers):
    servers["qwen"].script(reply(kernel(WRITTEN_RELU)))

    generation = generate(RELU, "relu", team(servers, k=1), GateChecker(), rounds=3)

    [attempt] = generation.attempts
    assert attempt.stage == "compiled" and "needs a GPU host" in attempt.message
    assert generation.written is not None and not generation.passed and servers["qwen"].remaining == 0


def test_a_gate_that_cannot_judge_here_ends_the_loop_without_repairs(servers):
    """No compiler on this host is not the kernel's fault: nothing is sent back to repair."""
    class NoCompiler:
        def check(self, task, candidate):
            return Check(False, "compile", "nvcc is not installed", conclusive=False)

    servers["qwen"].script(reply(kernel(WRITTEN_RELU)))
    generation = generate(RELU, "relu", team(servers, k=1), NoCompiler(), rounds=3)
    assert [a.stage for a in generation.attempts] == ["compile"] and generation.written is not None
    assert servers["qwen"].remaining == 0 and len(servers["qwen"].requests) == 1
