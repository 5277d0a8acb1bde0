"""A matrix product already tiled by hand in shared memory (search/engine/forms/hand_tiled.py):
the tutorial's kernel and the ways people vary it lift to the batched contraction a
thread-per-output product lifts to, the contraction's tile computes the reference from
it on the CPU emulator, and a variant that could compute something else (a tile loop
short of K, loads without the zero fill, a block that is not the tile, another slot, a
barrier missing) is refused with the reason."""

import shutil

import numpy as np
import pytest
from cuda_on_cpu import skeleton_mismatch

from bench.newcomer_tasks import tiled_matmul
from bench.newcomer_tasks._make import T, task
from search.engine import forms

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")

TUTORIAL, TUTORIAL_PLAN = tiled_matmul.SRC, tiled_matmul.TASK.naive_plan

# Thread-index locals, the tile loop stepping by the tile, if/else loads, `#pragma
# unroll`, the product written the other way round and `acc = acc + ...`, 8 x 8 tiles.
STEPPED = """#define BS 8
extern "C" __global__ void mm8(const float* A, const float* B, float* C, int M, int N, int K) {
    __shared__ float sa[BS][BS];
    __shared__ float sb[BS][BS];
    int tx = threadIdx.x, ty = threadIdx.y;
    int r = blockIdx.y * BS + ty;
    int c = blockIdx.x * BS + tx;
    float sum = 0.0f;
    for (int k0 = 0; k0 < K; k0 += BS) {
        if (r < M && k0 + tx < K) sa[ty][tx] = A[r * K + k0 + tx];
        else sa[ty][tx] = 0.0f;
        if (k0 + ty < K && c < N) sb[ty][tx] = B[(k0 + ty) * N + c];
        else sb[ty][tx] = 0.0f;
        __syncthreads();
        #pragma unroll
        for (int k = 0; k < BS; ++k) {
            sum = sum + sb[k][tx] * sa[ty][k];
        }
        __syncthreads();
    }
    if (r < M && c < N) {
        C[r * N + c] = sum;
    }
}
"""
STEPPED_PLAN = {"launches": [{"kernel": "mm8", "grid": ["cdiv(N, 8)", "cdiv(M, 8)"], "block": [8, 8],
                              "shared_bytes": 0, "args": ["A", "B", "C", "M", "N", "K"]}],
                "scratch": [], "tunables": {}}

# Loads indexed in place (`t * T + threadIdx.x` inside the subscript), the loop bound
# `t * TILE < K`, blockDim in the indices, 32 x 32 tiles and a scaled epilogue.
SCALED = """#define TILE 32
extern "C" __global__ void mm_scaled(const float* A, const float* B, float* C, int M, int N, int K,
                                     float alpha) {
    __shared__ float tileA[TILE][TILE];
    __shared__ float tileB[TILE][TILE];
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    float acc = 0.0f;
    for (int t = 0; t * TILE < K; ++t) {
        tileA[threadIdx.y][threadIdx.x] = (row < M && t * TILE + threadIdx.x < K) ?
            A[row * K + t * TILE + threadIdx.x] : 0.0f;
        tileB[threadIdx.y][threadIdx.x] = (t * TILE + threadIdx.y < K && col < N) ?
            B[(t * TILE + threadIdx.y) * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; k++) acc += tileA[threadIdx.y][k] * tileB[k][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N) C[row * N + col] = alpha * acc;
}
"""
SCALED_PLAN = {"launches": [{"kernel": "mm_scaled", "grid": ["cdiv(N, 32)", "cdiv(M, 32)"],
                             "block": [32, 32], "shared_bytes": 0,
                             "args": ["A", "B", "C", "M", "N", "K", "0.5"]}],
               "scratch": [], "tunables": {}}


def _product_task(name, scale):
    def ref(i, s):
        return {"C": (scale * (i["A"].astype(np.float64) @ i["B"].astype(np.float64))).astype(np.float32)}
    return task(name, {"M": 1024, "N": 1024, "K": 1024},
                [{"M": 1, "N": 1, "K": 1}, {"M": 17, "N": 33, "K": 65}, {"M": 40, "N": 7, "K": 129}],
                [T("A", ("M", "K")), T("B", ("K", "N"))], [T("C", ("M", "N"))], ref, "",
                None, None, None, None)


@pytest.mark.parametrize("source, the_plan, factors", [
    (TUTORIAL, TUTORIAL_PLAN, ("A[row*K+optiml_k]", "B[optiml_k*N+col]")),
    (STEPPED, STEPPED_PLAN, ("A[r*K+optiml_k]", "B[optiml_k*N+c]")),
    (SCALED, SCALED_PLAN, ("A[row*K+optiml_k]", "B[optiml_k*N+col]")),
], ids=["tutorial", "stepped-if-else-8x8", "in-place-32x32-scaled"])
def test_a_product_tiled_by_hand_lifts_as_the_contraction_it_computes(source, the_plan, factors):
    form = forms.lift(source, the_plan)
    assert isinstance(form, forms.Form), form
    assert form.family == forms.CONTRACTION and form.factors == factors
    assert form.reduction.bound == "K" and "__shared__" not in form.body + form.epilogue


@needs_gxx
@pytest.mark.parametrize("source, the_plan, scale",
                         [(STEPPED, STEPPED_PLAN, 1.0), (SCALED, SCALED_PLAN, 0.5)],
                         ids=["stepped", "scaled"])
def test_the_contraction_tile_computes_the_reference_from_the_hand_tiled_kernel(source, the_plan, scale,
                                                                                tmp_path):
    the_task = _product_task("hand_tiled", scale)
    assert skeleton_mismatch(source, the_plan, the_task, "contraction.smem_register_tile", tmp_path) is None


def _tutorial(old, new):
    assert old in TUTORIAL, old
    return TUTORIAL.replace(old, new)


NOT_THE_SAME_PRODUCT = {
    # K = 20 with tiles of 16 stops at 16
    "the tile loop covers K/TILE tiles of 16, fewer than K": (
        _tutorial("t < (K + TILE - 1) / TILE", "t < K / TILE"), TUTORIAL_PLAN),
    # past K the loads read the next row of A and rows of B beyond the matrix
    "reads past K without a zero fill": (
        _tutorial("(row < M && ak < K) ? A[row * K + ak] : 0.0f", "A[row * K + ak]"), TUTORIAL_PLAN),
    "loaded by blocks of 8 x 8": (TUTORIAL, {**TUTORIAL_PLAN, "launches": [
        {**TUTORIAL_PLAN["launches"][0], "block": [8, 8]}]}),
    "does not load the thread's own slot": (
        _tutorial("As[threadIdx.y][threadIdx.x] =", "As[threadIdx.x][threadIdx.y] ="), TUTORIAL_PLAN),
    "the products are not one loop over the tile": (_tutorial("k < TILE", "k < 8"), TUTORIAL_PLAN),
    # without the first barrier a thread may read a slot before its thread wrote it
    "the tile loop is not: locals, two tile loads, a barrier, the products, a barrier": (
        _tutorial("        __syncthreads();\n        for", "        for"), TUTORIAL_PLAN),
    # B's tile loaded along the row thread's index: not B at the position along K
    "a load reads the tile's index other than as the position along K": (
        _tutorial("int bk = t * TILE + threadIdx.y;", "int bk = t * TILE + threadIdx.x;"), TUTORIAL_PLAN),
    # the loads skip rows past M, but the output is written for every row
    "a load tests row<M, which the output's test does not": (
        _tutorial("if (row < M && col < N) C[", "if (col < N) C["), TUTORIAL_PLAN),
    "does not count tiles from 0": (_tutorial("int t = 0;", "int t = 1;"), TUTORIAL_PLAN),
}


@pytest.mark.parametrize("reason", list(NOT_THE_SAME_PRODUCT))
def test_a_hand_tiled_variant_that_could_compute_something_else_is_refused_with_the_reason(reason):
    source, the_plan = NOT_THE_SAME_PRODUCT[reason]
    form = forms.lift(source, the_plan)
    assert isinstance(form, forms.Refusal), form
    assert form.family == forms.CONTRACTION and "tiled by hand" in form.reason
    assert reason in form.reason, form.reason


def test_two_shared_tiles_that_are_no_product_are_left_to_the_other_readers():
    source = _tutorial("acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];", "acc += As[threadIdx.y][k];")
    form = forms.lift(source, TUTORIAL_PLAN)
    assert isinstance(form, forms.Refusal) and "__shared__ memory" in form.reason
