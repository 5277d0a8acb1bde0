"""The contraction family: thread-per-output kernels over a 2-D grid with a reduction
loop lift to a product of two factors; the tiled skeleton computes them on the CPU
emulator exactly as the naive kernel's reference does."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from cuda_on_cpu import CpuKernels, inputs_for, mismatch

from profiling.harness import tasks
from profiling.harness.candidate import Candidate
from profiling.harness.spec import Task, TensorSpec, Tolerance
from search.engine.forms import CONTRACTION, Refusal, lift
from search.engine.forms.skeletons import by_name

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU emulator needs g++")

# out = relu(A @ B^T + bias): B read transposed, an initial value and an epilogue.
LINEAR = """extern "C" __global__ void linear_relu(const float* A, const float* Bt, const float* bias,
                                   float* out, int M, int N, int K) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r >= M || c >= N) return;
    float s = bias[c];
    for (int k = 0; k < K; ++k) {
        s = s + Bt[c * K + k] * A[r * K + k];
    }
    out[r * N + c] = s > 0.0f ? s : 0.0f;
}
"""
PLAN = {"launches": [{"kernel": "linear_relu", "grid": ["cdiv(N, 16)", "cdiv(M, 16)"], "block": [16, 16],
                      "args": ["A", "Bt", "bias", "out", "M", "N", "K"]}]}


def _reference(inputs, sizes):
    y = inputs["A"].astype(np.float64) @ inputs["Bt"].astype(np.float64).T + inputs["bias"]
    return {"out": np.maximum(y, 0).astype(np.float32)}


LINEAR_TASK = Task(
    name="linear_relu_test", description="relu(A @ Bt^T + bias)", sizes={"M": 130, "N": 70, "K": 33},
    l0_sizes=({"M": 1, "N": 1, "K": 1}, {"M": 67, "N": 65, "K": 17}, {"M": 5, "N": 129, "K": 64}),
    inputs=(TensorSpec("A", "float32", ("M", "K")), TensorSpec("Bt", "float32", ("N", "K")),
            TensorSpec("bias", "float32", ("N",))),
    outputs=(TensorSpec("out", "float32", ("M", "N")),), reference=_reference,
    flops=lambda s: 2.0 * s["M"] * s["N"] * s["K"], bytes=lambda s: 0.0, naive_source=LINEAR, naive_plan=PLAN,
    tolerances={"float32": Tolerance(atol=1e-4, rtol=1e-4)})


def test_a_thread_per_output_matrix_product_lifts_with_its_factors_in_row_then_column_order():
    form = lift(LINEAR, PLAN)
    assert form.family == CONTRACTION
    assert form.factors == ("A[r * K + k]", "Bt[c * K + k]")  # swapped to (row, k), (k, column)
    assert (form.accumulator, form.body, form.reduction.bound) == ("s", "float s = bias[c];", "K")
    assert form.epilogue == "out[r * N + c] = s > 0.0f ? s : 0.0f;"


@pytest.mark.parametrize(("change", "cause"), [
    ("s = s + Bt[c * K + k] * A[r * K + k];", "worked out per output"),  # with a local `o`, below
    ("s = s + Bt[c * K + k] * A[r * K + k]; s = s * 1.0f;", "not one sum"),
    ("s = s + Bt[c * K + k] * A[c * K + k];", "one factor must follow the row and k"),
])
def test_a_loop_that_is_not_a_product_of_row_and_column_factors_is_refused(change, cause):
    source = LINEAR.replace("s = s + Bt[c * K + k] * A[r * K + k];", change)
    if cause == "worked out per output":
        source = source.replace("float s = bias[c];", "float s = bias[c];\n    int o = 0;").replace(
            "A[r * K + k]", "A[(r + o) * K + k]")
    refusal = lift(source, PLAN)
    assert isinstance(refusal, Refusal) and cause in refusal.reason, refusal


@needs_gxx
@pytest.mark.parametrize("name", ["linear", "sgemm"])
def test_the_tiled_skeleton_computes_the_reference_at_odd_sizes(name, tmp_path):
    task = LINEAR_TASK if name == "linear" else tasks.get("sgemm")
    form = lift(task.naive_source, task.naive_plan)
    emitted = by_name("contraction.smem_register_tile").emit(form, task.naive_plan, task)
    kernels = CpuKernels(Candidate.from_dict({**emitted.plan, "source": emitted.source}), tmp_path)
    for sizes in [*task.l0_sizes[:3], {"M": 67, "N": 65, "K": 17}]:
        inputs = inputs_for(task, sizes)
        assert mismatch(task, sizes, inputs, kernels.run(task, sizes, inputs)) is None, sizes
