"""The full gate's outputs compared on the GPU first (gpu_compare.py), on a real GPU.

A search's later candidates draw their L1 inputs on the GPU and find their references in
the input cache; with GateOptions(compare_on_gpu=True) their outputs, and the verified
timed runs' outputs, are compared with the harness's own kernels (against the tolerance,
or a task's allowance: sgemm), and only what they do not pass comes to the host. An
honest kernel passes that way; a kernel wrong, unwritten or mutating its input only at
L1, or only in some timed runs, is still rejected, by the guard the host names.
"""

from __future__ import annotations

import pytest

from profiling.harness import tasks
from profiling.harness.candidate import Candidate
from profiling.harness.gate import GateOptions, evaluate

pytestmark = pytest.mark.gpu

SIZES = {"n": 1 << 24}
BIG = 100_000  # the kernels below misbehave only above this many elements: L0 passes
KERNEL = """extern "C" __global__ void relu(const float* x, float* y, int n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { BODY }
}
"""
HONEST = "y[i] = fmaxf(x[i], 0.0f);"
WRONG_AT_L1 = f"y[i] = (n > {BIG} && i == n - 7) ? 1000.0f : fmaxf(x[i], 0.0f);"
SLIGHTLY_WRONG_AT_L1 = f"y[i] = fmaxf(x[i], 0.0f) + ((n > {BIG} && i == 12345) ? 1e-3f : 0.0f);"
UNWRITTEN_AT_L1 = f"if (!(n > {BIG} && i == n - 1)) y[i] = fmaxf(x[i], 0.0f);"
MUTATES_AT_L1 = f"y[i] = fmaxf(x[i], 0.0f); if (n > {BIG} && i == 3) ((float*)x)[i] = 1.0f;"
NAN_AT_L1 = f"y[i] = (n > {BIG} && i == 99) ? __int_as_float(0x7fc00000) : fmaxf(x[i], 0.0f);"
# Wrong in every launch after the L1 checks (a counter kept on the GPU), so only the
# verified timed runs can see it; the check after the timing would too, later.
COUNTED = """__device__ unsigned int calls;
extern "C" __global__ void relu(const float* x, float* y, int n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    bool late = n > BIG_N && calls > L1_CALLS;
    if (i < n) y[i] = late && i == 5 ? -1.0f : fmaxf(x[i], 0.0f);
    __syncthreads();
    if (n > BIG_N && i == 0) atomicAdd(&calls, 1u);
}
"""


def relu(source: str) -> Candidate:
    return Candidate.from_source_and_plan(source, tasks.get("relu").naive_plan)


def gate(candidate: Candidate, cache, **options):
    settings = {"profile": False, "sanitize": (), "l1_sizes": SIZES, "seed": 20261207,
                "input_cache": str(cache), "compare_on_gpu": True, **options}
    return evaluate("relu", candidate, GateOptions(**settings))


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """An input cache a first (honest) gate filled, as a search's root does."""
    folder = tmp_path_factory.mktemp("input-cache")
    first = gate(relu(KERNEL.replace("BODY", HONEST)), folder)
    assert first.status == "passed", (first.guard, first.message[:800])
    return folder


def test_a_later_honest_candidate_is_compared_on_the_gpu_and_passes(cache):
    verdict = gate(relu(KERNEL.replace("BODY", HONEST)), cache)
    assert verdict.status == "passed", (verdict.guard, verdict.message[:800])
    assert "worker_compare_on_gpu" in verdict.stage_seconds, verdict.stage_seconds
    assert verdict.timing.spot_checks == GateOptions().spot_checks
    l1 = [r for r in verdict.correctness if r.level == "L1"]
    assert len(l1) == GateOptions().seeds and all(r.passed for r in l1)
    assert all(r.max_abs_error == 0.0 for r in l1), [r.max_abs_error for r in l1]


@pytest.mark.parametrize(("body", "guard"), [
    (WRONG_AT_L1, "wrong_values"),
    (SLIGHTLY_WRONG_AT_L1, "wrong_values"),
    (UNWRITTEN_AT_L1, "output_unwritten"),
    (MUTATES_AT_L1, "input_mutated"),
    (NAN_AT_L1, "wrong_values"),
])
def test_what_the_gpu_does_not_pass_at_l1_is_named_on_the_host(body, guard, cache):
    verdict = gate(relu(KERNEL.replace("BODY", body)), cache, timing_runs=3, warmup_runs=1, spot_checks=1)
    assert verdict.status == "rejected" and verdict.guard == guard, (verdict.guard, verdict.message[:800])
    assert "L1" in verdict.message and all(r.passed for r in verdict.correctness if r.level == "L0")


def test_a_kernel_wrong_only_in_the_timed_runs_is_caught_by_the_verified_runs(cache):
    source = COUNTED.replace("BIG_N", str(BIG)).replace("L1_CALLS", str(GateOptions().seeds + 1))
    verdict = gate(relu(source), cache)
    assert verdict.status == "rejected" and verdict.guard == "timed_output", \
        (verdict.guard, verdict.message[:800])
    assert all(r.passed for r in verdict.correctness), "only the timed runs were wrong"


# -- a task with an allowance (sgemm: each element's own bound, optiml_within_allowance_f32) --

SGEMM_SIZES = {"M": 512, "N": 512, "K": 512}
SGEMM_OFF_AT_L1 = "C[(long long)row * N + col] = acc + ((M > 300 && row == 7 && col == 9) ? 1.0f : 0.0f);"


def sgemm(last_line: str | None = None) -> Candidate:
    task = tasks.get("sgemm")
    source = task.naive_source
    if last_line is not None:
        source = source.replace("C[(long long)row * N + col] = acc;", last_line)
    return Candidate.from_source_and_plan(source, task.naive_plan)


@pytest.fixture(scope="module")
def sgemm_cache(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sgemm-cache")
    first = gate_sgemm(sgemm(), folder)
    assert first.status == "passed", (first.guard, first.message[:800])
    return folder


def gate_sgemm(candidate: Candidate, cache, **options):
    settings = {"profile": False, "sanitize": (), "l1_sizes": SGEMM_SIZES, "seed": 20261207,
                "input_cache": str(cache), "compare_on_gpu": True, **options}
    return evaluate("sgemm", candidate, GateOptions(**settings))


def test_a_later_honest_sgemm_passes_within_its_allowance_on_the_gpu(sgemm_cache):
    verdict = gate_sgemm(sgemm(), sgemm_cache)
    assert verdict.status == "passed", (verdict.guard, verdict.message[:800])
    assert "worker_compare_on_gpu" in verdict.stage_seconds, verdict.stage_seconds


def test_an_sgemm_off_by_one_at_one_l1_element_is_named_by_the_host(sgemm_cache):
    verdict = gate_sgemm(sgemm(SGEMM_OFF_AT_L1), sgemm_cache, timing_runs=3, warmup_runs=1, spot_checks=1)
    assert verdict.status == "rejected" and verdict.guard == "wrong_values", \
        (verdict.guard, verdict.message[:800])
    assert "(7, 9)" in verdict.message, verdict.message[:800]
