"""Counter-examples: each rewrite refuses, with a stated reason, where its precondition fails.

The kernels are small variations on ReLU, run against the relu task (tensors x, y; size n),
so that the plan is valid and only the property under test differs.
"""

import shutil

import pytest

from profiling.harness.candidate import Candidate
from profiling.harness.compile import compile_candidate
from search.engine.rewrites import RewriteSource, all_rewrites
from search.engine.types import NodeContext

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
REWRITES = {rewrite.name: rewrite for rewrite in all_rewrites()}
INDEX = "long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;"


def kernel(body: str, params: str = "const float* x, float* y, int n", name: str = "k") -> str:
    return f'extern "C" __global__ void {name}({params}) {{\n    {body}\n}}\n'


def candidate(
    source: str,
    *,
    args=("x", "y", "n"),
    grid="cdiv(n, BLOCK)",
    block="BLOCK",
    tunables=None,
    launches=None,
    options=(),
) -> Candidate:
    launch = {"kernel": "k", "grid": [grid], "block": [block], "args": list(args)}
    return Candidate.from_dict(
        {
            "source": source,
            "launches": launches or [launch],
            "tunables": tunables or {"BLOCK": 256},
            "compile_options": list(options),
        }
    )


def run(rewrite: str, cand: Candidate, fast_math: bool = True, task: str = "relu"):
    context = NodeContext(
        task=task, candidate=cand, measurement=None, diagnosis=None, tolerance_allows_fast_math=fast_math
    )
    proposals, refused = RewriteSource((REWRITES[rewrite],)).evaluate(context)
    return (proposals[0] if proposals else None), refused.get(rewrite)


def refusal(rewrite: str, cand: Candidate, **kwargs) -> str:
    proposal, reason = run(rewrite, cand, **kwargs)
    assert proposal is None, proposal.diff if proposal else ""
    assert reason
    return reason


# --- restrict ---------------------------------------------------------------------------------


def test_restrict_does_not_make_a_pointer_const_when_the_kernel_writes_through_it():
    source = kernel(f"{INDEX}\n    if (i < n) {{ y[i] = x[i]; x[i] = 0.0f; }}", "float* x, float* y, int n")
    assert "k: x is written through (line 3: x[i] = 0.0f)" in refusal("restrict", candidate(source))


def test_restrict_follows_pointers_derived_from_a_parameter():
    source = kernel(
        f"{INDEX}\n    auto p = x + i;\n    if (i < n) {{ y[i] = *p; *p = 1.0f; }}",
        "float* x, float* y, int n",
    )
    assert "x is written through (line 4: *p = 1.0f)" in refusal("restrict", candidate(source))


def test_restrict_refuses_a_derived_pointer_that_is_not_const():
    source = kernel(
        f"{INDEX}\n    float* p = x + i;\n    if (i < n) {{ y[i] = *p; }}", "float* x, float* y, int n"
    )
    assert "x is copied into p, which is not declared const" in refusal("restrict", candidate(source))


def test_restrict_refuses_a_pointer_handed_to_an_atomic():
    source = kernel(
        f"{INDEX}\n    if (i < n) {{ atomicAdd(&x[0], 1.0f); y[i] = 0.0f; }}", "float* x, float* y, int n"
    )
    assert "x is passed to atomicAdd" in refusal("restrict", candidate(source))


def test_restrict_refuses_a_cast_that_could_remove_const():
    source = kernel(f"{INDEX}\n    float* w = (float*)x;\n    if (i < n) {{ y[i] = w[i]; }}")
    assert "x is used in a cast expression" in refusal("restrict", candidate(source))


def test_restrict_refuses_when_the_plan_passes_one_buffer_to_two_pointers():
    source = kernel(f"{INDEX}\n    if (i < n) {{ y[i] = fmaxf(x[i], 0.0f); }}")
    assert "passes x as both x and y" in refusal("restrict", candidate(source, args=("x", "x", "n")))


def test_restrict_skips_pointers_that_are_already_restrict():
    source = kernel(
        f"{INDEX}\n    if (i < n) {{ y[i] = x[i]; }}", "const float* __restrict__ x, float* y, int n"
    )
    assert "k: x is already __restrict__" in refusal("restrict", candidate(source))


def test_restrict_refuses_an_element_handed_to_a_function_of_the_file_that_may_take_a_reference():
    helper = "__device__ void store(float& r) { r = 1.0f; }\n"
    source = helper + kernel(
        f"{INDEX}\n    if (i < n) {{ store(x[i]); y[i] = 0.0f; }}", "float* x, float* y, int n"
    )
    assert "x is passed to store (line 4), which might take it by reference" in refusal(
        "restrict", candidate(source)
    )


def test_restrict_and_launch_bounds_leave_a_kernel_with_a_separate_declaration_alone():
    prototype = 'extern "C" __global__ void k(const float* x, float* y, int n);\n'
    source = prototype + kernel(f"{INDEX}\n    if (i < n) {{ y[i] = x[i]; }}")
    assert "k is also declared separately" in refusal("restrict", candidate(source))
    assert "k is also declared separately" in refusal("launch_bounds", candidate(source))


# --- unroll -----------------------------------------------------------------------------------


def test_unroll_leaves_a_loop_with_a_runtime_bound_alone():
    source = kernel(
        f"{INDEX}\n    float s = 0.0f;\n    for (int j = 0; j < n; ++j) {{ s += x[j]; }}\n"
        "    if (i < n) { y[i] = s; }"
    )
    assert "its bound 'n' is not a compile-time constant" in refusal("unroll", candidate(source))


def test_unroll_accepts_a_bound_named_by_a_tunable_or_a_define():
    loop = "for (int j = 0; j < {}; ++j) {{ s += x[j]; }}"
    body = (
        f"{INDEX}\n    float s = 0.0f;\n    {loop.format('UNROLL')}\n    {loop.format('TAPS')}\n    y[0] = s;"
    )
    source = "#define TAPS 5\n" + kernel(body)
    proposal, _ = run("unroll", candidate(source, tunables={"BLOCK": 256, "UNROLL": 4}))
    assert proposal.candidate.source.count("#pragma unroll\n    for (int j = 0;") == 2
    assert "(4 iterations)" in proposal.rationale and "(5 iterations)" in proposal.rationale


def test_unroll_does_not_add_a_second_pragma_or_touch_a_loop_that_changes_its_counter():
    source = kernel(
        "float s = 0.0f;\n    #pragma unroll 2\n    for (int j = 0; j < 8; ++j) { s += x[j]; }\n"
        "    for (int j = 0; j < 8; ++j) { s += x[j]; j += 1; }\n    y[0] = s;"
    )
    reason = refusal("unroll", candidate(source))
    assert "it already has an unroll pragma" in reason and "its body changes j" in reason


# --- launch_bounds ----------------------------------------------------------------------------


def test_launch_bounds_refuses_a_block_size_that_depends_on_the_task_sizes():
    source = kernel("y[0] = x[0];")
    reason = refusal("launch_bounds", candidate(source, block="n", grid=1))
    assert "block size n depends on the task's sizes" in reason


def test_launch_bounds_refuses_a_kernel_launched_with_two_block_sizes():
    source = kernel("y[0] = x[0];")
    launches = [{"kernel": "k", "grid": [1], "block": [b], "args": ["x", "y", "n"]} for b in ("BLOCK", 128)]
    assert "launched with different block sizes" in refusal(
        "launch_bounds", candidate(source, launches=launches)
    )


def test_launch_bounds_is_not_added_twice():
    source = kernel("y[0] = x[0];").replace("void k(", "void __launch_bounds__(BLOCK) k(")
    assert "k already has __launch_bounds__" in refusal("launch_bounds", candidate(source))


# --- grid_stride ------------------------------------------------------------------------------


def test_grid_stride_refuses_a_body_with_a_barrier():
    source = kernel(f"{INDEX}\n    if (i < n) {{ y[i] = x[i]; __syncthreads(); }}")
    assert "the work calls __syncthreads" in refusal("grid_stride", candidate(source))


def test_grid_stride_refuses_a_body_that_returns():
    source = kernel(f"{INDEX}\n    if (i < n) {{ if (x[i] < 0.0f) {{ return; }} y[i] = x[i]; }}")
    assert "the work has a return statement" in refusal("grid_stride", candidate(source))


def test_grid_stride_refuses_a_body_that_carries_state_between_elements():
    source = kernel(f"float acc = 0.0f;\n    {INDEX}\n    if (i < n) {{ acc += x[i]; y[i] = acc; }}")
    assert "the work changes acc, declared outside it" in refusal("grid_stride", candidate(source))


def test_grid_stride_refuses_a_body_that_reads_the_thread_index():
    source = kernel(f"{INDEX}\n    if (i < n) {{ y[i] = x[i] + threadIdx.x; }}")
    assert "the work reads threadIdx" in refusal("grid_stride", candidate(source))


def test_grid_stride_refuses_a_plan_whose_grid_skips_elements_today():
    source = kernel(f"{INDEX}\n    if (i < n) {{ y[i] = x[i]; }}")
    reason = refusal("grid_stride", candidate(source, grid="max(1, cdiv(n, BLOCK) // 2)"))
    assert "threads for" in reason and "covering them all would change the result" in reason


def test_grid_stride_refuses_a_32_bit_index_that_could_overflow_when_stepping():
    source = kernel("int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) { y[i] = x[i]; }")
    assert "no 64-bit index" in refusal("grid_stride", candidate(source))


def test_grid_stride_refuses_a_body_calling_a_function_of_the_file_it_cannot_see_into():
    helper = "__device__ float shifted(float v) { return v + threadIdx.x; }\n"
    source = helper + kernel(f"{INDEX}\n    if (i < n) {{ y[i] = shifted(x[i]); }}")
    assert "the work calls shifted, defined in this file" in refusal("grid_stride", candidate(source))


# --- vectorize_float4 -------------------------------------------------------------------------


def test_vectorize_refuses_a_body_that_reads_a_neighbour():
    source = kernel(f"{INDEX}\n    if (i < n) {{ y[i] = x[i] + x[i + 1]; }}")
    assert "x[i + 1] is not <float pointer>[i]" in refusal("vectorize_float4", candidate(source))


def test_vectorize_refuses_pointers_that_are_not_float():
    source = kernel(f"{INDEX}\n    if (i < n) {{ y[i] = x[i]; }}", "const int* x, float* y, int n")
    assert "x[i] is not <float pointer>[i]" in refusal("vectorize_float4", candidate(source))


def test_vectorize_refuses_an_in_place_launch_where_loads_and_stores_alias():
    source = kernel(f"{INDEX}\n    if (i < n) {{ y[i] = fmaxf(x[i], 0.0f); }}")
    assert "passes x as both x and y" in refusal("vectorize_float4", candidate(source, args=("x", "x", "n")))


def test_vectorize_refuses_control_flow_in_the_body():
    source = kernel(f"{INDEX}\n    if (i < n) {{ if (x[i] > 0.0f) {{ y[i] = x[i]; }} }}")
    assert "the work has a if statement, not straight-line code" in refusal(
        "vectorize_float4", candidate(source)
    )


def test_vectorize_refuses_an_element_whose_address_is_taken():
    source = kernel(f"{INDEX}\n    if (i < n) {{ float* q = &y[i]; *q = x[i]; }}")
    assert "y[i] has its address taken" in refusal("vectorize_float4", candidate(source))


def test_vectorize_refuses_a_pointer_the_kernel_moves():
    source = kernel(f"x += 1;\n    {INDEX}\n    if (i < n) {{ y[i] = x[i]; }}")
    assert "moves the pointer x, so its alignment is unknown" in refusal(
        "vectorize_float4", candidate(source)
    )


# --- warp_shuffle_reduce ----------------------------------------------------------------------


def reduction(
    step: str, after: str = "if (threadIdx.x == 0) { atomicAdd(y, partial[0]); }", tid: str = "threadIdx.x"
) -> str:
    return kernel(
        "__shared__ float partial[BLOCK];\n"
        f"    {INDEX}\n    partial[threadIdx.x] = (i < n) ? x[i] : 0.0f;\n    __syncthreads();\n"
        f"    for (int s = blockDim.x / 2; s > 0; s >>= 1) {{\n        if ({tid} < s) {{ {step} }}\n"
        f"        __syncthreads();\n    }}\n    {after}"
    )


SUM = "partial[threadIdx.x] += partial[threadIdx.x + s];"


def test_warp_reduce_refuses_a_block_that_is_not_a_power_of_two():
    reason = refusal("warp_shuffle_reduce", candidate(reduction(SUM), tunables={"BLOCK": 96}))
    assert "blocks of 96 threads, not a power of two >= 64" in reason


def test_warp_reduce_refuses_a_block_smaller_than_two_warps():
    reason = refusal("warp_shuffle_reduce", candidate(reduction(SUM), tunables={"BLOCK": 32}))
    assert "blocks of 32 threads" in reason


def test_warp_reduce_refuses_an_operation_other_than_sum_or_max():
    step = "partial[threadIdx.x] *= partial[threadIdx.x + s];"
    assert "its step is not a[tid] += a[tid + s]" in refusal(
        "warp_shuffle_reduce", candidate(reduction(step))
    )


def test_warp_reduce_refuses_when_other_slots_are_read_after_the_loop():
    source = reduction(SUM, after="if (threadIdx.x == 0) { atomicAdd(y, partial[1]); }")
    assert "partial is used after the loop other than as partial[0]" in refusal(
        "warp_shuffle_reduce", candidate(source)
    )


@pytest.mark.nvcc
@needs_nvcc
def test_warp_reduce_rewrites_a_max_reduction_on_a_local_thread_index(tmp_path):
    step = "partial[tid] = fmaxf(partial[tid], partial[tid + s]);"
    source = reduction(step, tid="tid").replace("__shared__", "unsigned tid = threadIdx.x;\n    __shared__")
    proposal, reason = run("warp_shuffle_reduce", candidate(source))
    assert proposal is not None, reason
    assert "warp_value = fmaxf(warp_value, __shfl_down_sync(0xffffffffu, warp_value, offset));" in (
        proposal.candidate.source
    )
    assert compile_candidate(proposal.candidate, cache_dir=tmp_path).ok


# --- fast_math --------------------------------------------------------------------------------

EXP = kernel(f"{INDEX}\n    if (i < n) {{ y[i] = expf(x[i]) / 2.0f; }}")


def test_fast_math_needs_the_tolerance_to_allow_it():
    assert "tolerance does not allow" in refusal("fast_math", candidate(EXP), fast_math=False)


def test_fast_math_needs_something_it_would_change():
    source = kernel(f"{INDEX}\n    if (i < n) {{ y[i] = fmaxf(x[i], 0.0f); }}")
    assert "no transcendental function" in refusal("fast_math", candidate(source))


def test_fast_math_is_not_added_twice():
    assert "already on" in refusal("fast_math", candidate(EXP, options=("--use_fast_math",)))


def test_fast_math_names_what_it_changes():
    proposal, _ = run("fast_math", candidate(EXP))
    assert "expf (1)" in proposal.rationale and "float division (1)" in proposal.rationale
    assert proposal.candidate.compile_options == ("--use_fast_math",)
