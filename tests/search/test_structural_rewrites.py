"""grid_stride_accumulate and block_per_row: what they generate, where they refuse and why,
that the result compiles with nvcc, and that it computes the task's answer when its
source is run on the CPU (cuda_on_cpu.py: one std::thread per CUDA thread)."""

import shutil
from pathlib import Path

import pytest
from cuda_on_cpu import CpuKernels, inputs_for, mismatch

from profiling.harness import expr, tasks
from profiling.harness.candidate import Candidate
from profiling.harness.compile import compile_candidate
from profiling.harness.gate import check_plan
from search.engine.rewrites import RewriteSource, all_rewrites
from search.engine.types import NodeContext

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
REWRITES = {rewrite.name: rewrite for rewrite in all_rewrites()}


def naive(task: str) -> Candidate:
    spec = tasks.get(task)
    return Candidate.from_source_and_plan(spec.naive_source, spec.naive_plan)


def with_source(task: str, source: str, **plan_changes) -> Candidate:
    plan = {**tasks.get(task).naive_plan, **plan_changes}
    return Candidate.from_source_and_plan(source, plan)


def run(rewrite: str, task: str, candidate: Candidate | None = None):
    context = NodeContext(task=task, candidate=candidate or naive(task), measurement=None, diagnosis=None,
                          tolerance_allows_fast_math=True)
    proposals, refused = RewriteSource((REWRITES[rewrite],)).evaluate(context)
    return (proposals[0] if proposals else None), refused.get(rewrite)


def rewritten(rewrite: str, task: str, candidate: Candidate | None = None) -> Candidate:
    proposal, refusal = run(rewrite, task, candidate)
    assert proposal is not None, refusal
    check_plan(tasks.get(task), proposal.candidate, tasks.get(task).sizes)
    return proposal.candidate


def refusal(rewrite: str, task: str, candidate: Candidate) -> str:
    proposal, reason = run(rewrite, task, candidate)
    assert proposal is None, proposal.diff if proposal else ""
    assert reason
    return reason


# --- grid_stride_accumulate -------------------------------------------------------------------

REDUCE = """extern "C" __global__ void zero_output(float* y) {{
    y[0] = 0.0f;
}}

extern "C" __global__ void block_sum(const float* x, float* y, int n) {{
    __shared__ float partial[BLOCK];
    long long i = {index};
    partial[threadIdx.x] = {load};
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {{
        if (threadIdx.x < stride) {{
            {step}
        }}
        __syncthreads();
    }}
    if (threadIdx.x == 0) {{
        {result}
    }}
}}
"""
REDUCE_PARTS = {
    "index": "(long long)blockIdx.x * blockDim.x + threadIdx.x",
    "load": "(i < n) ? x[i] : 0.0f",
    "step": "partial[threadIdx.x] += partial[threadIdx.x + stride];",
    "result": "atomicAdd(y, partial[0]);",
}


def block_sum(**changes: str) -> Candidate:
    return with_source("reduce_sum", REDUCE.format(**{**REDUCE_PARTS, **changes}))


def test_grid_stride_accumulate_sums_in_a_register_before_the_unchanged_tree():
    source = rewritten("grid_stride_accumulate", "reduce_sum").source
    assert "float thread_sum = 0.0f;" in source
    loop = ("for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;\n"
            "         i += (long long)blockDim.x * gridDim.x) {\n        thread_sum += x[i];\n    }")
    assert loop in source
    assert "partial[threadIdx.x] = thread_sum;\n    __syncthreads();" in source
    assert "(i < n) ? x[i] : 0.0f" not in source
    assert "partial[threadIdx.x] += partial[threadIdx.x + stride];" in source  # the tree stays


def test_grid_stride_accumulate_caps_the_grid_at_one_wave_so_a_thousand_atomics_replace_a_million():
    candidate = rewritten("grid_stride_accumulate", "reduce_sum")
    launch = next(launch for launch in candidate.launches if launch.kernel == "block_sum")
    assert launch.grid == ("min(cdiv(n, BLOCK), 132 * (2048 // BLOCK))",)
    names = {**tasks.get("reduce_sum").sizes, **candidate.tunables}
    assert expr.evaluate_int(naive("reduce_sum").launches[1].grid[0], names) == 2**20
    assert expr.evaluate_int(launch.grid[0], names) == 132 * 8  # blocks, so atomics, at L1
    assert expr.evaluate_int(launch.grid[0], {"n": 1000, "BLOCK": 256}) == 4  # small n: unchanged


def test_grid_stride_accumulate_and_warp_shuffle_reduce_give_the_same_kernel_in_either_order():
    first = rewritten("warp_shuffle_reduce", "reduce_sum", rewritten("grid_stride_accumulate", "reduce_sum"))
    second = rewritten("grid_stride_accumulate", "reduce_sum", rewritten("warp_shuffle_reduce", "reduce_sum"))
    assert first.content_hash() == second.content_hash()
    assert "thread_sum += x[i];" in first.source and "__shfl_down_sync" in first.source


def test_grid_stride_accumulate_accepts_the_hand_written_textbook_kernel():
    assert run("grid_stride_accumulate", "reduce_sum", block_sum())[0] is not None


@pytest.mark.parametrize(("changes", "reason"), [
    ({"load": "(i < n) ? x[i] : 1.0f"}, "out-of-range threads do not load 0, the identity of +"),
    ({"load": "(i < n) ? x[i] * 2.0f : 0.0f"}, "the loaded value is not p[i]"),
    ({"load": "(i + 1 < n) ? x[i] : 0.0f"}, "the load is not guarded by `i < bound`"),
    ({"index": "(long long)blockIdx.x * 2 * blockDim.x + threadIdx.x"},
     "block_sum: no index = blockIdx.x * blockDim.x + threadIdx.x"),
    ({"step": "partial[threadIdx.x] = fmaxf(partial[threadIdx.x], partial[threadIdx.x + stride]);"},
     "the tree combines with fmaxf, not +"),
    ({"result": "y[blockIdx.x] = partial[0];"}, "the reduction's result is not used by"),
    ({"result": "atomicAdd(y, partial[0] + partial[1]);"}, "the reduction's result is not used by"),
    ({"result": "atomicExch(y, partial[0]);"}, "goes to atomicExch, not atomicAdd"),
    ({"result": "atomicAdd(&y[blockIdx.x % 2], partial[0]);"}, "is not a fixed place"),
])
def test_grid_stride_accumulate_refuses_a_block_sum_that_breaks_a_precondition(changes, reason):
    assert reason in refusal("grid_stride_accumulate", "reduce_sum", block_sum(**changes))


def test_grid_stride_accumulate_refuses_a_plan_that_skipped_elements():
    plan = tasks.get("reduce_sum").naive_plan
    launches = [plan["launches"][0], {**plan["launches"][1], "grid": ["cdiv(n, 2 * BLOCK)"]}]
    candidate = with_source("reduce_sum", tasks.get("reduce_sum").naive_source, launches=launches)
    assert "starts fewer threads than elements" in refusal("grid_stride_accumulate", "reduce_sum", candidate)


@pytest.mark.parametrize(("task", "reason"), [
    ("relu", "relu declares no __shared__ array before its index: not a block reduction"),
    ("sgemm", "sgemm_naive declares no __shared__ array before its index"),
    ("softmax", "softmax_rows declares no __shared__ array"),
])
def test_grid_stride_accumulate_refuses_kernels_that_are_not_block_sums(task, reason):
    assert reason in refusal("grid_stride_accumulate", task, naive(task))


# --- block_per_row ----------------------------------------------------------------------------

LOOP = "for (int j = threadIdx.x; j < {n}; j += blockDim.x) {{"


def test_block_per_row_gives_softmax_a_block_per_row_and_combines_each_accumulator_after_its_loop():
    candidate = rewritten("block_per_row", "softmax")
    source = candidate.source
    assert "long long row = blockIdx.x;" in source and "threadIdx.x;\n    if (row >= M)" not in source
    assert source.count(LOOP.format(n="N")) == 3 and "j = 0" not in source
    assert source.index("row_max = block_reduce_max_float(row_max);") < source.index("float sum = 0.0f;")
    assert source.index("sum = block_reduce_sum_float(sum);") < source.index("out[j] = expf")
    assert 'static_assert(BLOCK >= 32 && BLOCK % 32 == 0 && BLOCK <= 1024' in source
    assert candidate.launches[0].grid == ("M",) and candidate.launches[0].block == ("BLOCK",)
    assert candidate.tunables == {"BLOCK": 256}


def test_block_per_row_emits_each_helper_once_before_the_kernel():
    source = rewritten("block_per_row", "layernorm").source
    assert source.count("__device__ __forceinline__ float block_reduce_sum_float(float value)") == 1
    assert source.count("= block_reduce_sum_float(") == 2  # the sum and the squares
    assert "block_reduce_max_float" not in source
    assert source.index("block_reduce_sum_float(float value)") < source.index("layernorm_rows(")
    assert "__shared__ float warp_results[32];" in source


def test_block_per_row_has_one_thread_write_the_cross_entropy_loss_read_through_the_label():
    source = rewritten("block_per_row", "cross_entropy").source
    assert ("if (threadIdx.x == 0) {  // one thread writes the row's result\n"
            "        loss[row] = row_max + logf(sum) - z[labels[row]];\n    }") in source
    assert source.count(LOOP.format(n="C")) == 2


def test_block_per_row_rewrites_only_the_softmax_of_self_attention_and_keeps_the_shared_block_size():
    candidate = rewritten("block_per_row", "self_attention")
    grids = {launch.kernel: launch.grid for launch in candidate.launches}
    assert grids["softmax_rows_inplace"] == ("(B * H * S)",)
    assert grids["attention_scores"] == ("cdiv(B * H * S * S, BLOCK)",)
    assert grids["attention_output"] == ("cdiv(B * H * S * D, BLOCK)",)
    assert candidate.source.count(LOOP.format(n="S")) == 3
    assert "for (int d = 0; d < D; ++d)" in candidate.source  # attention_scores untouched


SOFTMAX = """extern "C" __global__ void softmax_rows(const float* x, float* y, int M, int N) {{
    long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) {{
        return;
    }}
    const float* in = x + row * N;
    float* out = y + row * N;{extra}
    float row_max = -INFINITY;
    for (int j = 0; j < N; ++j) {{
        {max_step}
    }}
    float sum = {sum_init};
    for (int j = 0; j < N; ++j) {{
        {sum_step}
    }}
    for (int j = 0; j < N; ++j) {{
        {write}
    }}
}}
"""
SOFTMAX_PARTS = {
    "extra": "",
    "max_step": "row_max = fmaxf(row_max, in[j]);",
    "sum_init": "0.0f",
    "sum_step": "sum += expf(in[j] - row_max);",
    "write": "out[j] = expf(in[j] - row_max) / sum;",
}


def softmax(**changes: str) -> Candidate:
    return with_source("softmax", SOFTMAX.format(**{**SOFTMAX_PARTS, **changes}))


def test_block_per_row_accepts_the_hand_written_softmax():
    assert run("block_per_row", "softmax", softmax())[0] is not None


@pytest.mark.parametrize(("changes", "reason"), [
    ({"max_step": "row_max = fmaxf(row_max, in[j]);\n        out[j] = row_max;"},
     "row_max is read inside its loop on line 9, where each thread would hold only its part of it"),
    ({"sum_init": "1.0f"}, "sum starts at 1.0f, not 0: every thread of the row would add it"),
    ({"sum_step": "sum += expf(in[j + 1] - row_max);"}, "accesses in[j + 1], not indexed by the loop's j"),
    ({"write": "out[0] = expf(in[j] - row_max) / sum;"}, "accesses out[0], not indexed by the loop's j"),
    ({"sum_step": "sum = sum * expf(in[j] - row_max);"},
     "changes sum, declared outside the loop, other than as a top-level `sum += e`"),
    ({"write": "out[j] = expf(in[j] - row_max) / sum;\n        sum += 1.0f;"},
     "sum is changed 2 times; an accumulator changes in one statement"),
    ({"write": "out[j] = threadIdx.x;"}, "line 17 reads threadIdx; only the row index may"),
    ({"write": "if (in[j] > 0.0f) break;\n        out[j] = 0.0f;"}, "has a break statement"),
    ({"extra": "\n    float first = y[row * N];"}, "uses y, whose buffer a loop writes through out[j]"),
    ({"extra": "\n    y[row * N] = 0.0f;"},
     "the loop on line 10 follows the row's result written on line 8; the result must come after the last"),
    ({"extra": "\n    row_max_seen: ;"}, "line 8 has a labeled statement"),
    ({"sum_step": "{ float sum = 1.0f; }\n        sum += expf(in[j] - row_max);"},
     "the loop on line 13 declares sum again, hiding the outer one"),
    ({"sum_step": "sum += expf(in[j] - row_max);\n        if (sum > 1.0f) sum = 1.0f;"},
     "changes sum, declared outside the loop, other than as a top-level"),
])
def test_block_per_row_refuses_a_row_kernel_that_breaks_a_precondition(changes, reason):
    assert reason in refusal("block_per_row", "softmax", softmax(**changes))


def test_block_per_row_refuses_a_row_loop_guarded_by_an_if_instead_of_an_early_return():
    source = """extern "C" __global__ void softmax_rows(const float* x, float* y, int M, int N) {
    long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M) {
        float total = 0.0f;
        for (int j = 0; j < N; ++j) {
            total += x[row * N + j];
        }
        y[row * N] = total;
    }
}
"""
    reason = refusal("block_per_row", "softmax", with_source("softmax", source))
    assert "softmax_rows: the kernel does not start with row and `if (row >= rows) return;`" in reason


def test_block_per_row_refuses_blocks_that_are_not_whole_warps():
    launch = {**tasks.get("softmax").naive_plan["launches"][0], "grid": ["cdiv(M, 48)"], "block": ["48"]}
    candidate = with_source("softmax", tasks.get("softmax").naive_source, launches=[launch])
    reason = refusal("block_per_row", "softmax", candidate)
    assert "uses blocks of 48 threads, not whole warps of 32" in reason


def test_block_per_row_refuses_rows_shorter_than_a_block_at_the_l1_sizes():
    plan = tasks.get("self_attention").naive_plan
    candidate = with_source("self_attention", tasks.get("self_attention").naive_source,
                            launches=[plan["launches"][0]])
    assert "runs 64 times at the L1 sizes, fewer than the 256 threads" in refusal(
        "block_per_row", "self_attention", candidate)


@pytest.mark.parametrize(("task", "reason"), [
    ("relu", "relu: the kernel does not start with i and `if (i >= rows) return;`"),
    ("sgemm", "sgemm_naive: no 64-bit index"),
    ("topk", "topk_rows: line 17 accesses in[j], not indexed by the loop's t alone"),
    ("reduce_sum", "block_sum: the statement after i's declaration is not an if"),
])
def test_block_per_row_refuses_kernels_that_are_not_thread_per_row(task, reason):
    assert reason in refusal("block_per_row", task, naive(task))


# --- nvcc ---------------------------------------------------------------------------------------


@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.parametrize(("rewrites", "task"), [
    (("grid_stride_accumulate", "warp_shuffle_reduce"), "reduce_sum"),
    (("warp_shuffle_reduce", "grid_stride_accumulate"), "reduce_sum"),
    (("restrict", "launch_bounds", "block_per_row"), "softmax"),
    (("block_per_row", "restrict", "launch_bounds"), "cross_entropy"),
])
def test_the_new_rewrites_compose_with_the_others_and_compile(rewrites, task, tmp_path):
    candidate = naive(task)
    for name in rewrites:
        candidate = rewritten(name, task, candidate)
    report = compile_candidate(candidate, cache_dir=tmp_path)
    assert report.ok, report.log[-2000:]


@pytest.mark.nvcc
@needs_nvcc
def test_the_static_assert_stops_a_later_tuning_step_from_a_block_of_partial_warps(tmp_path):
    candidate = rewritten("block_per_row", "softmax")
    partial = Candidate.from_dict({**candidate.to_dict(), "tunables": {"BLOCK": 48}})
    report = compile_candidate(partial, cache_dir=tmp_path)
    assert not report.ok and "block_per_row needs whole warps" in report.log


# --- the generated source, run on the CPU -----------------------------------------------------


@needs_gxx
@pytest.mark.parametrize("task", ["softmax", "layernorm", "cross_entropy"])
def test_block_per_row_computes_the_reference_at_every_l0_size_on_the_cpu(task, tmp_path):
    spec = tasks.get(task)
    kernels = CpuKernels(rewritten("block_per_row", task), tmp_path)
    for sizes in spec.l0_sizes:
        inputs = inputs_for(spec, sizes)
        assert mismatch(spec, sizes, inputs, kernels.run(spec, sizes, inputs)) is None, sizes


@needs_gxx
def test_block_per_row_self_attention_computes_the_reference_on_the_cpu(tmp_path):
    spec, sizes = tasks.get("self_attention"), {"B": 2, "H": 3, "S": 17, "D": 64}
    inputs = inputs_for(spec, sizes)
    outputs = CpuKernels(rewritten("block_per_row", "self_attention"), tmp_path).run(spec, sizes, inputs)
    assert mismatch(spec, sizes, inputs, outputs) is None


@needs_gxx
def test_the_cpu_runner_notices_a_row_sum_that_is_not_combined_across_the_block(tmp_path):
    broken = rewritten("block_per_row", "softmax")
    broken = Candidate.from_dict({**broken.to_dict(), "source": broken.source.replace(
        "sum = block_reduce_sum_float(sum);", "")})
    spec, sizes = tasks.get("softmax"), {"M": 7, "N": 1000}
    inputs = inputs_for(spec, sizes)
    assert mismatch(spec, sizes, inputs, CpuKernels(broken, tmp_path).run(spec, sizes, inputs))


@needs_gxx
@pytest.mark.parametrize("order", [("grid_stride_accumulate",),
                                   ("grid_stride_accumulate", "warp_shuffle_reduce"),
                                   ("warp_shuffle_reduce", "grid_stride_accumulate")])
def test_grid_stride_accumulate_sums_every_element_once_whatever_the_grid_on_the_cpu(order, tmp_path):
    spec, candidate = tasks.get("reduce_sum"), naive("reduce_sum")
    for name in order:
        candidate = rewritten(name, "reduce_sum", candidate)
    kernels = CpuKernels(candidate, Path(tmp_path))
    for n in (1, 1000, 4099):
        inputs = inputs_for(spec, {"n": n})
        for grid in (None, 1, 3):  # the plan's grid, and grids far smaller than the data
            outputs = kernels.run(spec, {"n": n}, inputs, grids={"block_sum": grid} if grid else None)
            assert mismatch(spec, {"n": n}, inputs, outputs) is None, (n, grid)
