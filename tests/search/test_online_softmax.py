"""online_softmax: a row's maximum and sum of exponentials in one pass. Where it applies
(thread per row, and block per row with the pair combined across the block), where it
refuses and why, that it compiles, and that it computes the reference at every L0 size on
the CPU, alone and with block_per_row and vectorize_rows after or before it."""

import shutil

import pytest
from cuda_on_cpu import CpuKernels, inputs_for, mismatch
from test_structural_rewrites import naive, refusal, rewritten, with_source

from profiling.harness import tasks
from profiling.harness.compile import compile_candidate

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
ORDERS = [("online_softmax",), ("block_per_row", "online_softmax"),
          ("block_per_row", "online_softmax", "vectorize_rows"), ("block_per_row", "vectorize_rows")]


def after(task: str, names: tuple[str, ...]):
    candidate = naive(task)
    for name in names:
        candidate = rewritten(name, task, candidate)
    return candidate


def test_softmax_reads_its_row_twice_instead_of_three_times():
    source = after("softmax", ("online_softmax",)).source
    assert source.count("for (int j = 0; j < N; ++j)") == 2
    assert "sum = (online_m == -INFINITY) ? 0.0f" in source
    assert source.index("float sum = 0.0f;") < source.index("for (int j = 0; j < N; ++j)")


def test_after_block_per_row_the_pair_is_combined_as_a_pair():
    source = after("cross_entropy", ("block_per_row", "online_softmax")).source
    pair = source.index("const float online_all = block_reduce_max_float(row_max);")
    assert pair < source.index("sum = (row_max == -INFINITY) ? 0.0f : sum * expf(row_max - online_all);") \
        < source.index("sum = block_reduce_sum_float(sum);")
    assert source.count("block_reduce_max_float(row_max)") == 1


SOFTMAX = """extern "C" __global__ void softmax_rows(const float* x, float* y, int M, int N) {{
    long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) {{
        return;
    }}
    float m = {start};
    for (int j = 0; j < N; ++j) {{
        m = fmaxf(m, {first});
    }}
    float s = 0.0f;{between}
    for (int j = 0; j < {bound}; ++j) {{
        s += expf({second} - m);
    }}
    for (int j = 0; j < N; ++j) {{
        y[row * N + j] = expf(x[row * N + j] - m) / s;
    }}
}}
"""
PARTS = {"start": "-INFINITY", "first": "x[row * N + j]", "second": "x[row * N + j]", "between": "",
         "bound": "N"}


def written(**changes: str):
    return with_source("softmax", SOFTMAX.format(**{**PARTS, **changes}))


def test_a_hand_written_two_pass_softmax_is_fused():
    source = rewritten("online_softmax", "softmax", written()).source
    assert "const float online_v = x[row * N + j];" in source


@pytest.mark.parametrize(("changes", "reason"), [
    ({"second": "2.0f * x[row * N + j]"}, "the sum's exponent reads"),
    ({"bound": "N - 1"}, "over the same columns"),
    ({"between": "\n    m = m * 0.5f;"}, "more than s's declaration"),
    ({"start": "0.0f"}, "no loop keeps a running maximum"),
    ({"first": "x[atomicAdd((int*)y, 0) + j]", "second": "x[atomicAdd((int*)y, 0) + j]"}, "calls atomicAdd"),
])
def test_online_softmax_refuses_what_one_pass_would_change(changes, reason):
    assert reason in refusal("online_softmax", "softmax", written(**changes))


def test_layernorm_has_no_maximum_to_fuse():
    assert "no loop keeps a running maximum" in refusal("online_softmax", "layernorm", naive("layernorm"))


@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.parametrize("task", ["softmax", "cross_entropy"])
def test_the_fused_kernels_compile(task, tmp_path):
    fused = after(task, ("block_per_row", "online_softmax", "vectorize_rows", "fast_math"))
    report = compile_candidate(fused, cache_dir=tmp_path)
    assert report.ok, report.log[-2000:]


@needs_gxx
@pytest.mark.parametrize("names", ORDERS)
@pytest.mark.parametrize("task", ["softmax", "cross_entropy"])
def test_the_fused_kernels_compute_the_reference_at_every_l0_size_on_the_cpu(task, names, tmp_path):
    spec = tasks.get(task)
    kernels = CpuKernels(after(task, names), tmp_path)
    for sizes in spec.l0_sizes:
        inputs = inputs_for(spec, sizes)
        assert mismatch(spec, sizes, inputs, kernels.run(spec, sizes, inputs)) is None, sizes


@needs_gxx
def test_the_cpu_runner_notices_a_sum_that_is_not_rescaled(tmp_path):
    fused = after("softmax", ("online_softmax",))
    broken = fused.__class__.from_dict({**fused.to_dict(), "source": fused.source.replace(
        "sum * expf(row_max - online_m)", "sum")})
    spec, sizes = tasks.get("softmax"), {"M": 7, "N": 1000}
    inputs = inputs_for(spec, sizes)
    assert mismatch(spec, sizes, inputs, CpuKernels(broken, tmp_path).run(spec, sizes, inputs))
