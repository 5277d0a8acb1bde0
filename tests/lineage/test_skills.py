"""The `skills` proposal source (lineage/engine/skills.py): cards induced from the H200
lineages, applied to the suite's naive kernels (written before and apart from the
experts), each proposal naming its card and citing its evidence."""

import json
from pathlib import Path

import pytest

from lineage.engine import cards as card_engine
from lineage.engine import experts
from lineage.engine.skills import SkillSource, load_cards, recorded_cards
from profiling.harness import tasks
from profiling.harness.candidate import Candidate
from search.engine.judges import RuleJudge
from search.engine.types import NodeContext

RESULTS = Path(__file__).parents[2] / "bench" / "results"


def naive(name: str) -> NodeContext:
    task = tasks.get(name)
    candidate = Candidate.from_source_and_plan(task.naive_source, task.naive_plan)
    return NodeContext(task=name, candidate=candidate, measurement=None, diagnosis=None)


def test_a_card_proposes_on_a_kernel_it_was_not_learned_from_and_says_which_card():
    # sgemm's expert has no RESTRICT flag: the card came from six other lineages.
    # Its patterns were parts of larger steps (inputs and output apart): made together.
    (proposal,) = [p for p in SkillSource().propose(naive("sgemm"))
                   if p.source == "skill:restrict-v1" and p.params["materialised_by"] == "patterns"]
    assert "sgemm" not in proposal.title.split("together")[1]
    assert "const float* __restrict__ A, const float* __restrict__ B" in proposal.candidate.source
    assert proposal.families == ("restrict",) and proposal.params["card"] == "restrict-v1"
    assert "Seen in 6 lineages" in proposal.rationale and proposal.diff.startswith("--- a/kernel.cu")
    assert proposal.candidate.plan_dict() == naive("sgemm").candidate.plan_dict()  # the launch unchanged


def test_a_card_whose_pattern_does_not_match_proposes_nothing():
    # relu's naive kernel calls no expf: the FAST_MATH card has nothing to act on.
    sources = {p.source for p in SkillSource().propose(naive("relu"))}
    assert "skill:fast_math-v1" not in sources
    # Applied once, a card's pattern no longer matches: it does not propose again.
    (restricted,) = [p for p in SkillSource().propose(naive("relu"))
                     if p.source == "skill:restrict-v1" and p.params["materialised_by"] == "patterns"]
    again = NodeContext(task="relu", candidate=restricted.candidate, measurement=None, diagnosis=None)
    assert "skill:restrict-v1" not in {p.source for p in SkillSource().propose(again)}


def test_cards_come_from_a_file_when_one_is_configured(tmp_path, monkeypatch):
    path = tmp_path / "cards.json"
    path.write_text(json.dumps({"format": card_engine.CARDS_FORMAT,
                                "cards": [c for c in recorded_cards() if c["intent"] == "FAST_MATH"]}))
    monkeypatch.setenv("OPTIML_SKILL_CARDS", str(path))
    monkeypatch.setenv("OPTIML_SKILL_SKELETONS", "0")  # the token cards alone: those of the file
    # (the card came, among others, from softmax's lineage: the root is offered its entry)
    assert {p.source for p in SkillSource().propose(naive("softmax"))} == {"skill:fast_math-v1",
                                                                         "lineage:softmax"}
    path.write_text("[]")
    with pytest.raises(ValueError, match="not a cards file"):
        load_cards(path)


def test_the_search_cli_takes_its_sources_by_dotted_path_skills_included():
    from search.engine.__main__ import DEFAULT_SOURCES, _make_sources, build_parser

    args = build_parser().parse_args(["optimize", "--task", "softmax"])  # skills on by default
    assert [s.name for s in _make_sources(args.sources.split(","))] == ["tunable", "rewrite", "skills"]
    assert [s.name for s in _make_sources(DEFAULT_SOURCES)] == ["tunable", "rewrite", "skills"]
    named = build_parser().parse_args(["optimize", "--task", "softmax", "--sources",
                                       "search.engine.sources.TunableSource,lineage.engine.skills.SkillSource"])
    assert [s.name for s in _make_sources(named.sources.split(","))] == ["tunable", "skills"]
    with pytest.raises(SystemExit, match="proposal source 'lineage.engine.skills.NoSuchSource'"):
        _make_sources(["lineage.engine.skills.NoSuchSource"])


# -- cards an LLM materialises where their pattern does not match (scripted endpoint) -------

from search.engine.judges import LLMJudge  # noqa: E402
from tests.search.scripted_llm import http_error, llm_server_fixture, reply  # noqa: E402, F401

MODEL = "scripted-7b"
FLOAT4_RELU = """extern "C" __global__ void relu(const float* x, float* y, int n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (4 * i + 3 < n) {
        float4 v = reinterpret_cast<const float4*>(x)[i];
        reinterpret_cast<float4*>(y)[i] = make_float4(fmaxf(v.x, 0.0f), fmaxf(v.y, 0.0f), fmaxf(v.z, 0.0f),
                                                      fmaxf(v.w, 0.0f));
    } else {
        for (long long j = 4 * i; j < n; ++j) y[j] = fmaxf(x[j], 0.0f);
    }
}
"""


def model(server) -> LLMJudge:
    return LLMJudge(base_url=server.base_url, model=MODEL, api_key="sk-test", timeout_s=0.5,
                    max_retries=0, backoff_s=0.001)


def test_an_unmatched_card_is_materialised_by_the_llm_and_says_so(llm_server):
    llm_server.script(reply({"source": FLOAT4_RELU, "plan": {"tunables": {}}, "why": "float4"}),
                      reply("not a kernel at all"))
    source = SkillSource(llm=model(llm_server), llm_cards_per_node=2)

    proposals = source.propose(naive("relu"))

    by_llm = [p for p in proposals if p.params.get("materialised_by") == f"llm:{MODEL}"]
    assert len(by_llm) == 1 and len(llm_server.requests) == 2  # the second answer was no kernel
    (proposal,) = by_llm
    assert proposal.source.startswith("skill:") and f"materialised by llm:{MODEL}" in proposal.title
    assert proposal.candidate.source == FLOAT4_RELU and "the LLM applied it" in proposal.rationale
    card_id = proposal.params["card"]
    first = llm_server.prompts()[0]
    intent = next(c for c in recorded_cards() if c["id"] == card_id)["intent"]
    assert f"Apply this optimization to the kernel below: {intent}" in first
    assert "x: float32[n]" in first and "np.maximum" not in first  # the contract, never the reference
    assert "One expert's step" in first and "```diff" in first
    # The pattern proposals are there too, and a card is handed to the LLM once per kernel.
    assert any(p.params.get("materialised_by") in ("pattern", "patterns") for p in proposals)
    source.propose(naive("relu"))
    assert len(llm_server.requests) == 4  # the next two cards, not the same two again


def test_an_endpoint_that_fails_leaves_the_pattern_proposals(llm_server):
    llm_server.script(http_error(500), http_error(500))
    source = SkillSource(llm=model(llm_server), llm_cards_per_node=1, skeletons=False)
    proposals = source.propose(naive("sgemm"))
    assert [p.source for p in proposals] == ["skill:restrict-v1", "lineage:sgemm"]  # no LLM proposal


def test_a_cards_step_rebuilds_the_next_state_of_its_own_lineage():
    relu = experts.load("relu")
    plain = relu.plain_candidate(frozenset())
    context = NodeContext(task="relu", candidate=plain, measurement=None, diagnosis=None)
    steps = [p for p in SkillSource().propose(context) if p.params["materialised_by"] == "step"]
    wanted = relu.plain_source(frozenset({"OPT_GRID_STRIDE"}))
    (grid_stride,) = [p for p in steps if p.source == "skill:grid_stride-v1" and not p.params["generalised"]]
    assert grid_stride.candidate.source == wanted
    assert "relu's step from {the plain attempt}" in grid_stride.rationale


def test_at_the_root_a_task_whose_lineage_is_in_the_library_gets_that_lineages_plain_attempt():
    # The naive sgemm was written apart from the expert: no card step matches it. With
    # sgemm's lineage in the library, the root is offered the lineage's plain attempt,
    # the kernel its steps replay from; it says where it came from, and is no card.
    (entry,) = [p for p in SkillSource().propose(naive("sgemm")) if p.source.startswith("lineage:")]
    plain = experts.load("sgemm").written_candidate(frozenset())
    assert entry.source == "lineage:sgemm" and entry.params["materialised_by"] == "lineage"
    assert entry.candidate.source == plain.source and entry.candidate.plan_dict() == plain.plan_dict()
    assert "verified lineage of sgemm" in entry.rationale
    # Below the root, and from the plain attempt itself, it is not offered again.
    below = NodeContext(task="sgemm", candidate=naive("sgemm").candidate, measurement=None,
                        diagnosis=None, history=("RESTRICT: its 1 patterns together",))
    assert not [p for p in SkillSource().propose(below) if p.source.startswith("lineage:")]
    at_plain = NodeContext(task="sgemm", candidate=plain, measurement=None, diagnosis=None)
    assert not [p for p in SkillSource().propose(at_plain) if p.source.startswith("lineage:")]


def lineage_state_ms(task: str) -> dict[str, float]:
    """Each recorded state's time in the task's newest recorded lineage, by its flags."""
    path = sorted(RESULTS.glob(f"*-h200-lineages*/lineage-{task}.json"))[-1]
    states = json.loads(path.read_text())["states"]
    return {key: state["measurement"]["time_ms"] for key, state in states.items()
            if state["measurement"].get("status") == "passed"}


def test_the_lineage_entry_expects_what_its_lineage_reached_from_it():
    # topk's naive kernel runs about 200 ms on the H200; its lineage's steps from the
    # plain attempt are in the cards with their measured speed-ups. The entry expects
    # what the best recorded path of them reached (the product of its steps' speed-ups)
    # and carries the first steps' families, so the rule judge weighs it by that evidence
    # (on the H200 an entry that expected nothing ranked last and sat untried for a whole
    # time limit: the transfer benchmark's call b).
    cards = recorded_cards()
    first = {c["intent"]: float(step["speedup"]) for c in cards for step in c["anchor"]["steps"]
             if step["task"] == "topk" and not step["before"]}
    (entry,) = [p for p in SkillSource().propose(naive("topk")) if p.source == "lineage:topk"]
    best = max(first, key=first.get)
    times = lineage_state_ms("topk")
    # The path's product against the lineage's own plain-to-expert ratio, measured apart.
    assert entry.expected_speedup == pytest.approx(times[""] / min(times.values()), rel=0.15)
    assert entry.expected_speedup > first[best] > 4
    assert f"Its best first step, {best}, measured {first[best]:.2f}x" in entry.rationale
    assert f"its recorded steps reached {entry.expected_speedup:.2f}x from it" in entry.rationale
    assert "parallelism" in entry.families  # BLOCK_PER_ROW's, in the search's family names
    # Without a first step in the cards, nothing is expected: the judge weighs it as 1x.
    stepless = [{**c, "anchor": {**c["anchor"], "steps": [s for s in c["anchor"]["steps"]
                                                          if s["task"] != "topk" or s["before"]]}}
                for c in cards]
    (bare,) = [p for p in SkillSource(cards=stepless).propose(naive("topk")) if p.source == "lineage:topk"]
    assert bare.expected_speedup is None and bare.families == ()
    judge = RuleJudge()
    diagnosis = judge.diagnose(naive("topk"))
    assert judge.score(entry, diagnosis) == pytest.approx(2 * judge.score(bare, diagnosis))


def test_conv2ds_entry_expects_its_path_though_each_first_step_alone_was_slower():
    # conv2d's lineage gained nothing from any single first step (IMPLICIT_GEMM alone is
    # slower); the tiling on top of it is what reached the expert.
    first = [float(step["speedup"]) for c in recorded_cards() for step in c["anchor"]["steps"]
             if step["task"] == "conv2d" and not step["before"]]
    (entry,) = [p for p in SkillSource().propose(naive("conv2d")) if p.source == "lineage:conv2d"]
    assert first and max(first) < 1.0
    times = lineage_state_ms("conv2d")
    assert entry.expected_speedup == pytest.approx(times[""] / min(times.values()), rel=0.15)
    assert entry.expected_speedup > 4


def test_a_step_at_the_state_it_was_recorded_from_says_what_it_reaches():
    """Proposal.reaches: measured from this very kernel. At self_attention's plain attempt
    its FLASH_TILING step (86x alone) reached the expert's time along the lineage; the
    same cards at the naive kernel, written apart from the expert, reach nothing."""
    plain = experts.load("self_attention").written_candidate(frozenset())
    at_plain = SkillSource().propose(NodeContext(task="self_attention", candidate=plain, measurement=None,
                                                 diagnosis=None, history=("plain attempt",)))
    reached = {p.title.split(":")[0]: p for p in at_plain if p.reaches is not None}
    assert set(reached) >= {"FLASH_TILING"}
    flash = reached["FLASH_TILING"]
    times = lineage_state_ms("self_attention")
    assert flash.expected_speedup > 50
    assert flash.reaches == pytest.approx(times[""] / min(times.values()), rel=0.15)
    assert flash.best_expectation() == flash.reaches
    elsewhere = SkillSource().propose(naive("self_attention"))
    assert all(p.reaches is None for p in elsewhere)


def test_cards_that_leave_the_tasks_lineage_out_offer_no_entry_into_it():
    without = [c for c in recorded_cards() if all(v["task"] != "sgemm" for v in c["vector"])]
    proposals = SkillSource(cards=without).propose(naive("sgemm"))
    assert not [p for p in proposals if p.source.startswith("lineage:")]
    # a task the library has no lineage of is offered none either
    assert not [p for p in SkillSource().propose(naive("relu")) if p.source == "lineage:sgemm"]
