"""An output element accumulated in memory inside a loop (search/engine/forms/
accumulated.py): the matrix product and matrix-vector product as many people write them
lift as the contraction and row reduction they are, and the skeletons of those families
compute the reference from them on the CPU emulator; what is not provably one element
stays as written."""

import shutil

import numpy as np
import pytest
from cuda_on_cpu import skeleton_mismatch
from forms_kernels import SUM_TOLERANCE, plan, task

from search.engine import forms
from search.engine.forms.accumulated import outputs_accumulated_in_locals

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")

MATMUL = """extern "C" __global__ void mm(const float* A, const float* B, float* C, int M, int N, int K) {
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        C[row * N + col] = 0.0f;
        for (int k = 0; k < K; k++) {
            C[row * N + col] += A[row * K + k] * B[k * N + col];
        }
    }
}
"""
MATMUL_PLAN = plan("mm", ["A", "B", "C", "M", "N", "K"], grid=["cdiv(N, 16)", "cdiv(M, 16)"], block=[16, 16])
MATMUL_TASK = task("mm", MATMUL, MATMUL_PLAN, {"A": ("M", "K"), "B": ("K", "N")}, {"C": ("M", "N")},
                   lambda i, s: {"C": (i["A"].astype(np.float64) @ i["B"]).astype(np.float32)},
                   [{"M": 1, "N": 1, "K": 1}, {"M": 5, "N": 7, "K": 33}, {"M": 130, "N": 129, "K": 20}],
                   SUM_TOLERANCE)

MATVEC = """extern "C" __global__ void matvec(const float* A, const float* v, float* y, int M, int K) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M) {
        y[row] = 0.0f;
        for (int k = 0; k < K; k++) y[row] = y[row] + A[row * K + k] * v[k];
    }
}
"""
MATVEC_PLAN = plan("matvec", ["A", "v", "y", "M", "K"], grid="cdiv(M, BLOCK)")
MATVEC_TASK = task("matvec", MATVEC, MATVEC_PLAN, {"A": ("M", "K"), "v": ("K",)}, {"y": ("M",)},
                   lambda i, s: {"y": (i["A"].astype(np.float64) @ i["v"]).astype(np.float32)},
                   [{"M": 1, "K": 1}, {"M": 3, "K": 300}, {"M": 5, "K": 1001}], SUM_TOLERANCE)


def test_an_element_accumulated_in_memory_becomes_a_local_started_from_its_initial_write():
    rewritten = outputs_accumulated_in_locals(MATMUL)
    assert "float optiml_acc0 = 0.0f;" in rewritten and "optiml_acc0 += A[row * K + k]" in rewritten
    assert rewritten.count("C[") == 1 and "C[row*N+col] = optiml_acc0;" in rewritten
    assert forms.lift(MATMUL, MATMUL_PLAN).family == forms.CONTRACTION
    assert forms.lift(MATVEC, MATVEC_PLAN).family == forms.ROWS


def test_without_an_initial_write_the_local_starts_from_the_element_in_memory():
    source = MATVEC.replace("y[row] = 0.0f;\n", "")
    assert "float optiml_acc0 = y[row];" in outputs_accumulated_in_locals(source)


@pytest.mark.parametrize("loop", [
    "s += x[j] * w[row];",  # a read-only operand at a fixed index: nothing written there
    "y[j] += x[row * N + j];",  # the element moves with the counter
    "y[idx[row]] += x[row * N + j];",  # the element is read from memory
    "y[row] += x[row * N + j]; y[row + 1] = 0.0f;",  # the loop reaches another element of y
    "int r = row + j; y[r] += x[r];",  # the index is a local of the loop
    "y[row] += x[row * N + j]; if (y[row] > 1.0f) return;",  # left early: the store would be skipped
    "y[row] += x[row * N + j]; if (y[row] > 1.0f) break;",
])
def test_what_is_not_provably_one_element_stays_as_written(loop):
    source = f"""extern "C" __global__ void k(const float* x, const float* w, const int* idx, float* y,
                                  int M, int N) {{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M) {{
        float s = 0.0f;
        for (int j = 0; j < N; j++) {{
            {loop}
        }}
        y[row] = s;
    }}
}}
"""
    assert "optiml_acc" not in outputs_accumulated_in_locals(source)


@needs_gxx
@pytest.mark.parametrize("source, the_plan, the_task, skeleton", [
    (MATMUL, MATMUL_PLAN, MATMUL_TASK, "contraction.smem_register_tile"),
    (MATVEC, MATVEC_PLAN, MATVEC_TASK, "rows.block_per_row"),
], ids=["matmul", "matvec"])
def test_the_familys_skeleton_computes_the_reference_from_the_kernel_as_written(source, the_plan, the_task,
                                                                                skeleton, tmp_path):
    assert skeleton_mismatch(source, the_plan, the_task, skeleton, tmp_path) is None
