"""The scan family (search/engine/forms/scans.py) and its skeleton, scan.block_scan
(blockscans.py): scans written in several styles lift with their running value, term
and direction; kernels that only look like scans are refused with the reason; and what
the skeleton emits compiles with nvcc and computes the reference on the CPU emulator
at sizes that are not multiples of a warp, a block or a chunk."""

import shutil

import pytest
from cuda_on_cpu import CpuKernels, inputs_for, mismatch
from forms_kernels import ROW_PROD, plan
from scan_kernels import (
    CUMMAX_TOTAL,
    CUMMIN_WHILE,
    CUMSUM,
    CUMSUM_IN_MEMORY,
    CUMSUM_LOCAL_INDEX,
    EXCLUSIVE_PROD,
    EXCLUSIVE_SUM_IN_MEMORY,
    NOT_SCANS,
    REVERSE_MASKED,
    SCAN_STYLES,
)

from profiling.harness.candidate import Candidate
from profiling.harness.compile import compile_candidate
from search.engine import forms
from search.engine.forms import ROWS, SCAN, Form, Refusal
from search.engine.forms.skeletons import Emitted, by_name, for_family

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
IDS = [k.name for k in SCAN_STYLES]


def lifted(kernel) -> Form:
    form = forms.lift(kernel.source, kernel.plan)
    assert isinstance(form, Form), form
    return form


def emitted(kernel) -> Emitted:
    result = by_name("scan.block_scan").emit(lifted(kernel), kernel.plan, kernel.task)
    assert isinstance(result, Emitted), result
    return result


@pytest.mark.parametrize("kernel, op, term, reverse", [
    (CUMSUM, "sum", "x[row * N + j]", False),
    (CUMSUM_IN_MEMORY, "sum", "input[r * cols + c]", False),
    (REVERSE_MASKED, "sum", "((m[base + j] > 0.0f) ? (x[base + j]) : 0.0f)", True),
    (EXCLUSIVE_PROD, "prod", "v", False),
    (CUMMAX_TOTAL, "max", "v", False),
    (CUMSUM_LOCAL_INDEX, "sum", "in[idx]", False),
    (EXCLUSIVE_SUM_IN_MEMORY, "sum", "x[row * N + j - 1]", False),
    (CUMMIN_WHILE, "min", "x[base + j]", False),
], ids=IDS)
def test_each_style_lifts_to_a_scan_with_its_running_value_term_and_direction(kernel, op, term, reverse):
    form = lifted(kernel)
    assert form.family == SCAN
    holes = form.holes()
    assert holes["running"].split(": ")[1].startswith(op), holes
    assert form.total == term and form.reverse is reverse


def test_the_term_keeps_the_statements_it_needs_and_nothing_that_writes():
    form = lifted(EXCLUSIVE_PROD)
    assert form.body == "float v = 1.0f + 0.001f * x[i * N + j];"  # not `y[...] = p;`


def test_the_running_value_in_memory_becomes_a_local_read_from_the_element_before_the_loop():
    form = lifted(CUMSUM_IN_MEMORY)
    uniform = [step.text for step in form.steps if isinstance(step, forms.Uniform)]
    assert "float optiml_run = output[r * cols + ((1) - 1)];" in uniform
    assert form.holes()["length"] == "(cols) - (1)"


def test_a_plain_row_reduction_stays_a_row_map_reduce():
    assert lifted(ROW_PROD).family == ROWS


@pytest.mark.parametrize("source, reason", NOT_SCANS,
                         ids=[s.split("void ")[1].split("(")[0] for s, _ in NOT_SCANS])
def test_what_only_looks_like_a_scan_is_refused_with_the_reason(source, reason):
    name = source.split("void ")[1].split("(")[0]
    result = forms.lift(source, plan(name, ["x", "y", "M", "N"], grid="cdiv(M, BLOCK)"))
    assert isinstance(result, Refusal), result
    assert reason in result.reason, result.reason


def test_the_scan_family_has_its_skeleton():
    assert [s.name for s in for_family(SCAN)] == ["scan.block_scan"]


@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.parametrize("kernel", SCAN_STYLES, ids=IDS)
def test_what_the_scan_skeleton_emits_compiles_with_nvcc_for_sm_90(kernel, tmp_path):
    result = emitted(kernel)
    report = compile_candidate(Candidate.from_source_and_plan(result.source, result.plan), cache_dir=tmp_path)
    assert report.ok and not report.errors, report.log[-3000:]


@needs_gxx
@pytest.mark.parametrize("kernel", SCAN_STYLES, ids=IDS)
@pytest.mark.parametrize("block, items", [(256, 4), (64, 1)])
def test_the_scan_skeleton_computes_the_reference_at_every_small_size_on_the_cpu(kernel, block, items,
                                                                                 tmp_path):
    """(64, 1): chunks of 64 elements, so a 1001-element row crosses 16 chunk boundaries."""
    result = emitted(kernel)
    new_plan = {**result.plan, "tunables": {**result.plan["tunables"], "BLOCK": block, "ITEMS": items}}
    kernels = CpuKernels(Candidate.from_source_and_plan(result.source, new_plan), tmp_path)
    for sizes in kernel.task.l0_sizes:
        inputs = inputs_for(kernel.task, sizes)
        assert mismatch(kernel.task, sizes, inputs, kernels.run(kernel.task, sizes, inputs)) is None, sizes
