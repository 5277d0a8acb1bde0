"""Kernel parameters from the PTX against the plan's arguments: kinds, sizes and arity."""

import shutil

import pytest

from profiling.harness import tasks
from profiling.harness.candidate import Candidate, CandidateError, Launch
from profiling.harness.compile import compile_candidate
from profiling.harness.gate import compile_checked
from profiling.harness.signature import F32, I32, I64, POINTER, argument_kind, check_launches, kernel_params

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")

PTX = """
.visible .entry scale(
	.param .u64 scale_param_0,
	.param .u64 scale_param_1,
	.param .u64 scale_param_2,
	.param .f32 scale_param_3,
	.param .align 8 .b8 scale_param_4[16]
)
{
	ret;
}
.visible .entry empty()
{
}
"""


def launch(*args, kernel="scale"):
    return Launch(kernel=kernel, grid=(1,), block=(1,), args=tuple(args))


def test_parameters_are_read_from_each_entry_of_the_ptx():
    assert kernel_params(PTX.splitlines(keepends=True)) == {
        "scale": ["u64", "u64", "u64", "f32", "b8[16]"], "empty": []}


@pytest.mark.parametrize("arg, kind", [
    ("x", POINTER), ("n", I32), ("i32:n", I32), ("i64:n * 2", I64), ("f32:1e-5", F32),
    (2.5, F32), (7, I32), ("x + 1", I32),
])
def test_an_arguments_kind_is_decided_as_the_launch_packs_it(arg, kind):
    assert argument_kind(arg, {"x", "y"}) == kind


def test_a_64_bit_parameter_given_a_plain_size_is_refused_with_the_fix():
    params = {"scale": ["u64", "u64", "u64", "f32"]}
    with pytest.raises(CandidateError) as caught:
        check_launches([launch("x", "y", "n", "f32:2")], params, {"x", "y"})
    message = str(caught.value)
    assert message.startswith("launches[0] (scale): argument 2 ('n') is passed as a 4-byte integer")
    assert "an 8-byte integer or pointer (.param .u64)" in message and "write 'i64:n'" in message
    check_launches([launch("x", "y", "i64:n", "f32:2")], params, {"x", "y"})


@pytest.mark.parametrize("args, fragment", [
    (("x", "y", "n", "n"), "write 'f32:<number>'"),
    (("x", "y", "n", "i64:n"), "write 'f32:<number>'"),
    (("x", "y", "n", "x"), "is passed as a device pointer"),
])
def test_a_float_parameter_given_anything_but_a_float_is_refused(args, fragment):
    with pytest.raises(CandidateError, match="argument 3") as caught:
        check_launches([launch(*args)], {"scale": ["u64", "u64", "u32", "f32"]}, {"x", "y"})
    assert fragment in str(caught.value)


def test_a_32_bit_parameter_given_a_tensor_or_a_64_bit_value_is_refused():
    params = {"scale": ["u64", "u32"]}
    with pytest.raises(CandidateError, match="a tensor is passed as a pointer"):
        check_launches([launch("x", "y")], params, {"x", "y"})
    with pytest.raises(CandidateError, match="write 'n' \\(a 32-bit int\\) or 'i32:n'"):
        check_launches([launch("x", "i64:n")], params, {"x", "y"})


def test_a_launch_with_the_wrong_number_of_arguments_is_refused():
    with pytest.raises(CandidateError, match=r"passes 2 arguments, but scale takes 3 \(u64, u64, u32\)"):
        check_launches([launch("x", "y")], {"scale": ["u64", "u64", "u32"]}, {"x", "y"})


def test_parameters_the_plan_cannot_pass_are_refused():
    for param, words in (("u8", "a 1-byte value"), ("f64", "a double"), ("b8[16]", "16 bytes")):
        with pytest.raises(CandidateError, match=words):
            check_launches([launch("n")], {"scale": [param]}, set())


def test_kernels_whose_parameters_were_not_recorded_are_not_checked():
    check_launches([launch("x", "y", kernel="old")], {"old": None}, {"x"})


LONG_N = """extern "C" __global__ void relu(const float* x, float* y, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.0f);
}
"""


def relu_with(source, args):
    task = tasks.get("relu")
    plan = {**task.naive_plan, "launches": [{**task.naive_plan["launches"][0], "args": args}]}
    return Candidate.from_source_and_plan(source, plan)


@needs_nvcc
def test_the_gate_rejects_a_plan_that_passes_a_32_bit_n_to_a_long_parameter(tmp_path, monkeypatch):
    monkeypatch.setenv("OPTIML_CACHE_DIR", str(tmp_path))
    task = tasks.get("relu")
    verdict = compile_checked(task, relu_with(LONG_N, ["x", "y", "n"]), task.sizes)
    assert (verdict.status, verdict.guard) == ("rejected", "plan")
    assert "argument 2 ('n')" in verdict.message and "write 'i64:n'" in verdict.message
    assert verdict.compile.kernels[0].params == ["u64", "u64", "u64"]
    fixed = compile_checked(task, relu_with(LONG_N, ["x", "y", "i64:n"]), task.sizes)
    assert getattr(fixed, "guard", None) is None


@needs_nvcc
def test_the_gate_rejects_a_plan_that_passes_an_int_to_a_float_parameter(tmp_path, monkeypatch):
    monkeypatch.setenv("OPTIML_CACHE_DIR", str(tmp_path))
    task = tasks.get("layernorm")
    plan = {**task.naive_plan, "launches": [{**task.naive_plan["launches"][0],
                                             "args": ["x", "gamma", "beta", "y", "M", "N", "1"]}]}
    verdict = compile_checked(task, Candidate.from_source_and_plan(task.naive_source, plan), task.sizes)
    assert (verdict.status, verdict.guard) == ("rejected", "plan")
    assert "argument 6 ('1')" in verdict.message and "f32:<number>" in verdict.message


@needs_nvcc
@pytest.mark.parametrize("name", [t.name for t in tasks.all_tasks()])
def test_every_suite_tasks_naive_plan_fits_its_kernels_parameters(tmp_path, name):
    task = tasks.get(name)
    candidate = Candidate.from_source_and_plan(task.naive_source, task.naive_plan)
    report = compile_candidate(candidate, cache_dir=tmp_path)
    assert report.ok and all(k.params is not None for k in report.kernels)
    buffers = {t.name for t in task.all_tensors()} | {s.name for s in candidate.scratch}
    check_launches(candidate.launches, {k.kernel: k.params for k in report.kernels}, buffers)
    cached = compile_candidate(candidate, cache_dir=tmp_path)  # the params survive the cache
    assert cached.cached and [k.params for k in cached.kernels] == [k.params for k in report.kernels]
