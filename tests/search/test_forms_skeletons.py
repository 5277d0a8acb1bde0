"""Skeletons (search/engine/forms/skeletons.py) on kernels of their family written in
several styles: what they emit compiles with nvcc for sm_90, computes the task's
reference when run on the CPU (cuda_on_cpu.py: one std::thread per CUDA thread) at small
odd sizes (rows not a multiple of 4 or 32, one row, n not a multiple of 4 for vec4's
tail), keeps the kernel's name and parameters, and launches with a plan the gate accepts
at every L0 size; and where a skeleton does not apply, it says why."""

import dataclasses
import shutil

import numpy as np
import pytest
from cuda_on_cpu import CpuKernels, inputs_for, mismatch
from forms_kernels import (
    ARGMIN_DIM1,
    COLUMN_ARGMAX,
    COLUMN_KERNELS,
    COLUMN_STATS,
    FULL_STYLES,
    GEMV,
    GROUPNORM,
    HEAD_SUMSQ,
    MAP_2D,
    MAP_2D_RAMP,
    MAP_BIAS,
    MAP_HALVES,
    MAP_HELPER_LOCALS,
    MAP_IF_ELSE,
    MAP_PLAIN,
    MAP_REVERSE,
    MAP_SAXPY,
    MAP_SCATTER,
    MAP_STYLES,
    MAP_UPSAMPLE,
    MASKED_MEAN,
    PERMUTATIONS,
    RMSNORM,
    ROW_ARGMAX,
    ROW_ARGMIN_LAST,
    ROW_DEFINED,
    ROW_MAX_FROM_ONE,
    ROW_PROD,
    ROW_RANGE,
    SOFTMAX_STYLES,
    SUMSQ,
    Kernel,
    plan,
)

from profiling.harness import tasks
from profiling.harness.candidate import Candidate
from profiling.harness.compile import compile_candidate
from profiling.harness.gate import check_plan
from search.engine import forms
from search.engine.forms import CONTRACTION, FULL_REDUCE, MAP, PERMUTATION, ROWS, WINDOW, Form
from search.engine.forms.skeletons import SKELETONS, Emitted, by_name, for_family
from search.engine.judges import RuleJudge
from search.engine.rewrites.syntax import find_kernels, parse
from search.engine.sources import _BLOCK_LIKE
from search.engine.types import FAMILIES, NodeContext, Proposal

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")


def suite(name: str) -> Kernel:
    spec = tasks.get(name)
    return Kernel(spec.naive_plan["launches"][-1]["kernel"], spec.naive_source, spec.naive_plan, spec)


def task_of(kernel: Kernel):
    return kernel.task or tasks.get("softmax")  # the softmax-like kernels compute the suite's softmax


def lifted(kernel: Kernel) -> Form:
    form = forms.lift(kernel.source, kernel.plan)
    assert isinstance(form, Form), form
    return form


def emitted(kernel: Kernel, skeleton: str) -> Emitted:
    result = by_name(skeleton).emit(lifted(kernel), kernel.plan, task_of(kernel))
    assert isinstance(result, Emitted), result
    return result


def candidate(result: Emitted) -> Candidate:
    return Candidate.from_source_and_plan(result.source, result.plan)


# MAP_HELPER_LOCALS is refused (a bug: see test_forms_lift.py)
MAPS = [*(k for k in MAP_STYLES if k is not MAP_HELPER_LOCALS), MAP_SAXPY, MAP_IF_ELSE, suite("relu")]
# maps that write y[i] and read elsewhere: vec4 takes them by quads (quads.py)
READ_ELSEWHERE = [MAP_REVERSE, MAP_2D_RAMP, MAP_BIAS, MAP_HALVES, MAP_UPSAMPLE]
ROW_KERNELS = [*SOFTMAX_STYLES, RMSNORM, HEAD_SUMSQ, ROW_PROD, ROW_DEFINED, MASKED_MEAN, ROW_RANGE,
               ROW_MAX_FROM_ONE, ROW_ARGMAX, ROW_ARGMIN_LAST, GROUPNORM, GEMV, suite("softmax"),
               suite("layernorm"), suite("cross_entropy")]
CASES = [
    *[(k, "map.grid_stride") for k in [*MAPS, *READ_ELSEWHERE, MAP_SCATTER, MAP_2D]],
    *[(k, "map.vec4") for k in [*MAPS, MAP_2D]],
    *[(k, "map.quads") for k in READ_ELSEWHERE],
    *[(k, "rows.block_per_row") for k in ROW_KERNELS],
    *[(k, "rows.split_strided") for k in COLUMN_KERNELS],
    *[(k, "full.grid_stride_accumulate") for k in FULL_STYLES],
    (suite("maxpool3d"), "window.walk_rows"),  # more windows in test_forms_windows.py
    (suite("maxpool3d"), "window.quads"),
    *[(k, "permutation.smem_tile") for k in PERMUTATIONS],
]
IDS = [f"{skeleton}-{kernel.name}" for kernel, skeleton in CASES]


def test_every_skeleton_is_exercised_and_schedules_one_family():
    # (the contraction's skeleton is run in test_forms_contraction.py, the scan's in
    # test_forms_scans.py)
    exercised = {skeleton for _, skeleton in CASES} | {"contraction.smem_register_tile", "scan.block_scan"}
    assert exercised == {s.name for s in SKELETONS}
    assert [s.name for s in for_family(MAP)] == ["map.grid_stride", "map.vec4", "map.quads"]
    assert [s.name for s in for_family(ROWS)] == ["rows.block_per_row", "rows.split_strided"]
    assert [s.name for s in for_family(FULL_REDUCE)] == ["full.grid_stride_accumulate"]
    assert [s.name for s in for_family(CONTRACTION)] == ["contraction.smem_register_tile"]
    assert [s.name for s in for_family(WINDOW)] == ["window.walk_rows", "window.quads"]
    assert [s.name for s in for_family(PERMUTATION)] == ["permutation.smem_tile"]


# --- compiled by nvcc -------------------------------------------------------------------------


@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.parametrize("kernel, skeleton", CASES, ids=IDS)
def test_what_a_skeleton_emits_compiles_with_nvcc_for_sm_90(kernel, skeleton, tmp_path):
    report = compile_candidate(candidate(emitted(kernel, skeleton)), cache_dir=tmp_path)
    assert report.ok and not report.errors, report.log[-3000:]
    assert kernel.name in {k.kernel for k in report.kernels}


# --- run on the CPU against the reference -----------------------------------------------------


@pytest.fixture(scope="module")
def cpu(tmp_path_factory):
    """CpuKernels per (kernel, skeleton), compiled once for the module."""
    built: dict[tuple[str, str], CpuKernels] = {}

    def get(kernel: Kernel, skeleton: str) -> CpuKernels:
        key = (kernel.name, skeleton)
        if key not in built:
            workdir = tmp_path_factory.mktemp(f"{skeleton}-{kernel.name}".replace(".", "_"))
            built[key] = CpuKernels(candidate(emitted(kernel, skeleton)), workdir)
        return built[key]

    return get


@needs_gxx
@pytest.mark.parametrize("kernel, skeleton", CASES, ids=IDS)
def test_what_a_skeleton_emits_computes_the_reference_at_every_small_size_on_the_cpu(kernel, skeleton, cpu):
    spec = task_of(kernel)
    kernels = cpu(kernel, skeleton)
    for sizes in spec.l0_sizes:
        inputs = inputs_for(spec, sizes)
        assert mismatch(spec, sizes, inputs, kernels.run(spec, sizes, inputs)) is None, sizes


@needs_gxx
@pytest.mark.parametrize("kernel, skeleton", [(ROW_ARGMAX, "rows.block_per_row"),
                                              (ROW_ARGMIN_LAST, "rows.block_per_row"),
                                              (COLUMN_ARGMAX, "rows.split_strided"),
                                              (ARGMIN_DIM1, "rows.split_strided")],
                         ids=lambda k: getattr(k, "name", k))
def test_an_arg_reduction_split_over_threads_keeps_the_tie_rule_the_loop_had(kernel, skeleton, cpu):
    spec = task_of(kernel)
    kernels = cpu(kernel, skeleton)
    rng = np.random.default_rng(7)
    for sizes in spec.l0_sizes:
        shape = [sizes[d] for d in spec.inputs[0].shape]
        for levels in (1, 3):  # every element equal, then three values: ties everywhere
            x = rng.integers(0, levels, size=shape).astype(np.float32)
            outputs = kernels.run(spec, sizes, {"x": x})
            assert mismatch(spec, sizes, {"x": x}, outputs) is None, (sizes, levels)


@needs_gxx
@pytest.mark.parametrize("kernel, skeleton", [(MAP_PLAIN, "map.grid_stride"), (MAP_PLAIN, "map.vec4"),
                                              (SUMSQ, "full.grid_stride_accumulate")],
                         ids=["map.grid_stride", "map.vec4", "full.grid_stride_accumulate"])
def test_a_grid_stride_skeleton_covers_every_element_once_whatever_the_grid(kernel, skeleton, cpu):
    spec = task_of(kernel)
    kernels = cpu(kernel, skeleton)
    for n in (1, 1003, 4099):
        inputs = inputs_for(spec, {"n": n})
        for grid in (1, 3):  # far fewer threads than elements
            outputs = kernels.run(spec, {"n": n}, inputs, grids={kernel.name: grid})
            assert mismatch(spec, {"n": n}, inputs, outputs) is None, (n, grid)


@needs_gxx
def test_the_cpu_run_takes_vec4s_quad_path_so_its_tail_and_quads_are_both_checked(tmp_path):
    """Without the quads' stores the outputs stay poisoned: the CPU's buffers are 16-byte
    aligned, so the float4 path runs (and the scalar tail at n % 4 != 0 is what remains)."""
    result = emitted(MAP_SAXPY, "map.vec4")
    store = "reinterpret_cast<float4*>(z)[optiml_q] = z_v4;"
    assert store in result.source
    broken = Candidate.from_source_and_plan(result.source.replace(store, ""), result.plan)
    spec, sizes = MAP_SAXPY.task, {"n": 1000}
    inputs = inputs_for(spec, sizes)
    assert mismatch(spec, sizes, inputs, CpuKernels(broken, tmp_path).run(spec, sizes, inputs))


@needs_gxx
def test_the_cpu_run_notices_a_row_reduction_not_combined_across_the_block(tmp_path):
    result = emitted(RMSNORM, "rows.block_per_row")
    combine = "ss = optiml_ss_before + optiml_block_sum_float(ss);"
    assert combine in result.source
    broken = Candidate.from_source_and_plan(result.source.replace(combine, "ss = optiml_ss_before + ss;"),
                                            result.plan)
    spec, sizes = RMSNORM.task, {"M": 3, "N": 1001}
    inputs = inputs_for(spec, sizes)
    assert mismatch(spec, sizes, inputs, CpuKernels(broken, tmp_path).run(spec, sizes, inputs))


# --- the emitted source and plan ----------------------------------------------------------------


@pytest.mark.parametrize("kernel, skeleton", CASES, ids=IDS)
def test_the_emitted_plan_is_one_the_gate_accepts_at_every_l0_size(kernel, skeleton):
    spec = task_of(kernel)
    check_plan(spec, candidate(emitted(kernel, skeleton)), spec.sizes)  # raises CandidateError


@pytest.mark.parametrize("kernel, skeleton", CASES, ids=IDS)
def test_the_emitted_source_keeps_the_kernels_name_parameters_and_arguments(kernel, skeleton):
    result = emitted(kernel, skeleton)
    original = {k.name: k for k in find_kernels(parse(kernel.source))}[kernel.name]
    kept = {k.name: k for k in find_kernels(parse(result.source))}[kernel.name]
    assert [(p.name, p.base_type) for p in kept.params] == [(p.name, p.base_type) for p in original.params]
    launch = result.plan["launches"][-1]
    assert launch["kernel"] == kernel.name and launch["args"] == kernel.plan["launches"][-1]["args"]
    assert launch["block"] == ["BLOCK"] and result.plan["tunables"]["BLOCK"] % 32 == 0


def test_a_full_reductions_plan_zeroes_its_output_before_the_accumulating_launch():
    result = emitted(SUMSQ, "full.grid_stride_accumulate")
    zero, accumulate = result.plan["launches"]
    assert (zero["kernel"], zero["grid"], zero["block"]) == ("sumsq_zero_total", [1], [1])
    assert zero["args"] == ["out"]
    assert accumulate["kernel"] == "sumsq"


def test_the_maths_text_is_moved_not_rewritten():
    assert "y[idx] = x[idx] > 0.0f ? x[idx] : 0.1f * x[idx];" in emitted(MAP_PLAIN, "map.grid_stride").source
    assert "sum += A[row * K + k] * x[k];" in emitted(GEMV, "rows.block_per_row").source
    assert "optiml_sum += (d * d);" in emitted(SUMSQ, "full.grid_stride_accumulate").source


# --- where a skeleton does not apply ------------------------------------------------------------


@pytest.mark.parametrize("kernel", READ_ELSEWHERE, ids=lambda k: k.name)
def test_vec4_refuses_a_map_that_is_not_direct_and_says_so(kernel):
    reason = by_name("map.vec4").emit(lifted(kernel), kernel.plan, task_of(kernel))
    assert isinstance(reason, str) and "not a direct map" in reason and "map.quads" in reason


def test_quads_refuse_a_map_that_writes_another_element_than_its_own_and_say_so():
    reason = by_name("map.quads").emit(lifted(MAP_SCATTER), MAP_SCATTER.plan, task_of(MAP_SCATTER))
    assert isinstance(reason, str) and "written at an element other than" in reason


# the output written at its own element and read at a neighbour's (a race as written)
MAP_READS_ITS_OUTPUT = dataclasses.replace(MAP_PLAIN, source=MAP_PLAIN.source.replace(
    "y[idx] = x[idx] > 0.0f ? x[idx] : 0.1f * x[idx];",
    "y[idx] = x[idx] + (idx + 1 < n ? y[idx + 1] : 0.0f);"))


def test_quads_refuse_an_output_read_at_a_neighbour_and_name_the_read():
    assert MAP_READS_ITS_OUTPUT.source != MAP_PLAIN.source
    form = forms.lift(MAP_READS_ITS_OUTPUT.source, MAP_READS_ITS_OUTPUT.plan)
    assert isinstance(form, Form), form
    reason = by_name("map.quads").emit(form, MAP_READS_ITS_OUTPUT.plan, task_of(MAP_READS_ITS_OUTPUT))
    assert isinstance(reason, str) and "read at another" in reason


@needs_gxx
def test_quads_keep_a_compound_write_loading_the_output_first(tmp_path):
    """`y[i] = x[i]; y[i] += b[c]`: the output's quad is loaded before the lanes add to it."""
    source = MAP_BIAS.source.replace("y[i] = x[i] + b[c];", "y[i] = x[i];\n        y[i] += b[c];")
    assert source != MAP_BIAS.source
    kernel = dataclasses.replace(MAP_BIAS, source=source,
                                 task=dataclasses.replace(MAP_BIAS.task, naive_source=source))
    result = emitted(kernel, "map.quads")
    assert "float4 y_v4 = reinterpret_cast<const float4*>(y)[optiml_q];" in result.source
    assert "y_v4.x += b[" in result.source
    spec = task_of(kernel)
    for sizes in spec.l0_sizes:
        inputs = inputs_for(spec, sizes)
        ran = CpuKernels(candidate(result), tmp_path).run(spec, sizes, inputs)
        assert not mismatch(spec, sizes, inputs, ran), sizes


def test_quads_leave_a_direct_map_to_vec4():
    reason = by_name("map.quads").emit(lifted(MAP_PLAIN), MAP_PLAIN.plan, task_of(MAP_PLAIN))
    assert isinstance(reason, str) and "map.vec4" in reason


@needs_gxx
@pytest.mark.parametrize("kernel", [MAP_BIAS, MAP_UPSAMPLE], ids=lambda k: k.name)
def test_the_cpu_run_takes_the_quads_of_a_map_that_reads_elsewhere(kernel, tmp_path):
    """Each quad's results reach memory only by its float4 store: without it the outputs
    stay poisoned, so the quads, and not only the scalar tail, are what the CPU run checks."""
    result = emitted(kernel, "map.quads")
    store = "reinterpret_cast<float4*>(y)[optiml_q] = y_v4;"
    assert store in result.source
    broken = Candidate.from_source_and_plan(result.source.replace(store, ""), result.plan)
    spec = task_of(kernel)
    sizes = spec.l0_sizes[-1]
    inputs = inputs_for(spec, sizes)
    assert mismatch(spec, sizes, inputs, CpuKernels(broken, tmp_path).run(spec, sizes, inputs))


def test_quads_load_a_quad_read_at_the_elements_own_index_and_leave_the_others_scalar():
    source = emitted(MAP_BIAS, "map.quads").source
    assert "const float4 x_v4 = reinterpret_cast<const float4*>(x)[optiml_q];" in source
    assert "b[c]" in source and "b_v4" not in source  # the broadcast operand stays as written


@pytest.mark.parametrize("skeleton, kernel, family", [
    ("rows.block_per_row", MAP_PLAIN, MAP),
    ("rows.block_per_row", SUMSQ, FULL_REDUCE),
    ("map.grid_stride", GEMV, ROWS),
    ("map.vec4", SUMSQ, FULL_REDUCE),
    ("full.grid_stride_accumulate", MAP_PLAIN, MAP),
    ("full.grid_stride_accumulate", GEMV, ROWS),
])
def test_a_skeleton_refuses_a_form_of_another_family_and_names_it(skeleton, kernel, family):
    reason = by_name(skeleton).emit(lifted(kernel), kernel.plan, task_of(kernel))
    assert isinstance(reason, str) and f"a {family} form, not" in reason


@pytest.mark.parametrize("kernel", [*SOFTMAX_STYLES, RMSNORM, GEMV, GROUPNORM], ids=lambda k: k.name)
def test_rows_read_along_the_row_are_left_to_block_per_row_and_the_reason_is_said(kernel):
    reason = by_name("rows.split_strided").emit(lifted(kernel), kernel.plan, task_of(kernel))
    assert isinstance(reason, str) and "rows side by side do not read side by side" in reason


@pytest.mark.parametrize("kernel", COLUMN_KERNELS, ids=lambda k: k.name)
def test_a_column_reduction_is_left_to_split_strided_and_the_reason_is_said(kernel):
    reason = by_name("rows.block_per_row").emit(lifted(kernel), kernel.plan, task_of(kernel))
    assert isinstance(reason, str) and "would read scattered addresses" in reason


@needs_gxx
def test_the_cpu_run_notices_slices_not_combined_across_the_block(tmp_path):
    result = emitted(COLUMN_STATS, "rows.split_strided")
    combine = "for (int optiml_k = 0; optiml_k < optiml_slices; ++optiml_k) sum = sum + optiml_part_sum["
    assert combine in result.source
    broken = Candidate.from_source_and_plan(
        result.source.replace(combine, combine.replace("optiml_k < optiml_slices", "optiml_k < 1")),
        result.plan)
    spec, sizes = COLUMN_STATS.task, {"N": 70, "D": 65}
    inputs = inputs_for(spec, sizes)
    assert mismatch(spec, sizes, inputs, CpuKernels(broken, tmp_path).run(spec, sizes, inputs))


def test_a_bound_that_is_no_plan_expression_is_refused_with_the_reason():
    source = MAP_PLAIN.source.replace("int n)", "float n)").replace("idx < n", "idx < (int)n")
    kernel = Kernel("leaky_plain", source, plan("leaky_plain", ["x", "y", "f32:1000"]), MAP_PLAIN.task)
    reason = by_name("map.grid_stride").emit(lifted(kernel), kernel.plan, kernel.task)
    assert isinstance(reason, str) and "n is not a size argument" in reason


# --- minimal reproducers of bugs found in search/engine/forms (fixed unless marked xfail) ---


def bug(why: str):
    return pytest.mark.xfail(strict=True, reason=f"bug: {why}")


def test_a_kernels_launch_bounds_do_not_contradict_the_skeletons_block():
    source = MAP_PLAIN.source.replace("__global__ void", "__global__ void __launch_bounds__(128)")
    kernel = Kernel("leaky_plain", source, MAP_PLAIN.plan, MAP_PLAIN.task)
    result = emitted(kernel, "map.grid_stride")
    assert "__launch_bounds__(128)" not in result.source or result.plan["tunables"]["BLOCK"] <= 128


ROW_TOTAL = """extern "C" __global__ void zero_total(float* total) { total[0] = 0.0f; }

extern "C" __global__ void row_squares(const float* x, float* total, int M, int N) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) return;
    float s = 0.0f;
    for (int j = 0; j < N; ++j) s += x[row * N + j] * x[row * N + j];
    atomicAdd(total, s);
}
"""


def test_a_row_kernel_that_adds_into_one_total_with_atomics_is_refused():
    the_plan = plan("row_squares", ["x", "total", "M", "N"], grid="cdiv(M, BLOCK)",
                    zero=("zero_total", "total"))
    refusal = forms.lift(ROW_TOTAL, the_plan)
    assert isinstance(refusal, forms.Refusal) and "atomics" in refusal.reason


def test_a_full_reduction_into_a_double_zeroes_the_whole_double_or_refuses():
    source = """extern "C" __global__ void zero_total(double* out) { out[0] = 0.0; }

extern "C" __global__ void dsum(const float* x, double* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(out, (double)x[i]);
}
"""
    the_plan = plan("dsum", ["x", "out", "n"], zero=("zero_total", "out"))
    form = forms.lift(source, the_plan)
    if not isinstance(form, Form):
        return
    result = by_name("full.grid_stride_accumulate").emit(form, the_plan, SUMSQ.task)
    assert isinstance(result, str) or "float* total" not in result.source


# --- how the search's judge ranks a skeleton before anything is measured ------------------------


def test_every_skeleton_names_the_search_families_its_schedule_addresses():
    for skeleton in SKELETONS:
        assert skeleton.families and set(skeleton.families) <= set(FAMILIES), skeleton.name


@pytest.mark.parametrize("skeleton, kernel", [("rows.block_per_row", RMSNORM),
                                              ("rows.split_strided", COLUMN_STATS)])
def test_a_card_with_strong_evidence_outranks_a_block_size_on_a_kernel_not_yet_profiled(skeleton, kernel):
    """--no-profile searches diagnose "unknown": the card must not wait behind tunables (a
    0.4-minute search on groupnorm, 8.9 ms a run, evaluated two block sizes and ran out)."""
    judge = RuleJudge()
    diagnosis = judge.diagnose(NodeContext(task="t", candidate=candidate(emitted(kernel, skeleton)),
                                           measurement=None, diagnosis=None))
    card = Proposal(source=f"skill:skeleton:{skeleton}", title="", rationale="",
                    candidate=candidate(emitted(kernel, skeleton)), families=by_name(skeleton).families,
                    expected_speedup=17.0)
    block = dataclasses.replace(card, source="tunable", families=_BLOCK_LIKE.families, expected_speedup=None)
    assert judge.score(card, diagnosis) > judge.score(block, diagnosis)


POOL_2X2 = Kernel("pool2x2", """extern "C" __global__ void pool2x2(const float* x, float* y, int R, int C) {
    int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o < R * C) {
        int r = o / C, c = o % C;
        float m = -INFINITY;
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++)
                m = fmaxf(m, x[(2 * r + i) * (2 * C) + 2 * c + j]);
        y[o] = m;
    }
}
""", plan("pool2x2", ["x", "y", "R", "C"], grid="cdiv(R * C, BLOCK)"))


@pytest.mark.parametrize("skeleton", ["rows.block_per_row", "rows.split_strided"])
def test_a_window_of_four_read_as_a_row_is_not_spread_over_a_block(skeleton):
    """A 2 x 2 pooling window lifts as a row of 4: a block per row would idle."""
    form = lifted(POOL_2X2)
    assert form.family == ROWS
    spec = task_of(SUMSQ)  # any task: the loop's bound is a number
    reason = by_name(skeleton).emit(form, POOL_2X2.plan, spec)
    assert isinstance(reason, str) and ("rows of 4 iterations" in reason or "steps by 2" in reason), reason
