"""vectorize_rows: float4 in the loops a block strides over a row. What it generates, where
it refuses and why, that the result compiles with nvcc, and that it computes the task's
answer at every L0 size (aligned rows and odd ones) when run on the CPU."""

import shutil

import pytest
from cuda_on_cpu import CpuKernels, inputs_for, mismatch
from test_structural_rewrites import naive, refusal, rewritten, with_source

from profiling.harness import tasks
from profiling.harness.compile import compile_candidate

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
ROW_TASKS = ["softmax", "layernorm", "cross_entropy"]


def rows_then_vectors(task: str):
    return rewritten("vectorize_rows", task, rewritten("block_per_row", task))


def test_the_thread_per_row_kernels_have_no_block_strided_loop_to_vectorise():
    reason = refusal("vectorize_rows", "softmax", naive("softmax"))
    assert "does not start at threadIdx.x" in reason


@pytest.mark.parametrize(("task", "loops"), [("softmax", 3), ("layernorm", 3), ("cross_entropy", 2)])
def test_every_row_loop_block_per_row_left_gets_a_float4_path_and_keeps_the_original_beside_it(task, loops):
    source = rows_then_vectors(task).source
    assert source.count("for (int vec_c = threadIdx.x; vec_c < vec_n; vec_c += blockDim.x)") == loops
    assert source.count("for (int j = 4 * vec_n + threadIdx.x; j < ") == loops  # the columns past 4 k
    assert source.count("} else {") == loops  # an unaligned row: the loop as it was


def test_layernorm_reads_gamma_and_beta_as_float4_and_writes_the_row_as_one():
    source = rows_then_vectors("layernorm").source
    for pointer in ("in", "gamma", "beta"):
        assert f"const float4 {pointer}_f4 = reinterpret_cast<const float4*>({pointer})[vec_c];" in source
    assert "reinterpret_cast<float4*>(out)[vec_c] = out_f4;" in source
    assert "out_f4.w = (in_f4.w - mean) * inv_std * gamma_f4.w + beta_f4.w;" in source


HAND_WRITTEN = """extern "C" __global__ void scale_rows(const float* x, float* y, int M, int N) {{
    long long row = blockIdx.x;
    if (row >= M) {{
        return;
    }}
    for (int c = threadIdx.x; c < N; c += blockDim.x) {{
        {work}
    }}
}}
"""


def row_plan(source: str):
    return with_source("softmax", source, launches=[{"kernel": "scale_rows", "grid": ["M"], "block": [128],
                                                     "args": ["x", "y", "M", "N"]}])


def hand_written(work: str):
    return row_plan(HAND_WRITTEN.format(work=work))


def test_a_hand_written_row_loop_indexed_from_the_matrix_start_reads_its_row_from_the_offset():
    child = rewritten("vectorize_rows", "softmax", hand_written("y[row * N + c] = 2.0f * x[row * N + c];"))
    assert "reinterpret_cast<const float4*>((x + (row * N)))[vec_c]" in child.source
    assert "reinterpret_cast<float4*>((y + (row * N)))[vec_c] = y_f4;" in child.source


@pytest.mark.parametrize(("work", "reason"), [
    ("y[row * N + c] = x[2 * c];", "is not <float pointer>[c] or [offset + c]"),
    ("y[row * N + c] = x[row * N + c] + x[c];", "x is used at two offsets"),
    ("y[row * N + c] = x[row * N + c] * threadIdx.x;", "it reads threadIdx"),
    ("y[row * N + c] = x[row * N + c] + c;", "c is used other than in p[c]"),
    ("atomicAdd(y, x[row * N + c]);", "it calls atomicAdd"),
    ("y[row * N + c] = x[row * N + c]; N = N - 1;", "changes inside the loop"),
    ("y[row * N + c] = *(&x[row * N + c]);", "has its address taken"),
])
def test_vectorize_rows_refuses_a_loop_whose_columns_could_not_move_between_threads(work, reason):
    assert reason in refusal("vectorize_rows", "softmax", hand_written(work))


def test_a_row_written_in_one_loop_and_read_in_the_next_is_refused_the_columns_would_race():
    source = HAND_WRITTEN.format(work="y[row * N + c] = x[row * N + c];").replace(
        "    }\n}\n", "    }\n    for (int c = threadIdx.x; c < N; c += blockDim.x) {\n"
        "        y[row * N + c] = y[row * N + c] * 2.0f;\n    }\n}\n")
    candidate = row_plan(source)
    assert "used elsewhere in the kernel" in refusal("vectorize_rows", "softmax", candidate)


def test_vectorize_rows_applies_once():
    assert "already uses the name" in refusal("vectorize_rows", "softmax", rows_then_vectors("softmax"))


@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.parametrize("task", ROW_TASKS)
def test_the_vectorised_rows_compile_with_restrict_and_fast_math(task, tmp_path):
    candidate = naive(task)
    for name in ("restrict", "block_per_row", "vectorize_rows", "fast_math"):
        candidate = rewritten(name, task, candidate)
    assert "__restrict__" in candidate.source and "vec_c" in candidate.source
    report = compile_candidate(candidate, cache_dir=tmp_path)
    assert report.ok, report.log[-2000:]


@needs_gxx
@pytest.mark.parametrize("task", ROW_TASKS)
def test_the_vectorised_rows_compute_the_reference_at_every_l0_size_on_the_cpu(task, tmp_path):
    spec = tasks.get(task)
    kernels = CpuKernels(rows_then_vectors(task), tmp_path)
    for sizes in spec.l0_sizes:  # rows of 1000 columns are aligned; 1, 17, 33, 8191, ... are not
        inputs = inputs_for(spec, sizes)
        assert mismatch(spec, sizes, inputs, kernels.run(spec, sizes, inputs)) is None, sizes


@needs_gxx
def test_the_cpu_runner_notices_a_float4_path_that_drops_a_lane(tmp_path):
    broken = rows_then_vectors("softmax")
    source = broken.source.replace("out_f4.w = ", "out_f4.z = ", 1)
    broken = broken.__class__.from_dict({**broken.to_dict(), "source": source})
    spec, sizes = tasks.get("softmax"), {"M": 7, "N": 1000}
    inputs = inputs_for(spec, sizes)
    assert mismatch(spec, sizes, inputs, CpuKernels(broken, tmp_path).run(spec, sizes, inputs))
