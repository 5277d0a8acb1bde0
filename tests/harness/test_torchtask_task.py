"""A PyTorch module as a gate task (issue 32, second part): the module itself as the
reference in float64 in a child of its own, its parameters as the kernel's inputs,
integer targets in their range, the tolerance rule, the vendor calls, the physics floor,
the gpuref path, and clear refusals."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from profiling.harness import tasks
from profiling.harness.inputs import make_inputs
from profiling.harness.torchtask import constants, rule
from profiling.harness.torchtask.__main__ import main as cli
from profiling.harness.torchtask.build import build_task
from profiling.harness.torchtask.importer import import_files
from profiling.harness.torchtask.task import NotATask, save, to_task

torch = pytest.importorskip("torch")
F = torch.nn.functional
LEVEL1 = Path(os.environ.get("OPTIML_KERNELBENCH_DIR") or
              Path(__file__).resolve().parents[3] / "shared" / "kernelbench") / "level1"

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"
NO_INIT = "def get_init_inputs():\n    return []\n"


def module(forward: str, inputs: str, sizes: str, init: str = "", init_inputs: str = NO_INIT,
           arguments: str = "x") -> str:
    return (f"{HEADER}class Model(nn.Module):\n    def __init__(self, *args):\n        super().__init__()\n"
            f"{init or '        pass'}\n\n    def forward(self, {arguments}):\n        return {forward}\n\n"
            f"{sizes}\n\ndef get_inputs():\n    return {inputs}\n\n{init_inputs}")


ROWS = "batch = 64\ndim = 96\n"
GOOD = {
    "elementwise": module("torch.sigmoid(x) * 2.0 - x", "[torch.rand(batch, dim)]", ROWS),
    "reduction": module("torch.logsumexp(x, dim=1)", "[torch.randn(batch, dim)]", ROWS),
    "linear": module("torch.relu(self.fc(x))", "[torch.rand(batch, features)]",
                     "batch = 64\nfeatures = 96\nwidth = 40\n",
                     init="        self.fc = nn.Linear(*args)",
                     init_inputs="def get_init_inputs():\n    return [features, width]\n"),
    "targets": module("F.cross_entropy(x, t, reduction='none')",
                      "[torch.rand(batch, classes), torch.randint(0, classes, (batch,))]",
                      "batch = 64\nclasses = 37\n", arguments="x, t"),
}
BAD = {
    "random": (module("F.dropout(x, 0.5, True)", "[torch.rand(batch, dim)]", ROWS), "forward is random"),
    "not_tensors": (module("x.shape[0]", "[torch.rand(batch, dim)]", ROWS), "other than tensors"),
    "half": (module("x * 2", "[torch.rand(batch, dim, dtype=torch.float16)]", ROWS), "float32 only"),
    "buffers": (module("self.bn(x)", "[torch.rand(batch, dim)]", ROWS,
                       init="        self.bn = nn.BatchNorm1d(*args)\n        self.bn.eval()",
                       init_inputs="def get_init_inputs():\n    return [dim]\n"),
                "reads the module's buffers"),
    "dtype_dependent": (module("x + torch.finfo(x.dtype).eps * 1e9", "[torch.rand(batch, dim)]", ROWS),
                        "disagree beyond the tolerance"),
    "log": (module("torch.log(x)", "[torch.rand(batch, dim)]", ROWS), "on normal inputs"),
    "no_model": (module("x", "[torch.rand(batch, dim)]", ROWS).replace("class Model", "class Net"),
                 "defines no Model"),
}


def _write(folder: Path, name: str, source: str) -> Path:
    path = folder / f"{name}.py"
    path.write_text(source)
    return path


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Every module above, read in one importer batch and built (the L0 checks run)."""
    folder = tmp_path_factory.mktemp("modules")
    sources = {**GOOD, **{name: source for name, (source, _) in BAD.items()}}
    paths = [_write(folder, name, source) for name, source in sources.items()]
    problems = {p.name: p for p in import_files(paths)}
    results = {}
    for name, problem in problems.items():
        try:
            results[name] = build_task(problem, sources[name])
        except NotATask as refusal:
            results[name] = refusal
    return problems, results


def torch_run(d, inputs: dict, sizes: dict, dtype) -> list:
    """The module run here, as a test may: its float32 or float64 output on these inputs."""
    namespace = {}
    exec(constants.with_values(d.source, sizes), namespace)  # noqa: S102  (the tests' own modules)
    model = namespace["Model"](*namespace["get_init_inputs"]()).to(dtype)
    tensors = [torch.from_numpy(np.asarray(inputs[t["name"]])) for t in d.inputs]
    tensors = [t.to(dtype) if t.is_floating_point() else t.long() for t in tensors]
    weights = {w["parameter"]: torch.from_numpy(inputs[w["name"]]).to(dtype) for w in d.weights}
    with torch.no_grad():
        out = torch.func.functional_call(model, weights, tuple(tensors))
    return [o.reshape(-1) if o.dim() == 0 else o for o in (out if isinstance(out, tuple) else [out])]


@pytest.mark.parametrize("name", sorted(GOOD))
def test_the_reference_is_the_module_in_float64_and_torchs_float32_passes_it_at_l0(built, name):
    d = built[1][name]
    assert not isinstance(d, NotATask), d
    task = to_task(d)
    compare = task.comparison()
    for index, sizes in enumerate(task.l0_sizes):
        distribution = task.distributions[index % len(task.distributions)]
        inputs = make_inputs(task, sizes, seed=7 + index, distribution=distribution)
        expected = task.reference(inputs, sizes)
        wide = torch_run(d, inputs, sizes, torch.float64)
        narrow = torch_run(d, inputs, sizes, torch.float32)
        for o, w in zip(task.outputs, wide, strict=True):
            np.testing.assert_allclose(expected[o.name], w.numpy().astype(o.dtype), rtol=1e-6, atol=1e-7)
            assert expected[o.name].dtype == np.dtype(o.dtype)
        outputs = {o.name: n.numpy().astype(o.dtype) for o, n in zip(task.outputs, narrow, strict=True)}
        assert compare(outputs, expected, inputs, sizes) is None, (name, sizes)
        first = task.outputs[0].name
        off = np.asarray(1e-3, outputs[first].dtype) * (1 + abs(outputs[first]))  # KernelBench v0.1 passes it
        wrong = {**outputs, first: outputs[first] + off}
        assert compare(wrong, expected, inputs, sizes) is not None, (name, sizes)


def test_a_modules_parameters_are_inputs_named_after_them_and_the_reference_uses_them(built):
    d = built[1]["linear"]
    task = to_task(d)
    assert [(t.name, t.shape) for t in task.inputs] == [("x0", ("batch", "features")),
                                                      ("fc_weight", ("width", "features")),
                                                      ("fc_bias", ("width",))]
    sizes = task.l0_sizes[0]
    inputs = make_inputs(task, sizes, seed=3, distribution="normal")
    x, w, b = (inputs[n].astype(np.float64) for n in ("x0", "fc_weight", "fc_bias"))
    np.testing.assert_allclose(task.reference(inputs, sizes)["out"], np.maximum(x @ w.T + b, 0), rtol=1e-6,
                               atol=1e-7)
    # the floor: FlopCounterMode's 2 M N K at the task's own sizes; bytes: every tensor once
    s = task.sizes
    assert task.flops(s) == 2 * s["batch"] * s["features"] * s["width"]
    assert task.bytes(s) == 4 * (s["batch"] * s["features"] + s["width"] * s["features"] + s["width"]
                                 + s["batch"] * s["width"])


def test_integer_targets_stay_in_the_range_get_inputs_drew_them_from(built):
    d = built[1]["targets"]
    task = to_task(d)
    targets = task.inputs[1]
    assert (targets.dtype, targets.refresh) == ("int32", "int:0:classes")
    assert d.inputs[1]["module_dtype"] == "int64" and any("int32 for the kernel" in n for n in d.notes)
    for sizes in (*task.l0_sizes, task.sizes):
        drawn = make_inputs(task, sizes, seed=5, distribution="normal")["x1"]
        assert drawn.dtype == np.int32 and drawn.min() >= 0 and drawn.max() < sizes["classes"]
    sizes = task.l0_sizes[-1]
    inputs = make_inputs(task, sizes, seed=5, distribution="heavy_tailed")
    truth = F.cross_entropy(torch.from_numpy(inputs["x0"]).double(), torch.from_numpy(inputs["x1"]).long(),
                            reduction="none")
    np.testing.assert_allclose(task.reference(inputs, sizes)["out"], truth.numpy(), rtol=1e-6)


@pytest.mark.parametrize("name", sorted(BAD))
def test_what_cannot_be_a_task_is_refused_with_its_reason(built, name):
    refusal = built[1][name]
    assert isinstance(refusal, NotATask), refusal
    assert BAD[name][1] in refusal.reason and "Traceback" not in str(refusal)


def test_a_task_over_the_gpu_memory_budget_is_refused_before_anything_runs(built):
    problem = built[0]["elementwise"]
    with pytest.raises(NotATask, match="over the GPU memory budget"):
        build_task(problem, GOOD["elementwise"], memory_budget_bytes=1024)


def test_the_allowance_is_the_tolerance_plus_torchs_own_float32_rounding():
    reference = np.array([1.0, -2.0, 1000.0], np.float32)
    low = reference + np.array([0.0, 1e-3, 0.0], np.float32)
    allowed = rule.allowed("float32", reference, low)
    slack = rule.ROUNDING_FACTOR * abs(float(low[1]) - float(reference[1]))
    np.testing.assert_allclose(allowed, 1e-4 + 1e-4 * np.abs(reference.astype(np.float64)) + slack)
    assert rule.allowed("int64", np.arange(3), np.arange(3)) == 0.0
    fp32 = rule.tolerance("float32")
    assert fp32.atol <= 1e-4 and fp32.rtol <= 1e-4  # never looser than KernelBench's main


def test_the_reference_runs_on_torch_tensors_in_gpurefs_own_process(built, monkeypatch, tmp_path):
    from profiling.harness.gpuref import DEVICE_ENV, GpuReferences
    from profiling.harness.inputs import Expected, allowance_of, reference_outputs

    d = built[1]["linear"]
    save(d, tmp_path / "tasks")
    monkeypatch.setenv(tasks.TASK_PATH_VARIABLE, str(tmp_path / "tasks"))
    monkeypatch.setenv(DEVICE_ENV, "cpu")
    tasks._reset_for_tests()
    try:
        task = tasks.get("linear")  # through the registry, as the gate's processes find it
        refs = GpuReferences(task, str(tmp_path))
        try:
            for level, sizes in (("L0", task.l0_sizes[0]), ("L1", task.l0_sizes[1])):
                inputs = make_inputs(task, sizes, seed=9, distribution="heavy_tailed")
                reference = reference_outputs(task, inputs, sizes)
                allowed = allowance_of(task, inputs, reference, sizes)
                refs.cross_check(level, inputs, sizes, Expected(reference, allowed))
            assert refs.usable, refs.describe()
            served = refs.expected(inputs, sizes)
            np.testing.assert_array_equal(served["out"], reference["out"])
        finally:
            refs.close()
    finally:
        tasks._reset_for_tests()


def test_the_cli_prints_the_task_or_why_it_is_not_one(built, tmp_path, capsys):
    good = _write(tmp_path, "elementwise", GOOD["elementwise"])
    bad = _write(tmp_path, "no_model", BAD["no_model"][0])
    assert cli(["task", str(good), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["sizes"] == {"batch": 64, "dim": 96} and len(shown["l0_sizes"]) == 3
    assert shown["tolerances"]["float32"].startswith("|out - ref| <= 0.0001 + 0.0001 |ref|")
    assert [c["mode"] for c in shown["vendor"]] == ["eager", "compile"]
    assert shown["bytes_l1"] == 2 * 4 * 64 * 96 and all(f["ms"] > 0 for f in shown["floor_ms"].values())
    assert cli(["task", str(bad)]) == 1
    assert "not a task: the module defines no Model" in capsys.readouterr().out


LEVEL1_PROBLEMS = ("23_Softmax", "95_CrossEntropyLoss", "50_conv_standard_2D__square_input__square_kernel",
                   "98_KLDivLoss")


@pytest.fixture(scope="module")
def level1():
    if not LEVEL1.is_dir():
        pytest.skip("KernelBench level 1 is not beside this checkout")
    from profiling.harness.torchtask.build import build_tasks

    results = build_tasks([LEVEL1 / f"{name}.py" for name in LEVEL1_PROBLEMS])
    return dict(zip(LEVEL1_PROBLEMS, results, strict=True))


def test_kernelbench_problems_become_tasks_whose_reference_torchs_float32_passes(level1):
    for name in LEVEL1_PROBLEMS[:3]:
        d = level1[name]
        assert not isinstance(d, NotATask), d
        task = to_task(d)
        sizes = task.l0_sizes[0]
        inputs = make_inputs(task, sizes, seed=1, distribution="normal")
        expected = task.reference(inputs, sizes)
        narrow = torch_run(d, inputs, sizes, torch.float32)
        outputs = {o.name: n.numpy().astype(o.dtype).reshape(expected[o.name].shape)
                   for o, n in zip(task.outputs, narrow, strict=True)}
        assert task.comparison()(outputs, expected, inputs, sizes) is None, name
    cross_entropy = to_task(level1["95_CrossEntropyLoss"])
    assert cross_entropy.inputs[1].refresh == "int:0:num_classes" and cross_entropy.outputs[0].shape == (1,)
    conv = level1["50_conv_standard_2D__square_input__square_kernel"]
    assert [w["name"] for w in conv.weights] == ["conv1_weight", "conv1_bias"]
    assert to_task(conv).flops(conv.sizes) > 1e10  # FlopCounterMode's count at the problem's sizes
    assert isinstance(level1["98_KLDivLoss"], NotATask) and "normal" in level1["98_KLDivLoss"].reason
