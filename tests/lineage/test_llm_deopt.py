"""The LLM de-optimizer for kernels without flags, against a real local OpenAI-compatible
server that answers from a script (tests/search/scripted_llm.py), with the gate played by
a scripted evaluator keyed by source text (SYNTHETIC NUMBERS, as in scripted_gpu.py).

The scripted answers are real CUDA: the relu expert's states as plain source, so the
model "removes" UNROLL and then VEC4 from the all-on kernel."""

from __future__ import annotations

import json

import pytest

from lineage.engine import experts
from lineage.engine.llm_deopt import LLM_OUTPUT, LLM_UNAVAILABLE, read_answer, walk_unmarked
from lineage.engine.walker import Lineage
from profiling.harness import tasks
from profiling.harness.candidate import Candidate
from search.engine.judges import LLMJudge
from search.engine.types import Measurement
from tests.search.scripted_llm import ScriptedLLM, http_error, llm_server_fixture, reply, slow  # noqa: F401

RELU = experts.load("relu")
ALL_ON = RELU.all_on()
NO_UNROLL = ALL_ON - {"OPT_UNROLL"}
NO_VEC4 = NO_UNROLL - {"OPT_VEC4"}
TOP = RELU.plain_candidate(ALL_ON)
MODEL = "scripted-7b"


class ScriptedGate:
    """Passes the relu expert's plain states with made-up times (each flag off makes it
    slower); answers `broken` sources with a compile rejection; anything else is wrong."""

    GAIN = {"OPT_RESTRICT": 1.02, "OPT_LAUNCH_BOUNDS": 1.01, "OPT_GRID_STRIDE": 1.2,
            "OPT_VEC4": 1.3, "OPT_UNROLL": 1.05}

    def __init__(self, broken: tuple[str, ...] = ()) -> None:
        self.times = {}
        for state in RELU.states():
            ms = 1.0
            for flag in state:
                ms /= self.GAIN[flag]
            self.times[RELU.plain_source(state).strip()] = ms
        self.broken = {s.strip() for s in broken}
        self.submitted: list[str] = []
        self.ready: list[tuple[str, Measurement]] = []

    def submit(self, task, candidate):
        source = candidate.source.strip()
        self.submitted.append(source)
        if source in self.broken:
            m = Measurement(status="rejected", guard="compile", message="error: expected a ';'",
                            gpu="scripted")
        elif source in self.times:
            ms = self.times[source]
            m = Measurement(status="passed", time_ms=ms, metrics={"dram_bytes": 2e9 * ms},
                            bottleneck="memory", gpu="scripted")
        else:
            m = Measurement(status="rejected", guard="wrong_values", message="L0 n=4099: off by one",
                            gpu="scripted")
        self.ready.append((candidate.content_hash(), m))

    def collect(self, timeout_s):
        ready, self.ready = self.ready, []
        return ready


def removal(intent: str, state, **extra) -> dict:
    """The model's answer: the relu expert's `state` as plain CUDA, said to lack `intent`."""
    return {"intent": intent, "source": RELU.plain_source(state), "why": f"without {intent}", **extra}


NOTHING_LEFT = {"intent": None, "why": "this is the plain first attempt"}


def model(server: ScriptedLLM, **overrides) -> LLMJudge:
    settings = {"base_url": server.base_url, "model": MODEL, "api_key": "sk-test", "timeout_s": 0.3,
                "max_retries": 1, "backoff_s": 0.001, **overrides}
    return LLMJudge(**settings)


def walk(server: ScriptedLLM, gate: ScriptedGate | None = None, **options) -> Lineage:
    return walk_unmarked(tasks.get("relu"), TOP, gate or ScriptedGate(), model(server), **options)


def test_a_good_two_step_deoptimization_is_a_chain_of_forward_steps_made_by_the_llm(llm_server):
    llm_server.script(reply(removal("UNROLL", NO_UNROLL)),
                      reply(removal("OPT_VEC4", NO_VEC4, plan={"tunables": {"OPT_VEC4": 0}})),
                      reply(NOTHING_LEFT))

    lineage = walk(llm_server)

    assert lineage.order == ["step-0", "step-1", "step-2"] and lineage.complete
    assert not lineage.rejected and lineage.gpu == "scripted" and lineage.expert == "uploaded"
    unroll, vec4 = lineage.transitions
    assert (unroll.before, unroll.after, unroll.intent, unroll.flag) == ("step-1", "step-0", "UNROLL",
                                                                          "OPT_UNROLL")
    assert (vec4.before, vec4.after, vec4.intent) == ("step-2", "step-1", "VEC4")
    assert {t.proposer for t in lineage.transitions} == {f"llm:{MODEL}"}
    assert unroll.speedup == pytest.approx(1.05) and vec4.speedup == pytest.approx(1.3)
    assert vec4.metric_deltas["dram_bytes"] < 0 and vec4.diagnosis_before["bottleneck"]
    assert "+        float4 a = x4[i], b = x4[i + stride];" in unroll.source_diff
    assert "float4" in vec4.source_diff and '-  "OPT_VEC4": 0' in vec4.source_diff  # the plan's diff
    assert vec4.tunables["OPT_VEC4"] == 1  # the more optimized side's tunables, as the walker keeps


def test_the_prompt_carries_the_kernel_the_contract_the_vocabulary_and_what_was_removed(llm_server):
    llm_server.script(reply(removal("UNROLL", NO_UNROLL)), reply(NOTHING_LEFT))

    walk(llm_server)

    first, second = llm_server.prompts()
    assert "x4[i + stride]" in first and "WAVE_BLOCKS" in first  # the kernel and its launch plan
    assert "x: float32[n]" in first and "y: float32[n]" in first  # the task's contract
    assert "VEC4 (memory): load and store four floats" in first  # the vocabulary, with sentences
    assert "Already removed on the way here: nothing yet" in first
    assert "Already removed on the way here: UNROLL" in second and "x4[i + stride]" not in second
    assert "np.maximum" not in first and "def reference" not in first  # never the reference's code
    assert llm_server.requests[0]["response_format"] == {"type": "json_object"}


def test_an_unchanged_kernel_is_rejected_as_llm_output_and_asked_for_again(llm_server):
    llm_server.script(reply(removal("UNROLL", ALL_ON)), reply(removal("UNROLL", NO_UNROLL)),
                      reply(NOTHING_LEFT))
    gate = ScriptedGate()

    lineage = walk(llm_server, gate)

    (unchanged,) = lineage.rejected
    assert unchanged.guard == LLM_OUTPUT and "unchanged" in unchanged.message
    assert unchanged.start == "step-0" and unchanged.state == "" and unchanged.flag == "OPT_UNROLL"
    assert unchanged.proposer == f"llm:{MODEL}"
    assert len(gate.submitted) == 2  # the unchanged answer was never measured
    assert [t.intent for t in lineage.transitions] == ["UNROLL"] and lineage.complete
    assert "the source is unchanged" in llm_server.prompts()[1]  # the model is told why


def test_a_broken_kernel_is_a_gate_rejection_kept_as_evidence(llm_server):
    broken = RELU.plain_source(NO_UNROLL).replace("float4 a = x4[i];", "float4 a = x4[i]")
    llm_server.script(reply({"intent": "UNROLL", "source": broken}), reply(removal("UNROLL", NO_UNROLL)),
                      reply(NOTHING_LEFT))

    lineage = walk(llm_server, ScriptedGate(broken=(broken,)))

    (refused,) = lineage.rejected
    assert (refused.guard, refused.start, refused.state) == ("compile", "step-0", "step-1-rejected-1")
    assert "does not build" in refused.precondition and refused.proposer == f"llm:{MODEL}"
    assert lineage.order == ["step-0", "step-1-rejected-1", "step-1"]
    assert lineage.states["step-1-rejected-1"].measurement["guard"] == "compile"
    assert [t.before for t in lineage.transitions] == ["step-1"]
    assert "refused by the gate (compile" in llm_server.prompts()[1]


def test_a_step_that_runs_out_of_attempts_ends_the_walk_with_what_it_has(llm_server):
    broken = RELU.plain_source(NO_UNROLL).replace("float4 a = x4[i];", "float4 a = x4[i]")
    llm_server.script(reply({"intent": "UNROLL", "source": broken}), reply("not json at all"))

    lineage = walk(llm_server, ScriptedGate(broken=(broken,)), attempts_per_step=2)

    assert [r.guard for r in lineage.rejected] == ["compile", LLM_OUTPUT]
    assert not lineage.transitions and not lineage.complete and llm_server.remaining == 0


def test_invalid_json_is_rejected_as_llm_output_and_asked_for_again(llm_server):
    llm_server.script(reply("Sure! Here is the simpler kernel: ..."), reply(removal("UNROLL", NO_UNROLL)),
                      reply(NOTHING_LEFT))

    lineage = walk(llm_server)

    (invalid,) = lineage.rejected
    assert invalid.guard == LLM_OUTPUT and "not JSON" in invalid.message and invalid.flag == ""
    assert len(lineage.transitions) == 1 and lineage.complete


def test_an_intent_outside_the_vocabulary_is_rejected_as_llm_output(llm_server):
    llm_server.script(reply(removal("LOOP_MAGIC", NO_UNROLL)), reply(removal("UNROLL", NO_UNROLL)),
                      reply(NOTHING_LEFT))

    lineage = walk(llm_server)

    (unknown,) = lineage.rejected
    assert unknown.guard == LLM_OUTPUT and "not in the shared vocabulary" in unknown.message
    assert unknown.flag == "LOOP_MAGIC"
    assert [t.intent for t in lineage.transitions] == ["UNROLL"]


def test_an_intent_already_removed_ends_the_walk(llm_server):
    llm_server.script(reply(removal("UNROLL", NO_UNROLL)), reply(removal("UNROLL", NO_VEC4)))

    lineage = walk(llm_server)

    assert [t.intent for t in lineage.transitions] == ["UNROLL"] and not lineage.complete
    (repeat,) = lineage.rejected
    assert repeat.guard == LLM_OUTPUT and "already removed (in step-1)" in repeat.message
    assert list(lineage.states) == ["step-0", "step-1"]  # the repeat was never measured


def test_max_steps_bounds_the_accepted_removals(llm_server):
    llm_server.script(reply(removal("UNROLL", NO_UNROLL)), reply(removal("VEC4", NO_VEC4)))

    lineage = walk(llm_server, max_steps=1)

    assert list(lineage.states) == ["step-0", "step-1"] and llm_server.remaining == 1


@pytest.mark.parametrize("failure", [http_error(500), slow(1.0)], ids=["HTTP 500", "timeout"])
def test_an_endpoint_that_fails_ends_the_walk_with_what_it_has_and_says_why(llm_server, failure):
    llm_server.script(reply(removal("UNROLL", NO_UNROLL)), failure, failure)

    lineage = walk(llm_server)

    assert [t.intent for t in lineage.transitions] == ["UNROLL"] and not lineage.complete
    (gave_up,) = lineage.rejected
    assert gave_up.guard == LLM_UNAVAILABLE and gave_up.start == "step-1"
    assert ("HTTP 500" in gave_up.message) or ("no reply within" in gave_up.message)


def test_a_given_kernel_the_gate_refuses_is_a_lineage_of_one_state_and_no_request(llm_server):
    wrong = TOP.source.replace("fmaxf(a.x, 0.0f)", "a.x")

    given = Candidate.from_source_and_plan(wrong, TOP.plan_dict())

    lineage = walk_unmarked(tasks.get("relu"), given, ScriptedGate(), model(llm_server))

    assert list(lineage.states) == ["step-0"] and not lineage.transitions
    assert llm_server.requests == []


def test_an_llm_lineage_is_plain_json_and_reads_back_the_same(llm_server):
    llm_server.script(reply("{"), reply(removal("UNROLL", NO_UNROLL)), http_error(400, "bad model"))

    lineage = walk(llm_server)

    assert [r.guard for r in lineage.rejected] == [LLM_OUTPUT, LLM_UNAVAILABLE]
    assert Lineage.from_dict(json.loads(lineage.dumps())) == lineage


def test_a_fenced_source_and_a_full_plan_are_read_as_a_candidate():
    plan = {**TOP.plan_dict(), "tunables": {"BLOCK": 128}}
    text = json.dumps({"intent": "opt_unroll", "source": f"```cuda\n{RELU.plain_source(NO_UNROLL)}```",
                       "plan": plan})

    answer = read_answer(text, TOP)

    assert answer.intent == "UNROLL" and answer.candidate.tunables == {"BLOCK": 128}
    assert answer.candidate.source.strip() == RELU.plain_source(NO_UNROLL).strip()


def test_walk_source_walks_an_uploaded_kernel_with_the_configured_llm(llm_server, tmp_path, monkeypatch):
    from lineage.engine import __main__ as cli

    (tmp_path / "k.cu").write_text(TOP.source)
    (tmp_path / "plan.json").write_text(json.dumps(TOP.plan_dict()))
    for name, value in {"BASE_URL": llm_server.base_url, "MODEL": MODEL, "API_KEY": "sk-test",
                        "TIMEOUT_S": "0.3"}.items():
        monkeypatch.setenv(f"OPTIML_LLM_{name}", value)
    monkeypatch.setattr(cli, "evaluator_for", lambda args, out: ScriptedGate())
    llm_server.script(reply(removal("UNROLL", NO_UNROLL)), reply(NOTHING_LEFT))
    lines: list[str] = []

    code = cli.main(["walk-source", "--task", "relu", "--source", str(tmp_path / "k.cu"),
                     "--plan", str(tmp_path / "plan.json"), "--json", str(tmp_path / "l.json")],
                    out=lines.append)

    assert code == 0 and f"llm:{MODEL}: 2 requests, 300 tokens" in lines
    stored = Lineage.from_dict(json.loads((tmp_path / "l.json").read_text()))
    assert [t.intent for t in stored.transitions] == ["UNROLL"] and stored.complete
    assert stored.expert == str(tmp_path / "k.cu")


def test_walk_source_says_what_is_missing_without_an_llm_endpoint(tmp_path, monkeypatch):
    from lineage.engine import __main__ as cli

    (tmp_path / "k.cu").write_text(TOP.source)
    (tmp_path / "plan.json").write_text(json.dumps(TOP.plan_dict()))
    monkeypatch.delenv("OPTIML_LLM_BASE_URL", raising=False)
    lines: list[str] = []

    code = cli.main(["walk-source", "--task", "relu", "--source", str(tmp_path / "k.cu"),
                     "--plan", str(tmp_path / "plan.json")], out=lines.append)

    assert code == 2 and "OPTIML_LLM_BASE_URL is not set" in lines[0]
