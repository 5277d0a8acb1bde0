"""The contraction family: thread-per-output kernels over a 2-D grid with a reduction
loop lift to a product of two factors; the tiled skeleton computes them on the CPU
emulator exactly as the naive kernel's reference does."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from cuda_on_cpu import CpuKernels, inputs_for, mismatch

from profiling.harness import expr, tasks
from profiling.harness.candidate import Candidate
from profiling.harness.spec import Task, TensorSpec, Tolerance
from search.engine.forms import CONTRACTION, ROWS, Form, Refusal, lift
from search.engine.forms.normalize import one_declarator_each
from search.engine.forms.skeletons import by_name
from search.engine.forms.tiles import k_fastest

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
    ("s = s + Bt[c * K + k] * A[r * K + k];", "changes after its declaration"),  # a local `o`, below
    ("s = s + Bt[c * K + k] * A[r * K + k]; s = s * 1.0f;", "then one sum"),
    ("s = s + Bt[c * K + k] * A[c * K + k];", "one factor must follow k and an output coordinate"),
])
def test_a_loop_that_is_not_a_product_of_row_and_column_factors_is_no_contraction(change, cause):
    """Not a product of a row factor and a column factor: refused as one, and read as rows
    over the grid's two axes where it is a per-output reduction (its math kept)."""
    source = LINEAR.replace("s = s + Bt[c * K + k] * A[r * K + k];", change)
    if cause == "changes after its declaration":  # a local the tile load could not recompute
        local = "float s = bias[c];\n    int o = 0;\n    o = o * 2;"
        source = source.replace("float s = bias[c];", local).replace(
            "A[r * K + k]", "A[(r + o) * K + k]")
    result = lift(source, PLAN)
    if cause == "then one sum":  # `s` changed twice in the loop: no row reduction either
        assert isinstance(result, Refusal) and cause in result.reason, result
    else:
        assert isinstance(result, Form) and result.family == ROWS, result
        assert [axis.name for axis in result.space] == ["r", "c"]
        assert any(cause in note for note in result.notes), result.notes  # why it is no product


# the tile's compile-time switches (tiles.SWITCHES) as bench/contraction_variants.py times them
SWITCH_VARIANTS = {"default": {}, "no prefetch": {"OPTIML_PREFETCH": 0}, "step 2048": {"OPTIML_STEP": 2048},
                   "two stages": {"OPTIML_STAGES": 2}, "two stages, step 2048": {"OPTIML_STAGES": 2,
                                                                                 "OPTIML_STEP": 2048}}


@needs_gxx
@pytest.mark.parametrize("name", ["linear", "sgemm"])
@pytest.mark.parametrize("switches", list(SWITCH_VARIANTS))
def test_the_tiled_skeleton_computes_the_reference_at_odd_sizes(name, switches, tmp_path):
    task = LINEAR_TASK if name == "linear" else tasks.get("sgemm")
    form = lift(task.naive_source, task.naive_plan)
    emitted = by_name("contraction.smem_register_tile").emit(form, task.naive_plan, task)
    plan = {**emitted.plan, "tunables": {**emitted.plan["tunables"], **SWITCH_VARIANTS[switches]}}
    kernels = CpuKernels(Candidate.from_dict({**plan, "source": emitted.source}), tmp_path)
    for sizes in [*task.l0_sizes[:3], {"M": 67, "N": 65, "K": 17}]:
        inputs = inputs_for(task, sizes)
        assert mismatch(task, sizes, inputs, kernels.run(task, sizes, inputs)) is None, sizes


# Batched products written three ways: a grid plane for the batch, one flat index read as
# (b, i, j) with divisions, and a flat index read through a helper local.
BMM_PLANE = """extern "C" __global__ void bmm(const float* A, const float* B, float* C,
                                   int Bt, int M, int N, int K) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    int b = blockIdx.z;
    if (i < M && j < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) acc += A[(b * M + i) * K + k] * B[(b * K + k) * N + j];
        C[(b * M + i) * N + j] = acc;
    }
}
"""
BMM_FLAT = """extern "C" __global__ void bmm(const float* A, const float* B, float* C,
                                   int Bt, int M, int N, int K) {
    int t = threadIdx.x + blockDim.x * blockIdx.x;
    if (t >= Bt * M * N) return;
    int j = t % N;
    int i = (t / N) % M;
    int b = t / (M * N);
    float acc = 0.0f;
    for (int k = 0; k < K; k++) {
        acc = acc + A[b * M * K + i * K + k] * B[b * K * N + k * N + j];
    }
    C[t] = acc;
}
"""
BMM_REST = BMM_FLAT.replace("""    int i = (t / N) % M;
    int b = t / (M * N);""", """    int rest = t / N;
    int i = rest % M;
    int b = rest / M;""")
FLAT_PLAN = {"launches": [{"kernel": "bmm", "grid": ["cdiv(Bt * M * N, 128)"], "block": [128],
                           "args": ["A", "B", "C", "Bt", "M", "N", "K"]}]}
PLANE_PLAN = {"launches": [{"kernel": "bmm", "grid": ["cdiv(N, 16)", "cdiv(M, 16)", "Bt"], "block": [16, 16],
                            "args": ["A", "B", "C", "Bt", "M", "N", "K"]}]}

# The batch count only in the grid, as people write it: the lift passes it (planes.py).
BMM_UNTOLD = BMM_PLANE.replace("int Bt, int M, int N, int K", "int M, int N, int K")
UNTOLD_PLAN = {"launches": [{**PLANE_PLAN["launches"][0], "args": ["A", "B", "C", "M", "N", "K"]}]}


def _bmm_reference(inputs, sizes):
    return {"C": (inputs["A"].astype(np.float64) @ inputs["B"].astype(np.float64)).astype(np.float32)}


def _bmm_task(source: str, plan: dict) -> Task:
    return Task(
        name="bmm_test", description="batched A @ B", sizes={"Bt": 3, "M": 300, "N": 260, "K": 40},
        l0_sizes=({"Bt": 1, "M": 1, "N": 1, "K": 1}, {"Bt": 3, "M": 67, "N": 65, "K": 17},
                  {"Bt": 2, "M": 5, "N": 129, "K": 70}),
        inputs=(TensorSpec("A", "float32", ("Bt", "M", "K")), TensorSpec("B", "float32", ("Bt", "K", "N"))),
        outputs=(TensorSpec("C", "float32", ("Bt", "M", "N")),), reference=_bmm_reference,
        flops=lambda s: 2.0 * s["Bt"] * s["M"] * s["N"] * s["K"], bytes=lambda s: 0.0,
        naive_source=source, naive_plan=plan, tolerances={"float32": Tolerance(atol=1e-4, rtol=1e-4)})


@pytest.mark.parametrize(("source", "plan"),
                         [(BMM_PLANE, PLANE_PLAN), (BMM_FLAT, FLAT_PLAN), (BMM_REST, FLAT_PLAN),
                          (BMM_UNTOLD, UNTOLD_PLAN)],
                         ids=["grid plane", "flat index", "flat index through a local", "untold plane"])
def test_a_batched_product_lifts_with_the_batch_as_a_coordinate_of_its_own(source, plan):
    form = lift(source, plan)
    assert form.family == CONTRACTION, form
    assert [c.name for c in form.coordinates] == ["b", "i", "j"]
    assert form.factors[0].startswith("A[") and form.factors[1].startswith("B[")
    assert ("const int t =" in form.rebuild) == (plan is FLAT_PLAN)
    # a plane the kernel is not told the extent of is passed to it: the grid's own expression
    assert form.extra_args == (("Bt",) if plan is UNTOLD_PLAN else ())


def test_an_untold_plane_becomes_a_parameter_every_skeleton_launch_passes():
    form = lift(BMM_UNTOLD, UNTOLD_PLAN)
    assert form.signature.endswith("int K, int optiml_planes_z)")
    task = _bmm_task(BMM_UNTOLD, UNTOLD_PLAN)
    emitted = by_name("contraction.smem_register_tile").emit(form, UNTOLD_PLAN, task)
    assert emitted.plan["launches"][0]["args"] == ["A", "B", "C", "M", "N", "K", "Bt"]
    assert "int optiml_planes_z" in emitted.source
    # a plane read through blockIdx.z that is told stays as it was: nothing added
    assert lift(BMM_PLANE, PLANE_PLAN).signature.endswith("int K)")


@needs_gxx
@pytest.mark.parametrize(("source", "plan"), [(BMM_PLANE, PLANE_PLAN), (BMM_REST, FLAT_PLAN),
                                              (BMM_UNTOLD, UNTOLD_PLAN)],
                         ids=["grid plane", "flat index through a local", "untold plane"])
def test_the_tiled_skeleton_computes_batched_products_on_a_grid_of_batch_planes(source, plan, tmp_path):
    task = _bmm_task(source, plan)
    emitted = by_name("contraction.smem_register_tile").emit(lift(source, plan), plan, task)
    assert expr.evaluate_int(emitted.plan["launches"][0]["grid"][2], task.sizes) == 3  # one block row a batch
    assert "128 x 128 here" in emitted.rationale  # M and N at least 256 at the task's sizes
    kernels = CpuKernels(Candidate.from_dict({**emitted.plan, "source": emitted.source}), tmp_path)
    for sizes in task.l0_sizes:
        inputs = inputs_for(task, sizes)
        assert mismatch(task, sizes, inputs, kernels.run(task, sizes, inputs)) is None, sizes


@pytest.mark.parametrize(("change", "cause"), [
    # the factor reads the flat index itself: no tile of it is shared by outputs
    (("A[b * M * K + i * K + k]", "A[t * 0 + b * M * K + i * K + k]"), "reads the flat index t"),
    # digits that do not chain (i divides by M, not N): read as written, a row kernel
    (("int i = (t / N) % M;", "int i = (t / M) % M;"), None),
    # the loop's bound read per output
    (("k < K", "k < K + j"), "worked out per output"),
])
def test_flat_indices_that_do_not_read_as_a_product_are_refused(change, cause):
    form = lift(BMM_FLAT.replace(*change), FLAT_PLAN)
    if cause is None:
        assert not (isinstance(form, Form) and form.family == CONTRACTION), form
    else:
        assert isinstance(form, Refusal) or form.family != CONTRACTION, form
        if isinstance(form, Refusal) and form.family == CONTRACTION:
            assert cause in form.reason, form


def test_a_factor_shared_by_the_batch_keeps_its_row_and_the_other_its_columns_merged():
    form = lift(BMM_FLAT.replace("A[b * M * K + i * K + k] * B[b * K * N + k * N + j]",
                                 "A[i * K + k] * B[b * K * N + k * N + j]"), FLAT_PLAN)
    assert form.family == CONTRACTION
    # A reads no batch: i is its row; B alone reads b and j: one product, columns (b, j)
    assert [c.name for c in form.coordinates] == ["i", "optiml_col"]
    assert [c.name for c in dict(form.merged)["optiml_col"]] == ["b", "j"]


def test_each_tile_is_loaded_along_the_index_its_factor_is_contiguous_in():
    assert k_fastest("A[r * K + k]", "r", "k", default=False)  # row-major A: along k
    assert not k_fastest("At[k * M + r]", "r", "k", default=True)  # transposed: along the row
    assert not k_fastest("B[k * N + c]", "c", "k", default=True)
    assert k_fastest("W[c * K + k]", "c", "k", default=False)  # a linear layer's weight
    assert k_fastest("s[0]", "c", "k", default=True)  # neither: the default


@needs_gxx
def test_the_tiled_skeleton_computes_a_product_of_two_transposed_factors(tmp_path):
    source = LINEAR.replace("A[r * K + k]", "At[k * M + r]").replace("const float* A,", "const float* At,")
    plan = {"launches": [{**PLAN["launches"][0], "args": ["At", "Bt", "bias", "out", "M", "N", "K"]}]}

    def reference(inputs, sizes):
        y = inputs["At"].astype(np.float64).T @ inputs["Bt"].astype(np.float64).T + inputs["bias"]
        return {"out": np.maximum(y, 0).astype(np.float32)}

    task = Task(**{**LINEAR_TASK.__dict__, "name": "linear_t_test", "reference": reference,
                   "inputs": (TensorSpec("At", "float32", ("K", "M")), *LINEAR_TASK.inputs[1:]),
                   "naive_source": source, "naive_plan": plan})
    emitted = by_name("contraction.smem_register_tile").emit(lift(source, plan), plan, task)
    kernels = CpuKernels(Candidate.from_dict({**emitted.plan, "source": emitted.source}), tmp_path)
    for sizes in task.l0_sizes:
        inputs = inputs_for(task, sizes)
        assert mismatch(task, sizes, inputs, kernels.run(task, sizes, inputs)) is None, sizes


# One thread per output of a plain matrix product, the row and column read from a flat
# index before the bounds check (a usual newcomer's way).
FLAT_MATMUL = """extern "C" __global__ void mm(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    int row = idx / N;
    int col = idx % N;
    if (row < M && col < N) {
        float s = 0.0f;
        for (int k = 0; k < K; k++) s += A[row * K + k] * B[k * N + col];
        C[row * N + col] = s;
    }
}
"""
FLAT_MATMUL_PLAN = {"launches": [{"kernel": "mm", "grid": ["cdiv(M * N, 256)"], "block": [256],
                                  "args": ["A", "B", "C", "M", "N", "K"]}]}


@pytest.mark.parametrize(("change", "lifts"), [
    (("x", "x"), True),
    (("if (row < M && col < N)", "if (row < M)"), True),  # col < N holds anyway
    (("if (row < M && col < N)", "if (col < N && row < M)"), True),
    (("if (row < M && col < N)", "if (row < M && col < K)"), False),  # leaves threads out
    (("if (row < M && col < N)", "if (col < N)"), False),  # the rows are not bounded
])
def test_digits_read_before_the_bounds_check_bound_the_index_through_its_outermost_digit(change, lifts):
    form = lift(FLAT_MATMUL.replace(*change), FLAT_MATMUL_PLAN)
    assert (isinstance(form, Form) and form.family == CONTRACTION) == lifts, form
    if lifts:
        assert form.space[0].bound == "(M) * (N)"
        assert [c.name for c in form.coordinates] == ["row", "col"]


@needs_gxx
def test_the_tiled_skeleton_computes_a_product_read_from_a_flat_index(tmp_path):
    def reference(inputs, sizes):
        return {"C": (inputs["A"].astype(np.float64) @ inputs["B"].astype(np.float64)).astype(np.float32)}

    task = Task(**{**LINEAR_TASK.__dict__, "name": "mm_test", "reference": reference,
                   "inputs": (TensorSpec("A", "float32", ("M", "K")), TensorSpec("B", "float32", ("K", "N"))),
                   "outputs": (TensorSpec("C", "float32", ("M", "N")),),
                   "naive_source": FLAT_MATMUL, "naive_plan": FLAT_MATMUL_PLAN})
    emitted = by_name("contraction.smem_register_tile").emit(lift(FLAT_MATMUL, FLAT_MATMUL_PLAN),
                                                             FLAT_MATMUL_PLAN, task)
    kernels = CpuKernels(Candidate.from_dict({**emitted.plan, "source": emitted.source}), tmp_path)
    for sizes in task.l0_sizes:
        inputs = inputs_for(task, sizes)
        assert mismatch(task, sizes, inputs, kernels.run(task, sizes, inputs)) is None, sizes


def test_a_flat_index_split_in_one_declaration_lifts_as_the_same_product():
    source = """extern "C" __global__
void matmul_1d(const float* A, const float* B, float* C, int M, int N, int K) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < M * N) {
        int i = idx / N, j = idx % N;
        float s = 0;
        for (int k = 0; k < K; k++) s += A[i * K + k] * B[k * N + j];
        C[idx] = s;
    }
}
"""
    plan = {"launches": [{"kernel": "matmul_1d", "grid": ["cdiv(M * N, 128)"], "block": [128],
                          "args": ["A", "B", "C", "M", "N", "K"]}]}
    form = lift(source, plan)
    assert isinstance(form, Form) and form.family == CONTRACTION, form
    assert [c.name for c in form.coordinates] == ["i", "j"]
    assert "int i = idx / N; int j = idx % N;" in one_declarator_each(source)
    header = "void f() { for (int k = 0, unused = 0; k < 3; ++k) {} }"
    assert one_declarator_each(header) == header  # a loop's header is kept as written


WHILE_MATMUL = """extern "C" __global__ void mm(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        float value = 0;
        int k = 0;
        while (k < K) {
            value += A[row * K + k] * B[k * N + col];
            k++;
        }
        C[row * N + col] = value;
    }
}
"""
WHILE_PLAN = {"launches": [{"kernel": "mm", "grid": ["cdiv(N, 16)", "cdiv(M, 16)"], "block": [16, 16],
                            "args": ["A", "B", "C", "M", "N", "K"]}]}


@pytest.mark.parametrize(("change", "product"), [
    (None, True),
    # the counter read after its loop: not the for loop it would be
    (("C[row * N + col] = value;", "C[row * N + col] = value + k;"), False),
    # a continue would skip the step: refused as a hazard
    (("k++;", "if (k < 0) continue;\n            k++;"), False),
])
def test_a_counted_while_loop_reads_as_the_for_loop_it_is(change, product):
    source = WHILE_MATMUL if change is None else WHILE_MATMUL.replace(*change)
    form = lift(source, WHILE_PLAN)
    assert (isinstance(form, Form) and form.family == CONTRACTION) is product, form
    if product:
        assert form.factors == ("A[row * K + k]", "B[k * N + col]") and form.reduction.bound == "K"


_TILE_SPELLED = """#define TILE 16
extern "C" __global__ void mm_abt(const float* A, const float* B, float* C, int M, int N, int K) {
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * 16 + threadIdx.x;
    if (row < M && col < N) {
        float dot = 0.0f;
        for (int k = 0; k < K; ++k) dot += A[row * K + k] * B[col * K + k];
        C[row * N + col] = dot;
    }
}
"""


def test_a_block_size_spelled_as_a_number_or_a_define_reads_as_blockdim_where_the_launch_agrees():
    from search.engine import forms

    def launched(block):
        return {"launches": [{"kernel": "mm_abt", "grid": ["cdiv(N, 16)", "cdiv(M, 16)"], "block": block,
                              "shared_bytes": 0, "args": ["A", "B", "C", "M", "N", "K"]}],
                "scratch": [], "tunables": {}}

    form = forms.lift(_TILE_SPELLED, launched([16, 16]))
    assert isinstance(form, forms.Form) and form.family == forms.CONTRACTION, form
    # a launch of other blocks: blockIdx * 16 is not blockIdx * blockDim, and is not read as it
    assert isinstance(forms.lift(_TILE_SPELLED, launched([32, 8])), forms.Refusal)
