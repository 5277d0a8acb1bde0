"""KernelBench modules read as tasks (issue 32, first part): size constants from the
syntax tree, the module run in a sandboxed child on the meta device and on the CPU, each
dimension fitted to the constants, small sizes that run, and clear refusals."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from profiling.harness.torchtask import constants
from profiling.harness.torchtask.importer import fit_dimension, import_files

pytest.importorskip("torch")
LEVEL1 = Path(os.environ.get("OPTIML_KERNELBENCH_DIR") or
              Path(__file__).resolve().parents[3] / "shared" / "kernelbench") / "level1"

MODULE = """import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x, w):
        return torch.relu(x.float() @ w) * self.scale

batch = 64
features = 32 * 4
outputs = 33
shape = (7, 40)
derived = features - 1

def get_inputs():
    return [torch.randn(batch, features), torch.randn(features, outputs)]

def get_init_inputs():
    return [0.5]
"""


def test_size_constants_are_literals_arithmetic_on_literals_and_tuple_elements():
    found = constants.size_constants(MODULE)
    assert found == {"batch": 64, "features": 128, "outputs": 33, "shape_0": 7, "shape_1": 40}
    again = constants.size_constants(constants.with_values(MODULE, {"batch": 5, "shape_1": 3}))
    assert again == {**found, "batch": 5, "shape_1": 3}  # derived = features - 1 follows by itself


def test_a_dimension_is_fitted_to_the_constants_it_follows_at_every_point():
    points = [{"a": 10, "b": 7}, {"a": 111, "b": 108}, {"a": 3, "b": 5}]
    assert fit_dimension([(p, p["b"]) for p in points]) == "b"
    assert fit_dimension([(p, p["a"] * p["b"]) for p in points]) == "a * b"
    assert fit_dimension([(p, p["a"] - 1) for p in points]) == "a - 1"
    assert fit_dimension([(p, 3) for p in points]) == "3"
    assert fit_dimension([(p, p["a"] + p["b"]) for p in points]) is None


def _write(tmp_path: Path, name: str, source: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    return path


def test_a_module_becomes_sizes_shapes_in_its_constants_and_small_sizes_that_run(tmp_path):
    (problem,) = import_files([_write(tmp_path, "linear_relu", MODULE)])
    assert problem.refused is None, problem.refused
    assert problem.sizes["batch"] == 64 and problem.sizes["features"] == 128
    assert [(t.name, t.shape, t.dtype) for t in problem.inputs] == [
        ("x0", ["batch", "features"], "float32"), ("x1", ["features", "outputs"], "float32")]
    assert [(t.name, t.shape) for t in problem.outputs] == [("out", ["batch", "outputs"])]
    assert len(problem.l0_sizes) == 3 and all(s["batch"] < 64 for s in problem.l0_sizes)
    assert problem.init == [{"kind": "float", "value": 0.5}]


FORWARD = "return torch.relu(x.float() @ w) * self.scale"


@pytest.mark.parametrize(("change", "reason"), [
    (("class Model", "class Module"), "defines no Model"),
    ((FORWARD, "return torch.nn.functional.dropout(x @ w, 0.5, True)"), "forward is random"),
    ((FORWARD, "return x.shape[0]"), "other than tensors"),
    # runs only where features == outputs, as at the small sizes that give both one value
    ((FORWARD, "return x @ w.t()"), "does not run at its own sizes"),
    (("batch = 64", "batch = = 64"), "does not parse"),
    (("torch.randn(batch, features)", "torch.randint(0, 5, (batch, features), dtype=torch.int8)"),
     "int8, which the harness does not hold"),
])
def test_what_cannot_be_a_task_is_refused_with_its_reason(tmp_path, change, reason):
    (problem,) = import_files([_write(tmp_path, "bad", MODULE.replace(*change))])
    assert problem.refused is not None and reason in problem.refused, problem.refused


def test_a_module_that_hangs_is_stopped_and_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("OPTIML_PROBE_RUN_S", "2")
    hanging = MODULE.replace(FORWARD, "while True: pass")
    (problem,) = import_files([_write(tmp_path, "hang", hanging)])
    assert problem.refused is not None and "ran past 2 s" in problem.refused


@pytest.mark.skipif(not LEVEL1.is_dir(), reason="KernelBench level 1 is not beside this checkout")
def test_kernelbench_level_1_is_read_as_tasks():
    problems = {p.name: p for p in import_files(sorted(LEVEL1.glob("*.py")))}
    assert len(problems) == 100
    read = [p for p in problems.values() if p.refused is None]
    assert len(read) >= 90, [(p.name, p.refused) for p in problems.values() if p.refused]
    softmax = problems["23_Softmax"]
    assert softmax.inputs[0].shape == softmax.outputs[0].shape == ["batch_size", "dim"]
    argmax = problems["51_Argmax_over_a_dimension"]
    assert argmax.outputs[0].shape == ["batch_size", "dim2"] and argmax.outputs[0].dtype == "int64"
    transposed = problems["17_Matmul_with_transposed_B"]
    assert [t.shape for t in transposed.inputs] == [["M", "K"], ["N", "K"]]
