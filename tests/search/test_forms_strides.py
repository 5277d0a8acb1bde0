"""rows.block_per_row is proposed only where the row loop walks memory contiguously."""

from __future__ import annotations

from profiling.harness import tasks
from search.engine.forms import LoopHole, lift
from search.engine.forms.skeletons import by_name
from search.engine.forms.strides import contiguity_problem, stride

# A pointwise convolution as a newcomer writes it: a thread per output, a channel loop
# that steps by a whole image per iteration.
CONV1X1 = """extern "C" __global__ void conv1x1(const float* x, const float* w, float* y,
                                   int N, int C, int HW, int K) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= N * K * HW) return;
    int p = idx % HW;
    int k = (idx / HW) % K;
    int n = idx / (HW * K);
    float acc = 0.0f;
    for (int c = 0; c < C; c++) {
        acc += w[k * C + c] * x[(n * C + c) * HW + p];
    }
    y[idx] = acc;
}
"""
CONV_PLAN = {"launches": [{"kernel": "conv1x1", "grid": ["cdiv(N * K * HW, BLOCK)"], "block": ["BLOCK"],
                           "args": ["x", "w", "y", "N", "C", "HW", "K"]}], "tunables": {"BLOCK": 256}}


def test_the_stride_of_an_index_is_measured_at_two_iterations():
    assert stride("row * N + j", "j") == 1
    assert stride("(long long)row * N + j", "j") == 1
    assert stride("w[0]", "j") is None  # not plain arithmetic
    assert stride("(n * C + c) * HW + p", "c") not in (0, 1, -1)
    assert stride("k / 4", "j") == 0


def test_a_loop_that_jumps_through_memory_is_not_spread_over_a_block():
    form = lift(CONV1X1, CONV_PLAN)
    (loop,) = [s for s in form.steps if isinstance(s, LoopHole)]
    assert "x[(n * C + c) * HW + p] steps by a size" in contiguity_problem(loop)


def test_row_loops_that_walk_their_row_are_spread_over_a_block():
    for name in ("softmax", "layernorm", "cross_entropy"):
        task = tasks.get(name)
        form = lift(task.naive_source, task.naive_plan)
        assert not isinstance(by_name("rows.block_per_row").emit(form, task.naive_plan, task), str), name
