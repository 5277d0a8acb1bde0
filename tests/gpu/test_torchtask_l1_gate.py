"""A torchtask's L1 check on a real GPU (issue 32): the reference child draws the L1
inputs itself from the worker's draws, opens the candidate's outputs by CUDA IPC and
judges them there (drawn.py), and anything it finds is named on the host as ever.

A small KernelBench-like module (ReLU over batch x dim) at a reduced L1 size checks the
path and its guards in seconds; the last two are ReLU at KernelBench's own level-1 size
(4096 x 393216, 6.4 GB an array), which the gate could not check within a minute before
(bench/results/2026-12-07-h100-kernelbench-batch1/): the correctness checks alone, then
the whole gate. Run them with -s to see the stage seconds.
"""

from __future__ import annotations

import pytest

from profiling.harness import tasks
from profiling.harness.candidate import Candidate
from profiling.harness.gate import GateOptions, evaluate
from profiling.harness.torchtask.task import TorchTask, save

pytestmark = pytest.mark.gpu

RELU = """import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

batch = 1024
dim = 8192

def get_inputs():
    return [torch.rand(batch, dim)]

def get_init_inputs():
    return []
"""
SMALL = {"batch": 1024, "dim": 8192}
KERNELBENCH = {"batch": 4096, "dim": 393216}  # KernelBench level 1, problem 19
BIG = 100_000  # the kernels below misbehave only above this many elements: L0 passes

KERNEL = """extern "C" __global__ void relu(const float* x, float* out, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) { BODY }
}
"""
HONEST = "out[i] = fmaxf(x[i], 0.0f);"
WRONG_AT_L1 = f"out[i] = (n > {BIG} && i == n - 7) ? 1000.0f : fmaxf(x[i], 0.0f);"
UNWRITTEN_AT_L1 = f"if (!(n > {BIG} && i == n - 1)) out[i] = fmaxf(x[i], 0.0f);"
MUTATES_AT_L1 = f"out[i] = fmaxf(x[i], 0.0f); if (n > {BIG} && i == 3) ((float*)x)[i] = 1.0f;"


@pytest.fixture(scope="module", autouse=True)
def registered(tmp_path_factory):
    """The module as a torchtask in a task directory the gate's processes read."""
    folder = tmp_path_factory.mktemp("torchtasks")
    shape = ["batch", "dim"]
    save(TorchTask(name="kb_relu_gpu", source=RELU, sizes=dict(SMALL),
                   l0_sizes=[{"batch": 3, "dim": 5}, {"batch": 7, "dim": 11}, {"batch": 13, "dim": 17}],
                   inputs=[{"name": "x0", "dtype": "float32", "module_dtype": "float32", "shape": shape}],
                   weights=[], outputs=[{"name": "out", "dtype": "float32", "shape": shape}]), folder)
    tasks.add_directory(folder)


def relu(body: str) -> Candidate:
    return Candidate.from_dict({"source": KERNEL.replace("BODY", body), "launches": [
        {"kernel": "relu", "grid": ["cdiv(batch * dim, 256)"], "block": [256],
         "args": ["x0", "out", "i64:batch * dim"]}]})


def gate(body: str, sizes: dict, tmp_path, **options):
    settings = {"profile": False, "sanitize": (), "measure_comparisons": False, "l1_sizes": sizes,
                "workdir": str(tmp_path), **options}
    return evaluate("kb_relu_gpu", relu(body), GateOptions(**settings))


def test_an_honest_kernel_passes_with_its_l1_checks_judged_in_the_reference_child(tmp_path):
    verdict = gate(HONEST, SMALL, tmp_path)
    assert verdict.status == "passed", (verdict.guard, verdict.message[:800])
    l1 = [r for r in verdict.correctness if r.level == "L1"]
    assert len(l1) == GateOptions().seeds and all(r.passed for r in l1)
    assert "the reference child, which drew them again itself" in verdict.environment.inputs
    assert "judged there on inputs it drew itself" in verdict.environment.references
    assert "CUDA IPC" in verdict.environment.references, verdict.environment.references
    assert verdict.timing.spot_checks == GateOptions().spot_checks
    assert "worker_judged_in_child" in verdict.stage_seconds


@pytest.mark.parametrize(("body", "guard"), [
    (WRONG_AT_L1, "wrong_values"),
    (UNWRITTEN_AT_L1, "output_unwritten"),
    (MUTATES_AT_L1, "input_mutated"),
])
def test_what_the_child_or_the_worker_finds_at_l1_is_named_on_the_host(body, guard, tmp_path):
    verdict = gate(body, SMALL, tmp_path, timing_runs=3, warmup_runs=1, spot_checks=1)
    assert verdict.status == "rejected" and verdict.guard == guard, (verdict.guard, verdict.message[:800])
    assert "L1" in verdict.message and all(r.passed for r in verdict.correctness if r.level == "L0")


def test_relu_at_kernelbench_size_is_checked_within_a_minute(tmp_path):
    """What this change is about: the correctness checks, L1 at 1.6e9 elements included."""
    verdict = gate(HONEST, KERNELBENCH, tmp_path, timing_runs=0, time_limit_s=120)
    seconds = {k: round(v, 1) for k, v in verdict.stage_seconds.items()}
    print("stage seconds at 4096 x 393216, correctness only:", seconds)
    assert verdict.status == "passed", (verdict.guard, verdict.message[:800], seconds)
    assert "the reference child, which drew them again itself" in verdict.environment.inputs
    assert verdict.stage_seconds["gpu"] < 60, seconds


def test_relu_at_kernelbench_size_is_checked_timed_and_verified_within_a_minute(tmp_path):
    """The whole standard gate (no profile, no sanitizers): its nine timed-run snapshots
    (58 GB here) go to the host before the child verifies them (drawn.verify_timed_runs)."""
    verdict = gate(HONEST, KERNELBENCH, tmp_path, time_limit_s=120)
    seconds = {k: round(v, 1) for k, v in verdict.stage_seconds.items()}
    print("stage seconds at 4096 x 393216, full gate:", seconds, verdict.environment.references)
    assert verdict.status == "passed", (verdict.guard, verdict.message[:800], seconds)
    assert verdict.stage_seconds["gpu"] < 60, seconds
