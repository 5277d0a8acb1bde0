"""The rule judge on the ten naive kernels profiled on the H200 (real ncu CSVs)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from profiling.harness import profile, tasks
from profiling.harness.candidate import Candidate
from search.engine.judges import RuleJudge
from search.engine.judges.rules import evidence_weight
from search.engine.types import FAMILIES, Diagnosis, Measurement, NodeContext, Proposal

ROOT = Path(__file__).parents[2]
NCU = ROOT / "tests" / "fixtures" / "ncu"
SUITE = json.loads((ROOT / "bench" / "results" / "2026-11-29-h200-suite.json").read_text())
RECORDED_RELU = json.loads((ROOT / "tests" / "fixtures" / "recorded" / "h200-relu-naive.json").read_text())
TASKS = sorted(SUITE["tasks"])


def naive_context(task: str, **changes: object) -> NodeContext:
    """The naive kernel of `task` as measured on the H200: ncu CSV + suite time."""
    metrics = profile.aggregate(profile.parse_raw_csv((NCU / f"h200-{task}-naive-raw.csv").read_text()))
    timing = SUITE["tasks"][task]["naive"]
    spec = tasks.get(task)
    measurement = Measurement(
        status="passed", time_ms=timing["median_ms"], spread_ms=timing["spread_ms"],
        metrics=metrics, bottleneck=profile.classify(metrics)[0],
        registers=int(metrics["registers_per_thread"]), gpu="NVIDIA H200", replayed=True,
    )
    candidate = Candidate.from_source_and_plan(spec.naive_source, spec.naive_plan)
    fields = {"task": task, "candidate": candidate, "measurement": measurement, "diagnosis": None}
    return NodeContext(**{**fields, **changes})


def numbers(text: str) -> list[float]:
    """Numbers as printed, not the digits of names like L1 or sm_90."""
    return [float(n) for n in re.findall(r"(?<![A-Za-z_])\d+(?:\.\d+)?(?:e[+-]\d+)?", text)]


@pytest.mark.parametrize("task", TASKS)
def test_every_evidence_line_cites_a_measured_number_and_a_threshold(task: str) -> None:
    context = naive_context(task)
    metrics = context.measurement.metrics
    for line in RuleJudge().diagnose(context).evidence:
        if line.startswith("time "):
            assert f"{context.measurement.time_ms:.4g}" in line
            continue
        if line.startswith("the source uses "):  # evidence read from the kernel, not ncu
            assert line.split()[3].rstrip(":") in context.candidate.source
            continue
        cited = numbers(line)
        # The first number of each line is a metric as measured (rounded as printed).
        assert any(abs(cited[0] - v) <= max(0.05, 1e-3 * abs(v)) for v in metrics.values()), line
        assert re.search(r"[<>]=? \d", line), f"no threshold compared in: {line}"


def test_the_naive_softmax_with_a_32_block_grid_wants_parallelism_first() -> None:
    diagnosis = RuleJudge().diagnose(naive_context("softmax"))
    assert diagnosis.bottleneck == "occupancy"
    assert diagnosis.wants[0] == "parallelism"
    assert {"occupancy", "coalesce"} <= set(diagnosis.wants)
    assert "achieved occupancy 6.2% < 25%: too few warps to hide latency" in diagnosis.evidence
    assert any(line.startswith("grid of 32 blocks < 264 (2 x 132 SMs)") for line in diagnosis.evidence)
    # Thread-per-row reads: each 32-byte sector is fetched ~8 times through L1.
    assert any("8.0x the DRAM read bytes > 4x" in line for line in diagnosis.evidence)


def test_the_naive_relu_at_55_percent_of_dram_wants_wider_loads_and_a_grid_stride() -> None:
    diagnosis = RuleJudge().diagnose(naive_context("relu"))
    assert diagnosis.bottleneck == "latency"
    assert diagnosis.wants[0] == "vectorize"
    assert "grid_stride" in diagnosis.wants[:3]
    assert "parallelism" not in diagnosis.wants  # a million blocks is parallel enough
    assert "DRAM throughput 55.2% of peak < 80%: bandwidth is left unused" in diagnosis.evidence


def test_the_naive_reduction_wants_warp_shuffles_for_its_atomics() -> None:
    diagnosis = RuleJudge().diagnose(naive_context("reduce_sum"))
    assert diagnosis.bottleneck == "latency"
    assert "warp_reduce" in diagnosis.wants[:2]
    assert any("atomicAdd" in line for line in diagnosis.evidence)


@pytest.mark.parametrize("task", ["sgemm", "self_attention", "conv2d"])
def test_kernels_that_hammer_l1_but_not_dram_want_tiling_first(task: str) -> None:
    diagnosis = RuleJudge().diagnose(naive_context(task))
    assert diagnosis.bottleneck == "memory"
    assert diagnosis.wants[0] == "tile"
    assert any("bandwidth is left unused" in line for line in diagnosis.evidence)


def test_a_compute_bound_kernel_wants_fast_math_only_when_the_tolerance_allows_it() -> None:
    strict = RuleJudge().diagnose(naive_context("maxpool3d"))
    loose = RuleJudge().diagnose(naive_context("maxpool3d", tolerance_allows_fast_math=True))
    assert strict.bottleneck == loose.bottleneck == "compute"
    assert "fast_math" not in strict.wants and strict.wants[0] == "unroll"
    assert loose.wants[0] == "fast_math"


def test_a_kernel_at_the_dram_roofline_is_told_to_move_fewer_bytes() -> None:
    context = naive_context("relu")
    metrics = {**context.measurement.metrics, "sol_dram_pct": 91.0, "sol_memory_pct": 91.0}
    hot = Measurement(status="passed", time_ms=0.5, metrics=metrics, bottleneck="memory")
    diagnosis = RuleJudge().diagnose(NodeContext("relu", context.candidate, hot, None))
    assert diagnosis.bottleneck == "memory"
    assert diagnosis.wants[0] == "fusion"
    assert "roofline" in diagnosis.summary
    assert "DRAM throughput 91.0% of peak >= 80%: near the roofline" in diagnosis.evidence


def test_register_spills_put_launch_bounds_first_and_cite_ptxas() -> None:
    context = naive_context("relu")
    verdict = RECORDED_RELU["recorded"][0]["verdict"]
    kernels = [{**verdict["compile"]["kernels"][0], "registers": 255, "spill_store_bytes": 96,
                "spill_load_bytes": 64}]
    spilled = Measurement(status="passed", time_ms=1.0, metrics=context.measurement.metrics,
                          bottleneck="latency", registers=255, spill_bytes=160,
                          verdict={**verdict, "compile": {**verdict["compile"], "kernels": kernels}})
    diagnosis = RuleJudge().diagnose(NodeContext("relu", context.candidate, spilled, None))
    assert diagnosis.wants[:2] == ("launch_bounds", "occupancy")
    assert "160 bytes of register spills > 0: registers overflow to local memory" in diagnosis.evidence
    ptxas = "relu: 255 registers, 160 bytes spilled, 0 bytes static shared memory (ptxas)"
    assert ptxas in diagnosis.evidence
    assert any(line.startswith("255 registers per thread > 64") for line in diagnosis.evidence)


def test_the_recorded_relu_verdict_shows_its_ptxas_resources() -> None:
    record = RECORDED_RELU["recorded"][0]
    context = naive_context("relu")
    measured = Measurement(status="passed", time_ms=0.8, metrics=context.measurement.metrics,
                           bottleneck="latency", registers=10, verdict=record["verdict"])
    evidence = RuleJudge().diagnose(NodeContext("relu", context.candidate, measured, None)).evidence
    assert "relu: 10 registers, 0 bytes spilled, 0 bytes static shared memory (ptxas)" in evidence


def test_a_rejected_measurement_gives_a_failed_diagnosis_naming_the_guard() -> None:
    context = naive_context("relu")
    rejected = Measurement(status="rejected", guard="wrong_values",
                           message="12 of 268435456 elements differ by more than 1 ulp")
    diagnosis = RuleJudge().diagnose(NodeContext("relu", context.candidate, rejected, None))
    assert diagnosis.bottleneck == "failed"
    assert "wrong_values" in diagnosis.summary and "12 of 268435456" in diagnosis.summary
    assert diagnosis.wants == ()


def test_a_harness_error_is_failed_too_and_says_no_guard_fired() -> None:
    context = naive_context("relu")
    broken = Measurement(status="error", message="ncu not found")
    diagnosis = RuleJudge().diagnose(NodeContext("relu", context.candidate, broken, None))
    assert diagnosis.bottleneck == "failed"
    assert "ncu not found" in diagnosis.summary and "none named" in diagnosis.summary


def test_an_unmeasured_or_unprofiled_node_is_unknown_with_generic_wants() -> None:
    context = naive_context("relu")
    judge = RuleJudge()
    assert judge.diagnose(NodeContext("relu", context.candidate, None, None)).bottleneck == "unknown"
    bare = Measurement(status="passed", time_ms=0.8)
    diagnosis = judge.diagnose(NodeContext("relu", context.candidate, bare, None))
    assert diagnosis.bottleneck == "unknown" and diagnosis.wants


def proposal(*families: str) -> Proposal:
    context = naive_context("relu")
    return Proposal("rewrite:test", "t", "r", context.candidate, families=families)


def test_scores_rank_proposals_by_how_highly_the_diagnosis_wants_their_families() -> None:
    judge = RuleJudge()
    diagnosis = Diagnosis("latency", "s", wants=("vectorize", "unroll", "grid_stride", "restrict"))
    scores = [judge.score(proposal(f), diagnosis) for f in ("vectorize", "unroll", "grid_stride", "restrict")]
    assert scores == sorted(scores, reverse=True) and len(set(scores)) == 4
    unmeasured = evidence_weight(None)  # a rewrite expects nothing: weighed as 1x
    assert unmeasured == pytest.approx(0.5) and scores[0] == pytest.approx(unmeasured)
    unmatched = judge.score(proposal("fusion"), diagnosis)
    assert unmatched == pytest.approx(0.1 * unmeasured) and unmatched < scores[-1]
    assert judge.score(proposal(), diagnosis) == pytest.approx(0.1 * unmeasured)
    # A proposal of several families counts its best-ranked one.
    assert judge.score(proposal("fusion", "unroll"), diagnosis) == scores[1]


def test_a_proposal_measured_faster_elsewhere_outranks_an_unmeasured_one_and_slower_ranks_below() -> None:
    # A skill card's step carries its recorded speed-up; a rewrite carries none. The
    # card's evidence must lift it above the rewrite of the same family, not below.
    judge = RuleJudge()
    diagnosis = Diagnosis("unknown", "s", wants=("tile", "unroll"))
    rewrite = judge.score(proposal("tile"), diagnosis)
    card = Proposal("skill:smem_tile-v1", "t", "r", naive_context("relu").candidate,
                    families=("tile",), expected_speedup=1.5)
    worse = Proposal("skill:smem_tile-v1", "t", "r", naive_context("relu").candidate,
                     families=("tile",), expected_speedup=0.8)
    assert judge.score(worse, diagnosis) < rewrite < judge.score(card, diagnosis)


def test_on_real_profiles_matching_proposals_outscore_the_rest() -> None:
    judge = RuleJudge()
    diagnosis = judge.diagnose(naive_context("softmax"))
    assert judge.score(proposal("parallelism"), diagnosis) > judge.score(proposal("fast_math"), diagnosis)
    assert all(0 < judge.score(proposal(f), diagnosis) <= 1 for f in FAMILIES)


def test_the_rule_judge_proposes_nothing_itself() -> None:
    context = naive_context("relu")
    judge = RuleJudge()
    assert judge.propose(context, judge.diagnose(context)) == []


@pytest.mark.parametrize("task, first", [("sgemm", "tile"), ("conv2d", "tile"), ("softmax", "coalesce"),
                                         ("relu", "vectorize"), ("maxpool3d", "tile")])
def test_without_a_profile_the_family_a_kernel_lifts_to_says_what_it_wants_first(task, first) -> None:
    spec = tasks.get(task)
    candidate = Candidate.from_source_and_plan(spec.naive_source, spec.naive_plan)
    bare = Measurement(status="passed", time_ms=1.0)
    for measured in (None, bare):
        diagnosis = RuleJudge().diagnose(NodeContext(task, candidate, measured, None))
        assert diagnosis.bottleneck == "unknown" and diagnosis.wants[0] == first, diagnosis
        assert "lifts to a" in diagnosis.summary


def test_an_unprofiled_product_puts_a_tile_before_a_block_size() -> None:
    """A 0.4-minute search without profiles on addmm + GELU (3 ms a run, two evaluations)
    tried a block size and ran out before the tile card (2026-12-06, H200)."""
    spec = tasks.get("sgemm")
    candidate = Candidate.from_source_and_plan(spec.naive_source, spec.naive_plan)
    judge = RuleJudge()
    bare = Measurement(status="passed", time_ms=3.0)
    diagnosis = judge.diagnose(NodeContext("sgemm", candidate, bare, None))
    tile = Proposal("skill:skeleton:contraction.smem_register_tile", "t", "r", candidate, families=("tile",),
                    expected_speedup=5.7)
    block = Proposal("tunable", "t", "r", candidate, families=("occupancy", "parallelism"))
    assert judge.score(tile, diagnosis) > judge.score(block, diagnosis)


def test_a_kernel_that_lifts_to_no_family_keeps_the_generic_wants() -> None:
    source = 'extern "C" __global__ void k(float* y) { __shared__ float s[32]; s[threadIdx.x] = 1.0f;' \
             ' __syncthreads(); y[threadIdx.x] = s[31 - threadIdx.x]; }'
    launch = {"kernel": "k", "grid": [1], "block": [32], "args": ["y"]}
    candidate = Candidate.from_source_and_plan(source, {"launches": [launch]})
    diagnosis = RuleJudge().diagnose(NodeContext("relu", candidate, None, None))
    assert "lifts to" not in diagnosis.summary and diagnosis.wants[0] == "vectorize"
