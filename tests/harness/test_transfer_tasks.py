"""The transfer suite (bench/transfer_tasks/): twelve operators the product has never seen.

CPU only: the registry loads them from OPTIML_TASK_PATH, each reference runs at every L0
size and agrees with a slow formulation, the naive kernels compile through the gate's
own path (nvcc) and their plans pass its check, and the 1-D ones run on the CPU
emulator (tests/search/cuda_on_cpu.py) within the task's tolerance.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from profiling.harness import expr, gate, tasks
from profiling.harness.candidate import Candidate
from profiling.harness.spec import Task
from tests.search.cuda_on_cpu import CpuKernels, mismatch

REPO = Path(__file__).resolve().parents[2]
TRANSFER_DIR = REPO / "bench" / "transfer_tasks"
TRANSFER_NAMES = [
    "add_rmsnorm", "addmm_gelu", "conv1x1", "depthwise3x3", "gemv", "groupnorm",
    "mse_loss", "rotary", "silu_mul", "upsample2x", "var_mean", "where",
]  # fmt: skip
SUITE_NAMES = {
    "conv2d", "cross_entropy", "layernorm", "maxpool3d", "reduce_sum",
    "relu", "self_attention", "sgemm", "softmax", "topk",
}  # fmt: skip
DISTRIBUTIONS = ("normal", "heavy_tailed")
NVCC = shutil.which("nvcc")


def load_transfer_tasks() -> dict[str, Task]:
    """The tasks of bench/transfer_tasks, loaded through the registry; the registry is left
    as it was found (the suite's own tests expect exactly its ten tasks)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(tasks.TASK_PATH_VARIABLE, str(TRANSFER_DIR))
        tasks._reset_for_tests()
        try:
            return {task.name: task for task in tasks.all_tasks() if task.name in TRANSFER_NAMES}
        finally:
            tasks._reset_for_tests()


TASKS = load_transfer_tasks()


def make_inputs(task: Task, sizes: dict[str, int], distribution: str, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {spec.name: spec.make(rng, sizes, distribution) for spec in task.inputs}


def accepts(task: Task, outputs: dict, expected: dict, inputs: dict, sizes: dict) -> bool:
    """The task's verdict on `outputs`: its comparison, or the elementwise tolerance."""
    if task.comparison() is not None:
        return task.comparison()(outputs, expected, inputs, sizes) is None
    for spec in task.outputs:
        tolerance = task.tolerance_for(spec.dtype)
        if not np.allclose(outputs[spec.name], expected[spec.name], tolerance.rtol, tolerance.atol):
            return False
    return True


# --- registry -----------------------------------------------------------------------


def test_the_transfer_directory_holds_the_twelve_tasks_each_in_its_own_file(monkeypatch):
    monkeypatch.setenv(tasks.TASK_PATH_VARIABLE, str(TRANSFER_DIR))
    tasks._reset_for_tests()
    try:
        names = [task.name for task in tasks.all_tasks()]
        assert len(names) == len(set(names))  # the registry raises on a duplicate; say it here too
        assert sorted(set(names) - SUITE_NAMES) == TRANSFER_NAMES
        assert all(tasks.get(name) is not None for name in TRANSFER_NAMES)
    finally:
        tasks._reset_for_tests()
    files = sorted(path.stem for path in TRANSFER_DIR.glob("*.py"))
    assert files == sorted([*TRANSFER_NAMES, "vendor"])
    assert sorted(path.stem for path in (TRANSFER_DIR / "naive").glob("*.cu")) == TRANSFER_NAMES
    assert sorted(TASKS) == TRANSFER_NAMES


def test_loading_the_directory_does_not_import_torch():
    # vendor.py sits among the task files, so the registry imports it on hosts without torch.
    program = (
        "import sys; from profiling.harness import tasks; tasks.all_tasks(); "
        "assert 'torch' not in sys.modules, 'torch was imported'"
    )
    env = {**os.environ, tasks.TASK_PATH_VARIABLE: str(TRANSFER_DIR), "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", program], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("name", TRANSFER_NAMES)
def test_a_transfer_task_has_float_inputs_and_no_gpu_measurement_yet(name):
    task = TASKS[name]
    assert all(spec.dtype == "float32" and spec.generate is None for spec in task.inputs)
    assert all(spec.dtype == "float32" for spec in task.outputs)
    assert task.vendor is None and task.naive_ms is None
    assert task.bytes(task.sizes) == task.footprint_bytes(task.sizes)
    assert task.flops(task.sizes) >= 0
    assert 3 <= len(task.l0_sizes) <= 5
    assert task.naive_source == (TRANSFER_DIR / "naive" / f"{name}.cu").read_text()


# --- references ---------------------------------------------------------------------

L0_CASES = [
    pytest.param(name, sizes, distribution, id=f"{name}-{i}-{distribution}")
    for name in TRANSFER_NAMES
    for i, sizes in enumerate(TASKS[name].l0_sizes)
    for distribution in DISTRIBUTIONS
]


@pytest.mark.parametrize(("name", "sizes", "distribution"), L0_CASES)
def test_the_reference_has_the_declared_outputs_and_leaves_its_inputs_alone(name, sizes, distribution):
    task = TASKS[name]
    inputs = make_inputs(task, sizes, distribution)
    untouched = {key: array.copy() for key, array in inputs.items()}
    outputs = task.reference(inputs, sizes)
    assert set(outputs) == {spec.name for spec in task.outputs}
    for spec in task.outputs:
        assert outputs[spec.name].shape == spec.resolve_shape(sizes), spec.name
        assert outputs[spec.name].dtype == spec.numpy_dtype(), spec.name
        assert np.isfinite(outputs[spec.name]).all(), spec.name
    for key, array in inputs.items():
        np.testing.assert_array_equal(array, untouched[key], err_msg=f"{key} was modified")
    assert accepts(task, outputs, task.reference(inputs, sizes), inputs, sizes)


def slow_silu_mul(i, s):
    rows = []
    for row in i["x"].tolist():
        gates, values = row[: s["D"]], row[s["D"] :]
        # silu(a) = a / (1 + e**-a); below -700 e**-a overflows a double and silu is -0
        rows.append(
            [a / (1 + math.exp(-a)) * b if a > -700 else 0.0 for a, b in zip(gates, values, strict=True)]
        )
    return {"out": rows}


def slow_rotary(i, s):
    x, cos, sin, half = i["x"].astype(float), i["cos"].astype(float), i["sin"].astype(float), s["D"] // 2
    out = np.empty(x.shape)
    for pos, head, k in np.ndindex(s["S"], s["H"], half):
        a, b, c, t = x[pos, head, k], x[pos, head, k + half], cos[pos, k], sin[pos, k]
        out[pos, head, k], out[pos, head, k + half] = a * c - b * t, b * c + a * t
    return {"out": out}


def slow_add_rmsnorm(i, s):
    hs, ys = [], []
    for x_row, r_row in zip(i["x"].tolist(), i["r"].tolist(), strict=True):
        h = [a + b for a, b in zip(x_row, r_row, strict=True)]
        scale = 1.0 / math.sqrt(math.fsum(v * v for v in h) / len(h) + 1e-6)
        hs.append(h)
        ys.append([v * scale * w for v, w in zip(h, i["w"].tolist(), strict=True)])
    return {"h": hs, "y": ys}


def slow_groupnorm(i, s):
    x, per_group = i["x"].astype(float), s["C"] // s["G"]
    y = np.empty(x.shape)
    for n, g in np.ndindex(s["N"], s["G"]):
        channels = slice(g * per_group, (g + 1) * per_group)
        values = x[n, channels].ravel().tolist()
        mean = math.fsum(values) / len(values)
        scale = 1.0 / math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values) + 1e-5)
        for c in range(g * per_group, (g + 1) * per_group):
            y[n, c] = (x[n, c] - mean) * scale * float(i["gamma"][c]) + float(i["beta"][c])
    return {"y": y}


def slow_var_mean(i, s):
    x = i["x"].astype(np.float64)
    return {"var": np.var(x, axis=1), "mean": np.mean(x, axis=1)}


def slow_mse_loss(i, s):
    return {"loss": [math.fsum((a - b) ** 2 for a, b in zip(i["a"].tolist(), i["b"].tolist(), strict=True))
                     / s["n"]]}  # fmt: skip


def slow_gemv(i, s):
    x = i["x"].tolist()
    return {"y": [math.fsum(a * b for a, b in zip(row, x, strict=True)) for row in i["A"].tolist()]}


def slow_addmm_gelu(i, s):
    a, b, bias = i["A"].tolist(), i["B"].tolist(), i["bias"].tolist()
    out = []
    for row in range(s["M"]):
        z = [bias[col] + math.fsum(a[row][k] * b[k][col] for k in range(s["K"])) for col in range(s["N"])]
        out.append([v / 2 * (1 + math.erf(v / math.sqrt(2))) for v in z])
    return {"out": out}


def slow_conv1x1(i, s):
    x, w, bias = i["x"], i["w"], i["bias"]
    y = np.empty((s["N"], s["K"], s["H"], s["W"]))
    for n, k, row, col in np.ndindex(*y.shape):
        y[n, k, row, col] = float(bias[k]) + math.fsum(
            float(w[k, c]) * float(x[n, c, row, col]) for c in range(s["C"])
        )
    return {"y": y}


def slow_depthwise3x3(i, s):
    x, w = i["x"], i["w"]
    y = np.empty(x.shape)
    for n, c, row, col in np.ndindex(*y.shape):
        y[n, c, row, col] = math.fsum(
            float(x[n, c, row + r - 1, col + t - 1]) * float(w[c, r, t])
            for r in range(3) for t in range(3)
            if 0 <= row + r - 1 < s["H"] and 0 <= col + t - 1 < s["W"]
        )  # fmt: skip
    return {"y": y}


def slow_upsample2x(i, s):
    x = i["x"]
    y = np.empty((s["N"], s["C"], 2 * s["H"], 2 * s["W"]), dtype=np.float32)
    for n, c, row, col in np.ndindex(*y.shape):
        y[n, c, row, col] = x[n, c, row // 2, col // 2]
    return {"y": y}


def slow_where(i, s):
    return {"out": [a if c > 0 else b for c, a, b in zip(i["cond"].tolist(), i["a"].tolist(), i["b"].tolist(),
                                                          strict=True)]}  # fmt: skip


SLOW = {
    "silu_mul": ({"M": 3, "D": 7}, slow_silu_mul),
    "rotary": ({"S": 3, "H": 2, "D": 6}, slow_rotary),
    "add_rmsnorm": ({"M": 3, "N": 19}, slow_add_rmsnorm),
    "groupnorm": ({"N": 2, "C": 6, "H": 3, "W": 5, "G": 3}, slow_groupnorm),
    "var_mean": ({"M": 4, "N": 37}, slow_var_mean),
    "mse_loss": ({"n": 1001}, slow_mse_loss),
    "gemv": ({"M": 5, "K": 37}, slow_gemv),
    "addmm_gelu": ({"M": 5, "N": 7, "K": 9}, slow_addmm_gelu),
    "conv1x1": ({"N": 2, "C": 3, "H": 4, "W": 5, "K": 2}, slow_conv1x1),
    "depthwise3x3": ({"N": 2, "C": 3, "H": 5, "W": 4}, slow_depthwise3x3),
    "upsample2x": ({"N": 2, "C": 3, "H": 3, "W": 5}, slow_upsample2x),
    "where": ({"n": 101}, slow_where),
}


def test_every_transfer_task_has_a_slow_formulation():
    assert sorted(SLOW) == TRANSFER_NAMES


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
@pytest.mark.parametrize("name", TRANSFER_NAMES)
def test_the_reference_agrees_with_a_slow_formulation(name, distribution):
    task, (sizes, slow) = TASKS[name], SLOW[name]
    inputs = make_inputs(task, sizes, distribution, seed=7)
    fast, expected = task.reference(inputs, sizes), slow(inputs, sizes)
    for spec in task.outputs:
        # The reference rounds float64 results to fp32 once: 2**-24 relative, plus a
        # little where the norms and the GELU cancel.
        np.testing.assert_allclose(
            fast[spec.name], np.asarray(expected[spec.name]), rtol=2e-7, atol=1e-6, err_msg=name
        )


def test_where_takes_b_for_zero_negative_zero_and_negative_conditions():
    task, sizes = TASKS["where"], {"n": 5}
    inputs = {
        "cond": np.array([1e-30, 0.0, -0.0, -2.0, 3.0], dtype=np.float32),
        "a": np.arange(5, dtype=np.float32),
        "b": -np.arange(5, dtype=np.float32) - 10,
    }
    np.testing.assert_array_equal(task.reference(inputs, sizes)["out"], [0, -11, -12, -13, 4])


def test_silu_mul_stays_finite_where_exp_of_the_gate_overflows():
    task, sizes = TASKS["silu_mul"], {"M": 1, "D": 3}
    inputs = {"x": np.array([[-1000.0, 1000.0, 0.0, 2.0, 3.0, 4.0]], dtype=np.float32)}
    np.testing.assert_allclose(task.reference(inputs, sizes)["out"], [[-0.0, 3000.0, 0.0]])


ALLOWANCE_TASKS = ["addmm_gelu", "conv1x1", "depthwise3x3", "gemv", "groupnorm", "rotary"]


def test_the_tasks_checked_by_an_allowance_are_these():
    assert sorted(name for name, task in TASKS.items() if task.allowance is not None) == ALLOWANCE_TASKS
    assert all(task.compare is None for task in TASKS.values())


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
@pytest.mark.parametrize("name", ALLOWANCE_TASKS)
def test_an_allowance_rejects_one_wrong_value_and_nan(name, distribution):
    task = TASKS[name]
    sizes = task.l0_sizes[1]
    inputs = make_inputs(task, sizes, distribution)
    expected = task.reference(inputs, sizes)
    (output,) = [spec.name for spec in task.outputs]
    wrong = expected[output].copy()
    flat = wrong.reshape(-1)
    flat[flat.size // 2] += 1 + abs(flat[flat.size // 2])
    found = task.comparison()({output: wrong}, expected, inputs, sizes)
    assert found is not None and found.bad_elements == 1
    flat[flat.size // 2] = np.nan
    assert task.comparison()({output: wrong}, expected, inputs, sizes) is not None


def sequential_groupnorm(inputs: dict, sizes: dict) -> np.ndarray:
    """The naive kernel's arithmetic: fp32, each sum one value at a time, two passes."""
    x = inputs["x"].reshape(sizes["N"] * sizes["G"], -1)
    count = np.float32(x.shape[1])
    mean = np.cumsum(x, axis=1, dtype=np.float32)[:, -1] / count
    centred = x - mean[:, None]
    variance = np.cumsum(centred * centred, axis=1, dtype=np.float32)[:, -1] / count
    scaled = (centred * (np.float32(1) / np.sqrt(variance + np.float32(1e-5)))[:, None]).reshape(
        sizes["N"], sizes["C"], -1)  # fmt: skip
    y = scaled * inputs["gamma"][None, :, None] + inputs["beta"][None, :, None]
    return y.reshape(inputs["x"].shape)


@pytest.mark.parametrize("seed", [0, 1])
def test_groupnorm_accepts_fp32_sums_over_a_long_group_where_a_fixed_tolerance_would_not(seed):
    task, sizes = TASKS["groupnorm"], {"N": 2, "C": 8, "H": 128, "W": 128, "G": 1}
    inputs = make_inputs(task, sizes, "heavy_tailed", seed=seed)
    expected = task.reference(inputs, sizes)
    sequential = sequential_groupnorm(inputs, sizes)
    assert sequential.dtype == np.float32
    assert task.comparison()({"y": sequential}, expected, inputs, sizes) is None
    assert not np.allclose(sequential, expected["y"], rtol=1e-4, atol=1e-4)  # the default tolerance


def round_to_tf32(array: np.ndarray) -> np.ndarray:
    """Round fp32 to TF32's 10 explicit mantissa bits (nearest, ties away), as fp32."""
    bits = array.astype(np.float32).view(np.uint32).astype(np.uint64)
    return (((bits + 0x1000) & 0xFFFFE000).astype(np.uint32)).view(np.float32)


def sequential_addmm_gelu(a: np.ndarray, b: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """fp32 throughout, one accumulator from the bias on, a term at a time: the naive kernel."""
    terms = np.concatenate([np.broadcast_to(bias, (a.shape[0], 1, b.shape[1])),
                            a[:, :, None] * b[None, :, :]], axis=1)  # fmt: skip
    z = np.cumsum(terms, axis=1, dtype=np.float32)[:, -1, :]
    erf = np.vectorize(math.erf, otypes=[np.float32])
    return np.float32(0.5) * z * (np.float32(1) + erf(z / np.float32(math.sqrt(2))))


def tanh_gelu(z: np.ndarray) -> np.ndarray:
    return 0.5 * z * (1 + np.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z**3)))


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_addmm_gelu_accepts_sequential_fp32_and_rejects_tf32(distribution):
    task, sizes = TASKS["addmm_gelu"], {"M": 48, "N": 64, "K": 1031}
    inputs = make_inputs(task, sizes, distribution)
    a, b, bias = inputs["A"], inputs["B"], inputs["bias"]
    expected, compare = task.reference(inputs, sizes), task.comparison()
    assert compare({"out": sequential_addmm_gelu(a, b, bias)}, expected, inputs, sizes) is None
    tf32 = task.reference({**inputs, "A": round_to_tf32(a), "B": round_to_tf32(b)}, sizes)
    assert compare(tf32, expected, inputs, sizes) is not None


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_addmm_gelu_rejects_the_tanh_approximation_at_its_short_l0_reduction(distribution):
    task = TASKS["addmm_gelu"]
    sizes = task.l0_sizes[-1]
    assert sizes["K"] <= 3
    inputs = make_inputs(task, sizes, distribution)
    a, b, bias = inputs["A"], inputs["B"], inputs["bias"]
    expected, compare = task.reference(inputs, sizes), task.comparison()
    assert compare({"out": sequential_addmm_gelu(a, b, bias)}, expected, inputs, sizes) is None
    approximate = tanh_gelu(a.astype(np.float64) @ b + bias).astype(np.float32)
    assert compare({"out": approximate}, expected, inputs, sizes) is not None


# --- the vendor calls ---------------------------------------------------------------


@pytest.mark.parametrize("name", TRANSFER_NAMES)
def test_the_vendor_call_computes_what_the_reference_does(name):
    torch = pytest.importorskip("torch")
    from bench.transfer_tasks.vendor import OPS

    assert sorted(OPS) == TRANSFER_NAMES
    task = TASKS[name]
    sizes = task.l0_sizes[1]
    make_inputs_on, call = OPS[name]
    torch.manual_seed(0)
    arguments = make_inputs_on(sizes, "cpu")
    inputs = {spec.name: arguments[k].numpy() for k, spec in enumerate(task.inputs)}
    for spec in task.inputs:
        assert inputs[spec.name].shape == spec.resolve_shape(sizes), spec.name
    with torch.no_grad():
        produced = call(*arguments)
    produced = produced if isinstance(produced, tuple) else (produced,)
    outputs = {spec.name: value.reshape(spec.resolve_shape(sizes)).numpy()
               for spec, value in zip(task.outputs, produced, strict=True)}  # fmt: skip
    assert accepts(task, outputs, task.reference(inputs, sizes), inputs, sizes)


# --- plans and naive kernels --------------------------------------------------------

GRID_LIMITS = (2**31 - 1, 65535, 65535)  # CUDA: grid x, y, z
BLOCK_LIMITS = (1024, 1024, 64)  # CUDA: block x, y, z; 1024 threads in all


def naive(task: Task) -> Candidate:
    return Candidate.from_source_and_plan(task.naive_source, task.naive_plan)


@pytest.mark.parametrize("name", TRANSFER_NAMES)
def test_the_naive_plan_passes_the_gates_check_at_l1_and_every_l0_size(name):
    task = TASKS[name]
    gate.check_plan(task, naive(task), task.sizes)  # raises CandidateError on a bad plan


def plan_cases() -> list:
    return [
        pytest.param(name, sizes, id=f"{name}-{level}")
        for name in TRANSFER_NAMES
        for level, sizes in [("L1", TASKS[name].sizes), *[(f"L0-{i}", s) for i, s in
                                                           enumerate(TASKS[name].l0_sizes)]]
    ]  # fmt: skip


@pytest.mark.parametrize(("name", "sizes"), plan_cases())
def test_the_naive_plan_launches_within_cuda_limits_and_int_indices(name, sizes):
    task = TASKS[name]
    candidate = naive(task)
    names = {**sizes, **candidate.tunables}
    buffers = {spec.name for spec in task.all_tensors()}
    for launch in candidate.launches:
        grid = [expr.evaluate_int(dim, names) for dim in launch.grid]
        block = [expr.evaluate_int(dim, names) for dim in launch.block]
        assert all(1 <= g <= limit for g, limit in zip(grid, GRID_LIMITS, strict=False)), grid
        assert all(1 <= b <= limit for b, limit in zip(block, BLOCK_LIMITS, strict=False)), block
        assert math.prod(block) <= 1024
        assert expr.evaluate_int(launch.shared_bytes, names) == 0
        for arg in launch.args:
            if isinstance(arg, str) and (arg in buffers or arg.startswith("f32:")):
                continue
            assert -(2**31) <= expr.evaluate_int(arg, names) < 2**31, arg
    # The naive kernels index with int, as a newcomer does: no tensor may hold 2**31 values.
    for spec in task.all_tensors():
        assert math.prod(spec.resolve_shape(sizes)) < 2**31, spec.name


@pytest.fixture
def cpu_gate(tmp_path, monkeypatch):
    """The gate as on a host without a GPU, compiling into a cache of this test's own."""
    monkeypatch.setattr(gate, "gpu_name", lambda: None)
    monkeypatch.setenv("OPTIML_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.nvcc
@pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH (install the CUDA toolkit)")
@pytest.mark.parametrize("name", TRANSFER_NAMES)
def test_the_naive_kernel_compiles_through_the_gate_with_every_planned_entry(name, cpu_gate):
    task = TASKS[name]
    verdict = gate.compile_checked(task, naive(task), task.sizes)
    # "incomplete" is what the gate says of a kernel it compiled and checked, plan and
    # arguments against the PTX, and could only run on a GPU.
    assert verdict.status == "incomplete", verdict.message
    report = verdict.compile
    assert report.ok, report.log
    assert {launch["kernel"] for launch in task.naive_plan["launches"]} <= {k.kernel for k in report.kernels}
    for kernel in report.kernels:
        assert kernel.spill_store_bytes == 0 and kernel.shared_static_bytes == 0, kernel


# --- the naive kernels on the CPU emulator ------------------------------------------

TWO_D = {  # the emulator runs 1-D launches only (cuda_on_cpu.py's docstring)
    "addmm_gelu": "a 2-D grid of 2-D blocks, as sgemm's naive kernel",
    "upsample2x": "a 3-D grid: output columns, output rows, N * C planes",
}


def test_exactly_the_naive_kernels_named_two_d_launch_more_than_one_dimension():
    multi = sorted(name for name, task in TASKS.items()
                   if any(len(launch["grid"]) > 1 or len(launch["block"]) > 1
                          for launch in task.naive_plan["launches"]))  # fmt: skip
    assert multi == sorted(TWO_D)


@pytest.fixture(scope="module")
def emulated(tmp_path_factory):
    """name -> CpuKernels of its naive kernel, compiled once (g++, seconds each)."""
    built: dict[str, CpuKernels] = {}

    def get(name: str) -> CpuKernels:
        if name not in built:
            built[name] = CpuKernels(naive(TASKS[name]), tmp_path_factory.mktemp(name))
        return built[name]

    return get


EMULATED_CASES = [
    pytest.param(name, sizes, id=f"{name}-L0-{i}")
    if name not in TWO_D
    else pytest.param(name, sizes, id=f"{name}-L0-{i}",
                      marks=pytest.mark.skip(reason=f"emulator runs 1-D launches only; {TWO_D[name]}"))
    for name in TRANSFER_NAMES
    for i, sizes in enumerate(TASKS[name].l0_sizes)
]  # fmt: skip


@pytest.mark.skipif(shutil.which("g++") is None, reason="the emulator compiles with g++")
@pytest.mark.parametrize(("name", "sizes"), EMULATED_CASES)
def test_the_naive_kernel_on_the_cpu_emulator_matches_the_reference(name, sizes, emulated):
    task = TASKS[name]
    for seed, distribution in enumerate(DISTRIBUTIONS):
        inputs = make_inputs(task, sizes, distribution, seed=seed)
        outputs = emulated(name).run(task, sizes, inputs)
        assert mismatch(task, sizes, inputs, outputs) is None, (distribution, sizes)
