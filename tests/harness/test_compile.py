"""nvcc for sm_90 on a machine without a GPU: resources, cache, errors with lines, policy."""

import re
import shutil
from pathlib import Path

import pytest

from profiling.harness.candidate import Candidate
from profiling.harness.compile import compile_candidate, parse_ptxas
from profiling.harness.policy import PolicyViolation

pytestmark = pytest.mark.nvcc
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")

RELU = """extern "C" __global__ void relu(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    __shared__ float tile[BLOCK];
    if (i < n) { tile[threadIdx.x] = x[i]; y[i] = fmaxf(tile[threadIdx.x], 0.0f); }
}
"""


def candidate(source=RELU, options=(), tunables=None):
    return Candidate.from_dict(
        {
            "source": source,
            "compile_options": list(options),
            "tunables": tunables or {"BLOCK": 256},
            "launches": [{"kernel": "relu", "grid": [1], "block": [1], "args": ["x", "y", "n"]}],
        }
    )


@needs_nvcc
def test_it_compiles_a_cubin_and_reads_each_kernels_resources(tmp_path):
    report = compile_candidate(candidate(), cache_dir=tmp_path)
    assert report.ok and not report.cached
    (relu,) = report.kernels
    assert relu.kernel == "relu" and relu.registers > 0
    assert relu.shared_static_bytes == 256 * 4  # BLOCK arrived as -DBLOCK=256
    assert Path(report.cubin_path).read_bytes()[:4] == b"\x7fELF"


@needs_nvcc
def test_the_second_compile_of_the_same_candidate_is_a_cache_hit(tmp_path):
    first = compile_candidate(candidate(), cache_dir=tmp_path)
    second = compile_candidate(candidate(), cache_dir=tmp_path)
    assert second.cached and second.cubin_sha256 == first.cubin_sha256
    other = compile_candidate(candidate(tunables={"BLOCK": 128}), cache_dir=tmp_path)
    assert not other.cached and other.kernels[0].shared_static_bytes == 128 * 4


@needs_nvcc
def test_compiler_errors_point_at_the_users_own_lines(tmp_path):
    broken = RELU.replace("fmaxf(tile[threadIdx.x], 0.0f)", "fmaxf(tile[threadIdx.x], missing)")
    report = compile_candidate(candidate(broken), cache_dir=tmp_path)
    assert not report.ok
    assert report.errors[0].line == 4 and "missing" in report.errors[0].message
    assert str(tmp_path) not in report.log  # no host paths leak into what users see


@needs_nvcc
def test_spills_are_parsed_from_a_kernel_forced_to_spill(tmp_path):
    source = """extern "C" __global__ void relu(float* y, int n) {
        float a[64];
        #pragma unroll
        for (int i = 0; i < 64; i++) a[i] = y[i * n + threadIdx.x];
        float s = 0;
        #pragma unroll
        for (int i = 0; i < 64; i++) s += a[i] * a[63 - i] * a[(i * 7) % 64];
        y[threadIdx.x] = s;
    }"""
    report = compile_candidate(candidate(source, options=["--maxrregcount=16"]), cache_dir=tmp_path)
    assert report.ok
    assert report.kernels[0].registers <= 24  # ptxas raises a cap of 16 to its sm_90 minimum
    assert report.kernels[0].spill_store_bytes > 0


def test_ptxas_output_is_parsed_per_entry():
    log = """ptxas info    : Compiling entry function 'big' for 'sm_90'
ptxas info    : Function properties for big
    256 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 32 registers, used 1 barriers, 256 bytes cumulative stack size, 4096 bytes smem
ptxas info    : Compiling entry function 'relu' for 'sm_90'
ptxas info    : Used 10 registers, used 0 barriers
"""
    big, relu = parse_ptxas(log)
    assert (big.kernel, big.registers, big.spill_store_bytes, big.spill_load_bytes) == ("big", 32, 8, 12)
    assert (big.shared_static_bytes, big.barriers, big.stack_frame_bytes) == (4096, 1, 256)
    assert (relu.kernel, relu.registers, relu.shared_static_bytes) == ("relu", 10, 0)


@pytest.mark.parametrize(
    "source, fragment",
    [
        ("__global__ void c(){}\n" + RELU.replace("if (i < n)", "c<<<1,1>>>(); if (i < n)"), "<<<"),
        ('#line 1 "x"\n' + RELU, "#line"),
        ('#embed "/etc/passwd"\n' + RELU, "#embed"),
    ],
)
def test_sources_whose_text_reaches_outside_the_kernel_are_refused_before_nvcc(
        tmp_path, monkeypatch, source, fragment):
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvcc: the refusal cannot have come from it
    with pytest.raises(PolicyViolation) as caught:
        compile_candidate(candidate(source), cache_dir=tmp_path)
    assert caught.value.guard == "source_policy" and fragment in str(caught.value)


@needs_nvcc
@pytest.mark.parametrize(
    "include, named",
    [
        ('#include "/etc/passwd"', "/etc/passwd"),
        ("#include </etc/passwd>", "/etc/passwd"),
        # gcc names this one as it found it: "../../etc/passwd" or, resolved against an
        # include folder, "/etc/passwd"
        ("#include <../../etc/passwd>", "etc/passwd"),
    ],
)
def test_includes_outside_the_include_folders_are_refused_naming_the_file(tmp_path, include, named):
    with pytest.raises(PolicyViolation) as caught:
        compile_candidate(candidate(include + "\n" + RELU), cache_dir=tmp_path)
    assert caught.value.guard == "source_policy"
    message = str(caught.value)
    assert re.search(r"includes '[./]*" + re.escape(named.lstrip("/")) + "'", message), message
    assert "outside the toolkit's" in message


@needs_nvcc
def test_toolkit_and_system_headers_may_be_included_with_quotes_or_brackets(tmp_path):
    source = '#include "cuda_fp16.h"\n#include <cuda/std/cstdint>\n#include <math.h>\n' + RELU
    assert compile_candidate(candidate(source), cache_dir=tmp_path).ok


def test_a_launch_inside_a_comment_is_not_a_violation(tmp_path):
    from profiling.harness.policy import check_source

    check_source("// launch as kernel<<<grid, block>>>\n/* or <<<x>>> */\n#include <cuda_fp16.h>\n" + RELU)


@pytest.mark.parametrize(
    "option", ["-rdc=true", "-I/etc", "-o/tmp/x", "--keep", "-lcudadevrt", "-DX=$(whoami)", "-ccbin=/bin/sh"]
)
def test_compiler_options_outside_the_allow_list_are_refused(tmp_path, option):
    with pytest.raises(PolicyViolation) as caught:
        compile_candidate(candidate(options=[option]), cache_dir=tmp_path)
    assert caught.value.guard == "compile_policy"
