"""The LLM judge against a real local OpenAI-compatible server that answers from a script."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from scripted_llm import ScriptedLLM, http_error, llm_server_fixture, malformed, reply, slow  # noqa: F401

from profiling.harness import profile
from profiling.harness.candidate import Candidate
from search.engine.judges import LLMConfigError, LLMJudge, RuleJudge
from search.engine.types import Diagnosis, JudgeError, Measurement, NodeContext, Proposal

ROOT = Path(__file__).parents[2]
RECORDED = json.loads((ROOT / "tests" / "fixtures" / "recorded" / "h200-relu-naive.json").read_text())
METRICS = profile.aggregate(profile.parse_raw_csv(
    (ROOT / "tests" / "fixtures" / "ncu" / "h200-relu-naive-raw.csv").read_text()))
TIMEOUT_S = 0.3  # short, so that the timeout tests stay fast

VECTORIZED = """\
extern "C" __global__ void relu(const float* __restrict__ x, float* __restrict__ y, int n) {
    long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * 4;
    if (i + 3 < n) {
        float4 v = *reinterpret_cast<const float4*>(x + i);
        v.x = fmaxf(v.x, 0.0f); v.y = fmaxf(v.y, 0.0f); v.z = fmaxf(v.z, 0.0f); v.w = fmaxf(v.w, 0.0f);
        *reinterpret_cast<float4*>(y + i) = v;
    } else {
        for (; i < n; ++i) y[i] = fmaxf(x[i], 0.0f);
    }
}
"""

GOOD_DIAGNOSIS = {
    "bottleneck": "latency",
    "summary": "DRAM is half used and warps stall on scalar loads.",
    "evidence": ["DRAM throughput 55.2% of peak < 80%", "achieved occupancy 70.8% >= 25%"],
    "wants": ["vectorize", "grid_stride", "restrict"],
}


def relu_context() -> NodeContext:
    record = RECORDED["recorded"][0]
    candidate = Candidate.from_source_and_plan(record["candidate"]["source"], record["candidate"]["plan"])
    measurement = Measurement(status="passed", time_ms=0.806, spread_ms=0.0003, metrics=METRICS,
                              bottleneck="latency", registers=10, verdict=record["verdict"])
    return NodeContext("relu", candidate, measurement, None, history=("restrict pointers",))


def judge_for(server: ScriptedLLM, **overrides: object) -> LLMJudge:
    settings = {"base_url": server.base_url, "model": "scripted-7b", "api_key": "sk-test",
                "timeout_s": TIMEOUT_S, "max_retries": 2, "backoff_s": 0.001, **overrides}
    return LLMJudge(**settings)


def plan_with_grid(grid: str) -> dict:
    plan = relu_context().candidate.plan_dict()
    plan["launches"][0]["grid"] = [grid]
    return plan


# --- diagnose -------------------------------------------------------------------------------


def test_a_good_diagnosis_reply_is_parsed_and_the_prompt_carries_the_measurements(llm_server) -> None:
    llm_server.script(reply(GOOD_DIAGNOSIS))
    judge = judge_for(llm_server)
    diagnosis = judge.diagnose(relu_context())
    assert diagnosis == Diagnosis("latency", GOOD_DIAGNOSIS["summary"], tuple(GOOD_DIAGNOSIS["evidence"]),
                                  ("vectorize", "grid_stride", "restrict"), source="llm:scripted-7b")
    (body,) = llm_server.requests
    assert body["model"] == "scripted-7b"
    assert body["response_format"] == {"type": "json_object"}
    assert llm_server.headers[0]["authorization"] == "Bearer sk-test"
    prompt = llm_server.prompts()[0]
    assert "fmaxf(x[i], 0.0f)" in prompt  # the kernel source
    assert "cdiv(n, BLOCK)" in prompt  # the launch plan
    assert '"registers": 10' in prompt  # ptxas resources
    assert '"sol_dram_pct":55.22' in prompt  # ncu metrics, compact
    assert judge.name == "llm:scripted-7b"


def test_a_malformed_reply_then_a_good_one_succeeds_with_one_retry_counted(llm_server) -> None:
    llm_server.script(malformed("The kernel is latency-bound."), reply(GOOD_DIAGNOSIS))
    judge = judge_for(llm_server)
    assert judge.diagnose(relu_context()).bottleneck == "latency"
    usage = judge.usage
    assert (usage.calls, usage.retries, usage.failures) == (2, 1, 0)
    assert "not JSON" in judge.transcript[0]["error"]
    assert judge.transcript[1]["error"] is None and judge.transcript[1]["attempt"] == 2


@pytest.mark.parametrize("bad, complaint", [
    ({**GOOD_DIAGNOSIS, "bottleneck": "thermal"}, "bottleneck 'thermal'"),
    ({**GOOD_DIAGNOSIS, "wants": ["vectorize", "prayer"]}, "unknown families: prayer"),
    ({**GOOD_DIAGNOSIS, "summary": ""}, "summary"),
    ([GOOD_DIAGNOSIS], "not an object"),
])
def test_a_reply_off_the_schema_is_retried_then_raises_a_judge_error(llm_server, bad, complaint) -> None:
    llm_server.script(*[reply(json.dumps(bad))] * 3)
    judge = judge_for(llm_server)
    with pytest.raises(JudgeError, match="could not diagnose after 3 attempts") as caught:
        judge.diagnose(relu_context())
    assert complaint in str(caught.value)
    assert (judge.usage.calls, judge.usage.retries, judge.usage.failures) == (3, 2, 1)


def test_a_reply_past_the_timeout_is_retried_then_gives_a_judge_error_and_the_judge_recovers(
    llm_server,
) -> None:
    llm_server.script(slow(TIMEOUT_S * 3), slow(TIMEOUT_S * 3), reply(GOOD_DIAGNOSIS))
    judge = judge_for(llm_server, max_retries=1)
    started = time.monotonic()
    with pytest.raises(JudgeError, match=r"no reply within 0.3 s"):
        judge.diagnose(relu_context())
    assert time.monotonic() - started < TIMEOUT_S * 2 + 0.5  # two attempts, not a hang
    assert (judge.usage.calls, judge.usage.retries, judge.usage.failures) == (2, 1, 1)
    assert judge.usage.seconds >= TIMEOUT_S * 2 * 0.9
    # A failure is a state: the next call goes through.
    assert judge.diagnose(relu_context()).bottleneck == "latency"
    assert judge.usage.calls == 3


def test_a_server_error_then_success_costs_one_retry(llm_server) -> None:
    llm_server.script(http_error(500, "upstream overloaded"), reply(GOOD_DIAGNOSIS))
    judge = judge_for(llm_server)
    assert judge.diagnose(relu_context()).wants[0] == "vectorize"
    assert (judge.usage.calls, judge.usage.retries) == (2, 1)
    assert judge.transcript[0]["error"] == "HTTP 500: upstream overloaded"


def test_rate_limits_are_counted_and_retry_after_is_honoured(llm_server) -> None:
    llm_server.script(http_error(429, "slow down", retry_after="0.2"), reply(GOOD_DIAGNOSIS))
    judge = judge_for(llm_server)
    started = time.monotonic()
    judge.diagnose(relu_context())
    assert time.monotonic() - started >= 0.2
    assert (judge.usage.rate_limited, judge.usage.retries, judge.usage.failures) == (1, 1, 0)


def test_a_refusal_that_retrying_cannot_fix_fails_at_once(llm_server) -> None:
    llm_server.script(http_error(401, "invalid api key"), reply(GOOD_DIAGNOSIS))
    judge = judge_for(llm_server)
    with pytest.raises(JudgeError, match="HTTP 401: invalid api key"):
        judge.diagnose(relu_context())
    assert (judge.usage.calls, judge.usage.retries, judge.usage.failures) == (1, 0, 1)
    assert llm_server.remaining == 1


def test_tokens_and_cost_add_up_over_calls(llm_server) -> None:
    llm_server.script(malformed("nope", prompt_tokens=900, completion_tokens=10),
                        reply(GOOD_DIAGNOSIS, prompt_tokens=1000, completion_tokens=120),
                        reply({"proposals": []}, prompt_tokens=1500, completion_tokens=30))
    judge = judge_for(llm_server, price_per_1k_input=0.5, price_per_1k_output=2.0)
    context = relu_context()
    assert judge.propose(context, judge.diagnose(context)) == []
    usage = judge.usage
    assert (usage.prompt_tokens, usage.completion_tokens) == (3400, 160)
    assert usage.cost == pytest.approx(3400 / 1000 * 0.5 + 160 / 1000 * 2.0)
    assert sum(e["prompt_tokens"] for e in judge.transcript) == usage.prompt_tokens
    assert usage.seconds == pytest.approx(sum(e["seconds"] for e in judge.transcript))
    assert [e["purpose"] for e in judge.transcript] == ["diagnose", "diagnose", "propose"]
    assert judge.transcript[0]["reply"] == "nope"


# --- propose and score ------------------------------------------------------------------------


def proposals_reply() -> dict:
    parent = relu_context().candidate
    return {"proposals": [
        {"title": "float4 loads", "rationale": "a quarter of the load instructions",
         "families": ["vectorize", "restrict"], "source": f"```cuda\n{VECTORIZED}```",
         "plan": plan_with_grid("cdiv(n, 4 * BLOCK)"), "confidence": 0.8},
        {"title": "same again", "rationale": "no change", "families": ["unroll"], "source": parent.source},
        {"title": "bad plan", "rationale": "r", "families": ["tile"], "source": VECTORIZED,
         "plan": {"launches": []}},
        {"title": "bigger blocks", "rationale": "fewer blocks to schedule",
         "families": ["occupancy", "magic"], "source": parent.source,
         "plan": {**parent.plan_dict(), "tunables": {"BLOCK": 512}}},
    ]}


def test_proposals_are_materialised_with_their_source_diff_and_the_llms_prior(llm_server) -> None:
    llm_server.script(reply(proposals_reply()))
    judge = judge_for(llm_server, max_proposals=4)
    context = relu_context()
    diagnosis = RuleJudge().diagnose(context)
    vectorized, bigger = judge.propose(context, diagnosis)
    assert vectorized.source == bigger.source == "llm:scripted-7b"
    assert vectorized.families == ("vectorize", "restrict")
    assert vectorized.candidate.source == VECTORIZED  # code fences stripped
    assert "+    if (i + 3 < n) {" in vectorized.diff
    assert "-        y[i] = fmaxf(x[i], 0.0f);" in vectorized.diff
    assert '+        "cdiv(n, 4 * BLOCK)"' in vectorized.diff
    assert bigger.families == ("occupancy",) and bigger.params["ignored_families"] == ["magic"]
    assert '-    "BLOCK": 256' in bigger.diff and "kernel.cu" not in bigger.diff
    assert judge.score(vectorized, diagnosis) == pytest.approx(0.8)  # its stated confidence
    assert judge.score(bigger, diagnosis) == pytest.approx(1 / 4)  # last of four, by rank
    stranger = Proposal("rewrite:x", "other", "r", context.candidate, families=("vectorize",))
    assert judge.score(stranger, diagnosis) == 0.5


def test_unchanged_and_malformed_proposals_are_dropped_with_a_reason(llm_server) -> None:
    llm_server.script(reply(proposals_reply()))
    judge = judge_for(llm_server, max_proposals=4)
    context = relu_context()
    judge.propose(context, RuleJudge().diagnose(context))
    reasons = {d["title"]: d["reason"] for d in judge.dropped}
    assert reasons["same again"].startswith("unchanged")
    assert "'launches' must be a non-empty list" in reasons["bad plan"]
    assert judge.transcript[-1]["dropped"] == judge.dropped


def test_proposals_beyond_the_k_asked_for_are_dropped_and_ranked_among_the_k(llm_server) -> None:
    llm_server.script(reply(proposals_reply()))
    judge = judge_for(llm_server, max_proposals=1)
    context = relu_context()
    (only,) = judge.propose(context, RuleJudge().diagnose(context))
    assert only.title == "float4 loads"
    assert [d["reason"] for d in judge.dropped] == ["beyond the 1 asked for"] * 3


def test_the_propose_prompt_carries_the_diagnosis_history_and_limits(llm_server) -> None:
    llm_server.script(reply({"proposals": []}))
    judge = judge_for(llm_server, max_proposals=2)
    context = relu_context()
    judge.propose(context, Diagnosis("latency", "warps stall", wants=("vectorize",)))
    prompt = llm_server.prompts()[0]
    assert "Propose up to 2 changes" in prompt
    assert "warps stall" in prompt and "restrict pointers" in prompt
    assert "Fast math: NOT allowed" in prompt


def test_a_reply_without_a_proposals_list_is_retried(llm_server) -> None:
    llm_server.script(reply({"patches": []}), reply({"proposals": []}))
    judge = judge_for(llm_server)
    context = relu_context()
    assert judge.propose(context, RuleJudge().diagnose(context)) == []
    assert judge.usage.retries == 1 and "'proposals' must be a list" in judge.transcript[0]["error"]


# --- configuration --------------------------------------------------------------------------


ENV = {"OPTIML_LLM_BASE_URL": "http://127.0.0.1:9/v1", "OPTIML_LLM_MODEL": "qwen-coder",
       "OPTIML_LLM_API_KEY": "sk-env"}


@pytest.mark.parametrize("missing", ["OPTIML_LLM_BASE_URL", "OPTIML_LLM_MODEL", "OPTIML_LLM_API_KEY"])
def test_from_env_names_the_missing_variable(missing: str) -> None:
    env = {k: v for k, v in ENV.items() if k != missing}
    with pytest.raises(LLMConfigError, match=missing):
        LLMJudge.from_env(env)


def test_from_env_reads_the_key_from_a_file_and_parses_numbers(tmp_path: Path) -> None:
    (tmp_path / "key").write_text("sk-from-file\n")
    env = {**ENV, "OPTIML_LLM_API_KEY": "", "OPTIML_LLM_API_KEY_FILE": str(tmp_path / "key"),
           "OPTIML_LLM_TIMEOUT_S": "12.5", "OPTIML_LLM_PRICE_IN": "0.15", "OPTIML_LLM_PRICE_OUT": "0.6"}
    judge = LLMJudge.from_env(env)
    assert judge.name == "llm:qwen-coder" and judge.timeout_s == 12.5
    assert (judge.price_per_1k_input, judge.price_per_1k_output) == (0.15, 0.6)
    assert judge._client.api_key == "sk-from-file"


def test_from_env_names_a_variable_that_is_not_a_number() -> None:
    with pytest.raises(LLMConfigError, match="OPTIML_LLM_TIMEOUT_S='soon'"):
        LLMJudge.from_env({**ENV, "OPTIML_LLM_TIMEOUT_S": "soon"})


def test_a_screened_kernel_is_described_with_its_profiled_ancestors_diagnosis(llm_server) -> None:
    llm_server.script(reply(GOOD_DIAGNOSIS))
    context = relu_context()
    screened = Measurement(status="passed", time_ms=0.51, spread_ms=0.001, level="screen")
    ancestor = Diagnosis("memory", "DRAM half used", ("DRAM throughput 55.2% < 80%",), ("vectorize",))

    judge_for(llm_server).diagnose(NodeContext("relu", context.candidate, screened, None,
                                               profiled_ancestor=(4, ancestor)))

    prompt = llm_server.prompts()[0]
    assert "screened (fewer seeds and runs), not profiled" in prompt
    assert "node 4" in prompt and "DRAM throughput 55.2% < 80%" in prompt
    assert "ncu metrics:" not in prompt
