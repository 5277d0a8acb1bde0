"""The task suite: registry, references, custom comparisons, naive kernels and plans.

CPU only. The nvcc tests compile every naive kernel with the real compiler.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest

from profiling.harness import expr, tasks
from profiling.harness.candidate import Candidate
from profiling.harness.spec import Task

TASK_NAMES = [
    "conv2d", "cross_entropy", "layernorm", "maxpool3d", "reduce_sum",
    "relu", "self_attention", "sgemm", "softmax", "topk",
]  # fmt: skip
DISTRIBUTIONS = ("normal", "heavy_tailed")


def make_inputs(task: Task, sizes: dict[str, int], distribution: str, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {spec.name: spec.make(rng, sizes, distribution) for spec in task.inputs}


def accepts(task: Task, outputs: dict, expected: dict, inputs: dict, sizes: dict) -> bool:
    """The task's verdict on `outputs`: its compare, or the elementwise tolerance."""
    if task.comparison() is not None:
        return task.comparison()(outputs, expected, inputs, sizes) is None
    for spec in task.outputs:
        tolerance = task.tolerance_for(spec.dtype)
        if not np.allclose(outputs[spec.name], expected[spec.name], tolerance.rtol, tolerance.atol):
            return False
    return True


@pytest.fixture
def fresh_registry():
    tasks._reset_for_tests()
    yield
    tasks._reset_for_tests()


# --- registry ---------------------------------------------------------------------


def test_the_registry_holds_exactly_the_ten_tasks_sorted_by_name():
    assert [task.name for task in tasks.all_tasks()] == TASK_NAMES
    assert tasks.get("softmax").name == "softmax"


def test_an_unknown_name_raises_unknown_task_naming_the_known_ones():
    with pytest.raises(tasks.UnknownTask) as caught:
        tasks.get("no_such_task")
    assert isinstance(caught.value, KeyError)
    assert "no_such_task" in str(caught.value)
    assert all(name in str(caught.value) for name in TASK_NAMES)


USER_TASK = """
import numpy as np
from profiling.harness.spec import Task, TensorSpec

TASK = Task(
    name="{name}",
    description="copy",
    sizes={{"n": 8}},
    l0_sizes=({{"n": 3}},),
    inputs=(TensorSpec("x", "float32", ("n",)),),
    outputs=(TensorSpec("y", "float32", ("n",)),),
    reference=lambda inputs, sizes: {{"y": inputs["x"].copy()}},
    flops=lambda sizes: 0.0,
    bytes=lambda sizes: 8.0 * sizes["n"],
    naive_source="extern \\"C\\" __global__ void copy() {{}}",
    naive_plan={{"launches": [{{"kernel": "copy", "grid": [1], "block": [1], "args": []}}]}},
)
"""


def test_a_task_file_in_optiml_task_path_is_discovered(tmp_path, monkeypatch, fresh_registry):
    (tmp_path / "user_copy.py").write_text(USER_TASK.format(name="user_copy"))
    (tmp_path / "helpers.py").write_text("VALUE = 1  # no TASK: not a task\n")
    monkeypatch.setenv("OPTIML_TASK_PATH", str(tmp_path))
    assert tasks.get("user_copy").sizes == {"n": 8}
    assert [task.name for task in tasks.all_tasks()] == sorted([*TASK_NAMES, "user_copy"])


def test_a_duplicate_task_name_is_an_error_naming_both_files(tmp_path, monkeypatch, fresh_registry):
    (tmp_path / "my_relu.py").write_text(USER_TASK.format(name="relu"))
    monkeypatch.setenv("OPTIML_TASK_PATH", str(tmp_path))
    with pytest.raises(tasks.TaskDefinitionError) as caught:
        tasks.get("relu")
    assert "my_relu.py" in str(caught.value)
    assert str(Path(tasks.__file__).with_name("relu.py")) in str(caught.value)


def test_a_task_path_that_is_not_a_directory_is_an_error(tmp_path, monkeypatch, fresh_registry):
    monkeypatch.setenv("OPTIML_TASK_PATH", str(tmp_path / "missing"))
    with pytest.raises(tasks.TaskDefinitionError, match="missing"):
        tasks.all_tasks()


# --- references ---------------------------------------------------------------------

L0_CASES = [
    pytest.param(task, sizes, distribution, id=f"{task.name}-{i}-{distribution}")
    for task in tasks.all_tasks()
    for i, sizes in enumerate(task.l0_sizes)
    for distribution in DISTRIBUTIONS
]


@pytest.mark.parametrize(("task", "sizes", "distribution"), L0_CASES)
def test_the_reference_has_the_declared_outputs_and_leaves_its_inputs_alone(task, sizes, distribution):
    inputs = make_inputs(task, sizes, distribution)
    untouched = {name: array.copy() for name, array in inputs.items()}
    outputs = task.reference(inputs, sizes)
    assert set(outputs) == {spec.name for spec in task.outputs}
    for spec in task.outputs:
        assert outputs[spec.name].shape == spec.resolve_shape(sizes), spec.name
        assert outputs[spec.name].dtype == spec.numpy_dtype(), spec.name
        assert np.isfinite(outputs[spec.name]).all(), spec.name
    for name, array in inputs.items():
        np.testing.assert_array_equal(array, untouched[name], err_msg=f"{name} was modified")
    assert accepts(task, outputs, task.reference(inputs, sizes), inputs, sizes)


def slow_relu(i, s):
    return {"y": [max(v, 0.0) for v in i["x"].tolist()]}


def slow_reduce_sum(i, s):
    return {"y": [math.fsum(i["x"].tolist())]}


def slow_softmax(i, s):
    rows = []
    for row in i["x"].tolist():
        top = max(row)
        weights = [math.exp(v - top) for v in row]
        rows.append([w / math.fsum(weights) for w in weights])
    return {"y": rows}


def slow_layernorm(i, s):
    gamma, beta, rows = i["gamma"].tolist(), i["beta"].tolist(), []
    for row in i["x"].tolist():
        mean = math.fsum(row) / len(row)
        variance = math.fsum((v - mean) ** 2 for v in row) / len(row)
        scale = 1.0 / math.sqrt(variance + 1e-5)
        rows.append([(v - mean) * scale * g + b for v, g, b in zip(row, gamma, beta, strict=True)])
    return {"y": rows}


def slow_cross_entropy(i, s):
    losses = []
    for row, label in zip(i["logits"].tolist(), i["labels"].tolist(), strict=True):
        top = max(row)
        losses.append(top + math.log(math.fsum(math.exp(v - top) for v in row)) - row[label])
    return {"loss": losses}


def slow_maxpool3d(i, s):
    x, out_sides = i["x"], [(side + 2 - 3) // 2 + 1 for side in (s["D"], s["H"], s["W"])]
    y = np.empty((s["N"], s["C"], *out_sides))
    for n, c, od, oh, ow in np.ndindex(*y.shape):
        y[n, c, od, oh, ow] = max(
            x[n, c, d, h, w]
            for d in range(2 * od - 1, 2 * od + 2) if 0 <= d < s["D"]
            for h in range(2 * oh - 1, 2 * oh + 2) if 0 <= h < s["H"]
            for w in range(2 * ow - 1, 2 * ow + 2) if 0 <= w < s["W"]
        )  # fmt: skip
    return {"y": y}


def slow_sgemm(i, s):
    a, b = i["A"].tolist(), i["B"].tolist()
    return {
        "C": [[math.fsum(a[r][k] * b[k][c] for k in range(s["K"])) for c in range(s["N"])]
              for r in range(s["M"])]
    }  # fmt: skip


def slow_self_attention(i, s):
    q, k, v = (i[name].astype(np.float64) for name in "qkv")
    out = np.empty(q.shape)
    for b, h, row in np.ndindex(s["B"], s["H"], s["S"]):
        scores = [float(q[b, h, row] @ k[b, h, j]) / math.sqrt(s["D"]) for j in range(s["S"])]
        weights = [math.exp(score - max(scores)) for score in scores]
        total = math.fsum(weights)
        out[b, h, row] = sum(w / total * v[b, h, j] for j, w in enumerate(weights))
    return {"out": out}


def slow_conv2d(i, s):
    x, w, bias = i["x"], i["w"], i["bias"]
    y = np.empty((s["N"], s["K"], s["H"], s["W"]))
    for n, k, row, col in np.ndindex(*y.shape):
        total = float(bias[k])
        for c, r, t in np.ndindex(s["C"], 3, 3):
            if 0 <= row + r - 1 < s["H"] and 0 <= col + t - 1 < s["W"]:
                total += float(x[n, c, row + r - 1, col + t - 1]) * float(w[k, c, r, t])
        y[n, k, row, col] = total
    return {"y": y}


def slow_topk(i, s):
    values, indices = [], []
    for row in i["x"].tolist():
        chosen = sorted(range(len(row)), key=lambda j: (-row[j], j))[: s["k"]]
        indices.append(chosen)
        values.append([row[j] for j in chosen])
    return {"values": values, "indices": indices}


SLOW = {
    "relu": ({"n": 37}, slow_relu),
    "reduce_sum": ({"n": 1001}, slow_reduce_sum),
    "softmax": ({"M": 3, "N": 17}, slow_softmax),
    "layernorm": ({"M": 3, "N": 19}, slow_layernorm),
    "cross_entropy": ({"B": 4, "C": 23}, slow_cross_entropy),
    "maxpool3d": ({"N": 2, "C": 2, "D": 5, "H": 4, "W": 7}, slow_maxpool3d),
    "sgemm": ({"M": 5, "N": 7, "K": 9}, slow_sgemm),
    "self_attention": ({"B": 1, "H": 2, "S": 5, "D": 3}, slow_self_attention),
    "conv2d": ({"N": 2, "C": 3, "H": 5, "W": 4, "K": 2}, slow_conv2d),
    "topk": ({"M": 3, "N": 50, "k": 5}, slow_topk),
}


def test_every_task_has_a_slow_formulation():
    assert sorted(SLOW) == TASK_NAMES


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
@pytest.mark.parametrize("name", TASK_NAMES)
def test_the_reference_agrees_with_a_slow_formulation(name, distribution):
    task, (sizes, slow) = tasks.get(name), SLOW[name]
    inputs = make_inputs(task, sizes, distribution, seed=7)
    fast, expected = task.reference(inputs, sizes), slow(inputs, sizes)
    for spec in task.outputs:
        # The reference rounds float64 results to fp32 once: 2**-24 relative, plus a
        # little for cancellation in layer norm and cross entropy.
        np.testing.assert_allclose(
            fast[spec.name], np.asarray(expected[spec.name]), rtol=2e-7, atol=1e-6, err_msg=name
        )


# --- custom comparisons -------------------------------------------------------------


def round_to_tf32(array: np.ndarray) -> np.ndarray:
    """Round fp32 to TF32's 10 explicit mantissa bits (nearest, ties away), as fp32."""
    bits = array.astype(np.float32).view(np.uint32).astype(np.uint64)
    return (((bits + 0x1000) & 0xFFFFE000).astype(np.uint32)).view(np.float32)


def sequential_fp32_sum(terms: np.ndarray, axis: int) -> np.ndarray:
    """One fp32 accumulator, term after term: the least accurate order a kernel may use."""
    return np.take(np.cumsum(terms, axis=axis, dtype=np.float32), -1, axis=axis)


def with_one_wrong_element(expected: dict, name: str) -> dict:
    wrong = {key: value.copy() for key, value in expected.items()}
    flat = wrong[name].reshape(-1)
    flat[flat.size // 2] += 1 + abs(flat[flat.size // 2])
    return wrong


COMPARE_TASKS = ["conv2d", "reduce_sum", "self_attention", "sgemm", "topk"]


def test_the_tasks_with_custom_comparisons_are_these():
    assert [t.name for t in tasks.all_tasks() if t.comparison() is not None] == COMPARE_TASKS
    # Those whose bound depends only on the data say so (kept with the reference: inputs.py).
    assert [t.name for t in tasks.all_tasks() if t.allowance is not None] == [
        "conv2d", "self_attention", "sgemm"]


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
@pytest.mark.parametrize("name", COMPARE_TASKS)
def test_a_custom_comparison_rejects_one_wrong_value_and_nan(name, distribution):
    task = tasks.get(name)
    sizes = task.l0_sizes[1]
    inputs = make_inputs(task, sizes, distribution)
    expected = task.reference(inputs, sizes)
    first = task.outputs[0].name
    compare = task.comparison()
    mismatch = compare(with_one_wrong_element(expected, first), expected, inputs, sizes)
    assert mismatch is not None and mismatch.output == first
    assert mismatch.bad_elements >= 1
    poisoned = {key: value.copy() for key, value in expected.items()}
    poisoned[first].reshape(-1)[-1] = np.nan
    assert compare(poisoned, expected, inputs, sizes) is not None


def topk_case(sizes: dict | None = None) -> tuple[Task, dict, dict, dict]:
    task = tasks.get("topk")
    sizes = sizes or {"M": 6, "N": 300, "k": 16}
    inputs = make_inputs(task, sizes, "normal")
    return task, sizes, inputs, task.reference(inputs, sizes)


@pytest.mark.parametrize("bad_index", [-1, 300, 10**6])
def test_topk_rejects_an_index_outside_the_row(bad_index):
    task, sizes, inputs, expected = topk_case()
    outputs = {key: value.copy() for key, value in expected.items()}
    outputs["indices"][2, 5] = bad_index
    mismatch = task.comparison()(outputs, expected, inputs, sizes)
    assert mismatch is not None and "outside" in mismatch.message


def test_topk_rejects_an_index_repeated_within_a_row():
    task, sizes, inputs, expected = topk_case()
    outputs = {key: value.copy() for key, value in expected.items()}
    outputs["indices"][3, 7] = outputs["indices"][3, 6]
    mismatch = task.comparison()(outputs, expected, inputs, sizes)
    assert mismatch is not None and "repeat" in mismatch.message


def test_topk_rejects_indices_that_do_not_point_at_their_values():
    task, sizes, inputs, expected = topk_case()
    outputs = {key: value.copy() for key, value in expected.items()}
    outputs["indices"][1, [0, 1]] = outputs["indices"][1, [1, 0]]
    mismatch = task.comparison()(outputs, expected, inputs, sizes)
    assert mismatch is not None and "differs" in mismatch.message


def test_topk_rejects_values_out_of_order():
    task, sizes, inputs, expected = topk_case()
    outputs = {key: value.copy() for key, value in expected.items()}
    for name in ("values", "indices"):
        outputs[name][0, [3, 4]] = outputs[name][0, [4, 3]]
    assert task.comparison()(outputs, expected, inputs, sizes) is not None


def test_topk_accepts_either_index_of_a_tie():
    task, sizes, inputs, _ = topk_case({"M": 1, "N": 10, "k": 3})
    inputs["x"][0] = [0.0, 5.0, 1.0, 5.0, 2.0, 4.0, 5.0, 0.0, 3.0, 1.0]
    expected = task.reference(inputs, sizes)
    for indices in ([1, 3, 6], [6, 1, 3], [3, 6, 1]):
        outputs = {"values": expected["values"], "indices": np.array([indices], dtype=np.int32)}
        assert task.comparison()(outputs, expected, inputs, sizes) is None, indices


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_reduce_sum_accepts_a_sequential_fp32_sum_and_rejects_fp16_accumulation(distribution):
    task, sizes = tasks.get("reduce_sum"), {"n": 2**20}
    inputs = make_inputs(task, sizes, distribution)
    expected = task.reference(inputs, sizes)
    fp32_sum = sequential_fp32_sum(inputs["x"], axis=0).reshape(1)
    assert task.comparison()({"y": fp32_sum}, expected, inputs, sizes) is None
    # numpy rounds the running sum to fp16 after every add, as an fp16 accumulator does.
    fp16_sum = np.cumsum(inputs["x"].astype(np.float16), dtype=np.float16)[-1:]
    mismatch = task.comparison()({"y": fp16_sum.astype(np.float32)}, expected, inputs, sizes)
    assert mismatch is not None and mismatch.output == "y"


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
@pytest.mark.parametrize("k", [1031, 4096])
def test_sgemm_accepts_fp32_in_any_order_and_rejects_tf32(distribution, k):
    task, sizes = tasks.get("sgemm"), {"M": 48, "N": 64, "K": k}
    inputs = make_inputs(task, sizes, distribution)
    a, b = inputs["A"], inputs["B"]
    expected = task.reference(inputs, sizes)
    sequential = sequential_fp32_sum(a[:, :, None] * b[None, :, :], axis=1)
    for fp32 in (sequential, a @ b):
        assert task.comparison()({"C": fp32}, expected, inputs, sizes) is None
    # TF32 exceeds the allowance on a few percent of the elements at K = 4096 (normal
    # data), most of them at smaller K: one is enough to reject, and L1 has 1.7e7.
    tf32 = (round_to_tf32(a).astype(np.float64) @ round_to_tf32(b)).astype(np.float32)
    mismatch = task.comparison()({"C": tf32}, expected, inputs, sizes)
    assert mismatch is not None and mismatch.bad_elements >= 5


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_conv2d_accepts_fp32_and_rejects_tf32(distribution):
    task, sizes = tasks.get("conv2d"), {"N": 2, "C": 64, "H": 6, "W": 5, "K": 8}
    inputs = make_inputs(task, sizes, distribution)
    expected = task.reference(inputs, sizes)
    x, w, bias = inputs["x"], inputs["w"], inputs["bias"]
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    taps = [  # (N, K, H, W, taps) products, summed one at a time in fp32 below
        padded[:, None, c, r : r + sizes["H"], t : t + sizes["W"]] * w[None, :, c, r, t, None, None]
        for c in range(sizes["C"]) for r in range(3) for t in range(3)
    ]  # fmt: skip
    terms = np.stack([np.broadcast_to(bias[None, :, None, None], taps[0].shape), *taps], axis=-1)
    sequential = sequential_fp32_sum(terms, axis=-1)
    assert sequential.dtype == np.float32
    assert task.comparison()({"y": sequential}, expected, inputs, sizes) is None
    rounded = {**inputs, "x": round_to_tf32(inputs["x"]), "w": round_to_tf32(inputs["w"])}
    tf32 = task.reference(rounded, sizes)
    assert task.comparison()(tf32, expected, inputs, sizes) is not None


def fp32_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Attention in fp32 throughout, sums one term at a time: a correct, plain kernel."""
    scores = sequential_fp32_sum(q[..., :, None, :] * k[..., None, :, :], axis=-1)
    scores = scores / np.float32(math.sqrt(q.shape[-1]))
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    probabilities = weights / sequential_fp32_sum(weights, axis=-1)[..., None]
    return sequential_fp32_sum(probabilities[..., :, :, None] * v[..., None, :, :], axis=-2)


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_self_attention_accepts_fp32_and_rejects_tf32(distribution):
    task, sizes = tasks.get("self_attention"), {"B": 1, "H": 2, "S": 256, "D": 64}
    inputs = make_inputs(task, sizes, distribution)
    expected = task.reference(inputs, sizes)
    fp32 = fp32_attention(inputs["q"], inputs["k"], inputs["v"])
    assert fp32.dtype == np.float32
    assert task.comparison()({"out": fp32}, expected, inputs, sizes) is None
    tf32 = task.reference({name: round_to_tf32(array) for name, array in inputs.items()}, sizes)
    assert task.comparison()(tf32, expected, inputs, sizes) is not None


# --- plans, counts and naive kernels ------------------------------------------------

GRID_LIMITS = (2**31 - 1, 65535, 65535)  # CUDA: grid x, y, z
BLOCK_LIMITS = (1024, 1024, 64)  # CUDA: block x, y, z; 1024 threads in all


def plan_cases() -> list:
    return [
        pytest.param(task, sizes, id=f"{task.name}-{level}")
        for task in tasks.all_tasks()
        for level, sizes in [("L1", task.sizes), *[(f"L0-{i}", s) for i, s in enumerate(task.l0_sizes)]]
    ]


@pytest.mark.parametrize(("task", "sizes"), plan_cases())
def test_the_naive_plan_launches_within_cuda_limits(task, sizes):
    candidate = Candidate.from_source_and_plan(task.naive_source, task.naive_plan)
    names = {**sizes, **candidate.tunables}
    buffers = {spec.name for spec in task.all_tensors()} | {s.name for s in candidate.scratch}
    for scratch in candidate.scratch:
        assert expr.evaluate_int(scratch.count, names) >= 1
    for launch in candidate.launches:
        grid = [expr.evaluate_int(dim, names) for dim in launch.grid]
        block = [expr.evaluate_int(dim, names) for dim in launch.block]
        assert all(1 <= g <= limit for g, limit in zip(grid, GRID_LIMITS, strict=False)), grid
        assert all(1 <= b <= limit for b, limit in zip(block, BLOCK_LIMITS, strict=False)), block
        assert math.prod(block) <= 1024
        assert 0 <= expr.evaluate_int(launch.shared_bytes, names) <= 48 * 1024
        for arg in launch.args:
            if isinstance(arg, str) and arg in buffers:
                continue
            if isinstance(arg, str) and arg.startswith("f32:"):
                float(arg[4:])
            elif isinstance(arg, str) and arg.startswith("i64:"):
                expr.evaluate_int(arg[4:], names)
            else:  # passed as a 32-bit int
                assert -(2**31) <= expr.evaluate_int(arg, names) < 2**31, arg


# GPU.md's effective rates: bytes (or FLOPs) / vendor time, for the counts to reproduce.
GPU_MD_RATES = {
    "relu": 4245e9, "reduce_sum": 4149e9, "softmax": 1885e9, "layernorm": 2810e9,
    "cross_entropy": 1236e9, "maxpool3d": 1175e9, "topk": 332e9,
    "sgemm": 50.7e12, "self_attention": 33.47e12, "conv2d": 37.95e12,
}  # fmt: skip
COMPUTE_BOUND = {"sgemm", "self_attention", "conv2d"}


@pytest.mark.parametrize("name", TASK_NAMES)
def test_byte_and_flop_counts_reproduce_the_vendor_rates_in_gpu_md(name):
    task = tasks.get(name)
    count = task.flops(task.sizes) if name in COMPUTE_BOUND else task.bytes(task.sizes)
    assert count / (task.vendor.time_ms * 1e-3) == pytest.approx(GPU_MD_RATES[name], rel=0.01)
    assert task.bytes(task.sizes) == task.footprint_bytes(task.sizes)
    assert task.flops(task.sizes) > 0


NVCC = shutil.which("nvcc")


@pytest.mark.nvcc
@pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH (install the CUDA toolkit)")
@pytest.mark.parametrize("name", TASK_NAMES)
def test_the_naive_kernel_compiles_and_exports_every_planned_entry(name, tmp_path):
    task = tasks.get(name)
    source = tmp_path / f"{name}.cu"
    source.write_text(task.naive_source)
    defines = [f"-D{key}={value}" for key, value in task.naive_plan.get("tunables", {}).items()]
    command = [NVCC, "-arch=sm_90", "-cubin", "-O3", "-Xptxas", "-v", *defines,
               "-o", str(tmp_path / "k.cubin"), str(source)]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    log = result.stdout + result.stderr
    assert result.returncode == 0, textwrap.indent(log, "    ")
    entries = set(re.findall(r"Compiling entry function '(\w+)'", log))
    # An extern "C" kernel keeps its plain name; a C++ one would be mangled (_Z...).
    assert {launch["kernel"] for launch in task.naive_plan["launches"]} <= entries, entries
    assert set(re.findall(r"(\d+) bytes spill stores", log)) <= {"0"}, log


def test_a_task_file_that_asks_the_registry_while_it_loads_is_an_error_not_a_hang(tmp_path, monkeypatch,
                                                                                   fresh_registry):
    """It deadlocked: the registry imports task files under its lock, and the file's call
    waited for that lock (found when a GPU test's task files imported a test module)."""
    (tmp_path / "asks.py").write_text("from profiling.harness import tasks\nTASK = tasks.get('relu')\n")
    monkeypatch.setenv("OPTIML_TASK_PATH", str(tmp_path))
    with pytest.raises(tasks.TaskDefinitionError, match="while the registry imports it"):
        tasks.get("relu")
