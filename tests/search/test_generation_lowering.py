"""A first kernel without an LLM (issue 32, part 2): a PyTorch module traced with
torch.fx (in a sandboxed child) and lowered, where it is a chain of pointwise operations,
to a plain kernel of a thread per element. The lowered kernels compute the modules'
outputs on the CPU emulator within the task's tolerance rule; what is not such a chain
says why."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field

import pytest
from cuda_on_cpu import CpuKernels, inputs_for, mismatch

from profiling.harness.candidate import Candidate
from search.engine import forms
from search.generation.lowering import FirstKernel, NoKernel, lower

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU emulator needs g++")


@dataclass
class Described:  # the fields of torchtask.task.TorchTask that lowering reads
    name: str = "act"
    inputs: list = field(default_factory=lambda: [{"name": "x0", "dtype": "float32", "shape": ["b", "d"]}])
    outputs: list = field(default_factory=lambda: [{"name": "out", "dtype": "float32", "shape": ["b", "d"]}])
    weights: list = field(default_factory=list)
    sizes: dict = field(default_factory=lambda: {"b": 64, "d": 96})
    l0_sizes: list = field(default_factory=lambda: [{"b": 3, "d": 5}])


def graph(*calls: dict) -> list[dict]:
    nodes = [{"name": "x", "op": "placeholder", "target": "x", "args": [], "kwargs": {}, "shape": [3, 5],
              "attributes": {}}]
    for index, call in enumerate(calls):
        nodes.append({"name": f"n{index}", "shape": [3, 5], "kwargs": {}, "attributes": {}, **call})
    nodes.append({"name": "output", "op": "output", "target": "output",
                  "args": [{"node": nodes[-1]["name"]}], "kwargs": {}, "shape": None, "attributes": {}})
    return nodes


def test_a_module_chain_becomes_one_thread_per_element_with_torchs_definitions():
    found = lower(graph({"op": "call_module", "target": "LeakyReLU", "args": [{"node": "x"}],
                         "attributes": {"negative_slope": 0.2, "inplace": False}},
                        {"op": "call_function", "target": "gelu", "args": [{"node": "n0"}],
                         "kwargs": {"approximate": "tanh"}},
                        {"op": "call_function", "target": "mul", "args": [{"node": "n1"}, 2]}), Described())
    assert isinstance(found, FirstKernel), found
    assert "(v_x0) * 0.2f" in found.source and "tanhf(0.7978845608028654f" in found.source
    assert "out[i] = t3;" in found.source and "(t2 * 2.0f)" in found.source
    assert found.plan["launches"][0]["args"] == ["x0", "out", "i64:(b) * (d)"]  # a 64-bit n
    form = forms.lift(found.source, found.plan)  # the plain kernel lifts as the map it is
    assert isinstance(form, forms.Form) and form.family == forms.MAP and form.direct


@pytest.mark.parametrize(("calls", "described", "cause"), [
    ([{"op": "call_function", "target": "matmul", "args": [{"node": "x"}, {"node": "x"}]}], Described(),
     "the operation matmul"),
    ([{"op": "call_function", "target": "relu", "args": [{"node": "x"}]}],
     Described(weights=[{"name": "fc_weight"}]), "parameters"),
    ([{"op": "call_function", "target": "sum", "args": [{"node": "x"}], "shape": [3]}],
     Described(outputs=[{"name": "out", "dtype": "float32", "shape": ["b"]}]), "another shape"),
    ([{"op": "call_module", "target": "Linear", "args": [{"node": "x"}]}], Described(), "the module Linear"),
    ([{"op": "call_function", "target": "clamp", "args": [{"node": "x"}, {"node": "x"}]}], Described(),
     "a tensor where a number goes"),
])
def test_what_is_no_pointwise_chain_has_no_kernel_and_says_why(calls, described, cause):
    found = lower(graph(*calls), described)
    assert isinstance(found, NoKernel) and cause in found.reason, found


# --- modules, traced in the sandboxed child and run on the CPU emulator --------------------------

torch = pytest.importorskip("torch")
HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"


def module(forward: str, inputs: str, sizes: str, *, layer: str = "", arguments: str = "x") -> str:
    init = f"        self.layer = {layer}\n" if layer else ""
    return (f"{HEADER}class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n{init}\n"
            f"    def forward(self, {arguments}):\n        return {forward}\n\n{sizes}\n\n"
            f"def get_inputs():\n    return {inputs}\n\ndef get_init_inputs():\n    return []\n")


def lowered_and_run(tmp_path, sources: dict[str, str], family: str,
                    lifts_as: str | dict[str, str] | None = None, skeleton: str | None = None) -> None:
    """Each module read as a task, traced, lowered to `family`, lifted (as `lifts_as`, one
    family or one per module) and run on the CPU emulator against the module at its first
    two L0 sizes; with `skeleton`, that skeleton on each lifted form too."""
    from profiling.harness.torchtask.build import build_tasks
    from profiling.harness.torchtask.task import to_task
    from search.generation.from_module import first_kernel

    paths = []
    for name, source in sources.items():
        path = tmp_path / f"{name}.py"
        path.write_text(source)
        paths.append(path)
    for path, described in zip(paths, build_tasks(paths), strict=True):
        found = first_kernel(described, tmp_path / f"trace-{path.stem}")
        assert isinstance(found, FirstKernel) and found.family == family, (path.stem, found)
        expected = lifts_as.get(path.stem) if isinstance(lifts_as, dict) else lifts_as
        if expected:
            lifted = forms.lift(found.source, found.plan)
            assert isinstance(lifted, forms.Form) and lifted.family == expected, (path.stem, lifted)
        task = to_task(described)
        candidates = [Candidate.from_dict({**found.plan, "source": found.source})]
        if skeleton and expected:
            from search.engine.forms.skeletons import by_name

            emitted = by_name(skeleton).emit(forms.lift(found.source, found.plan), found.plan, task)
            assert not isinstance(emitted, str), (path.stem, emitted)
            candidates.append(Candidate.from_dict({**emitted.plan, "source": emitted.source}))
        for number, candidate in enumerate(candidates):
            kernels = CpuKernels(candidate, tmp_path / f"{path.stem}-{number}")
            for sizes in task.l0_sizes[:2]:
                inputs = inputs_for(task, sizes)
                found_mismatch = mismatch(task, sizes, inputs, kernels.run(task, sizes, inputs))
                assert found_mismatch is None, (path.stem, number, sizes, found_mismatch)


POINTWISE = {
    "chain": "torch.sigmoid(x) * 2.0 - x",
    "activations": "F.hardtanh(F.elu(x, alpha=0.5), -0.5, 0.75) + F.softplus(x, beta=2.0) / (1.0 + x * x)",
    "gelu_mish": "F.gelu(x) - F.mish(x) + torch.clamp(x, min=-0.25).pow(2)",
}


@needs_gxx
def test_traced_modules_lower_to_kernels_that_compute_them(tmp_path):
    sources = {name: module(forward, "[torch.randn(batch, dim)]", "batch = 64\ndim = 96")
               for name, forward in POINTWISE.items()}
    lowered_and_run(tmp_path, sources, "elementwise_map", forms.MAP)


def test_a_module_that_does_not_trace_says_so(tmp_path):
    from profiling.harness.torchtask.trace import read_graph

    found = read_graph(module("x if x.sum() > 0 else -x", "[torch.randn(4, 4)]", ""), tmp_path)
    assert not found["ok"] and "TraceError" in found["error"], found


PRODUCTS = {  # forward, inputs: as KernelBench's matrix problems are written
    "plain": ("torch.matmul(A, B)", "[torch.randn(M, K), torch.randn(K, N)]"),
    "transposed_both": ("torch.matmul(A.T, B.T)", "[torch.randn(K, M), torch.randn(N, K)]"),
    "transposed_b": ("torch.matmul(A, B.t())", "[torch.randn(M, K), torch.randn(N, K)]"),
    "batched": ("torch.bmm(A, B)", "[torch.randn(Q, M, K), torch.randn(Q, K, N)]"),
    "tensor_matrix": ("torch.matmul(A, B)", "[torch.randn(Q, M, K), torch.randn(K, N)]"),
    "upper": ("torch.triu(torch.matmul(A, B))", "[torch.randn(M, M), torch.randn(M, M)]"),
}


@needs_gxx
def test_matrix_products_lower_to_a_thread_per_output_that_computes_them(tmp_path):
    sources = {name: module(forward, inputs, "Q = 20\nM = 40\nK = 36\nN = 28", arguments="A, B")
               for name, (forward, inputs) in PRODUCTS.items()}
    lowered_and_run(tmp_path, sources, "batched_contraction", forms.CONTRACTION)


REDUCTIONS = {  # forward, as KernelBench's reductions and norms are written
    "sum_keepdim": "torch.sum(x, dim=1, keepdim=True)",
    "mean_last": "torch.mean(x, dim=-1)",
    "max_values": "torch.max(x, dim=1)[0]",
    "argmin": "torch.argmin(x, dim=1)",
    "softmax": "torch.softmax(x, dim=2)",
    "log_softmax": "torch.log_softmax(x, dim=1)",
    "l1": "x / torch.mean(torch.abs(x), dim=1, keepdim=True)",
    "l2": "x / torch.norm(x, p=2, dim=2, keepdim=True)",
    "rms": "x / torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + 1e-5)",
}


@needs_gxx
def test_reductions_along_a_dimension_lower_to_a_thread_per_row_that_computes_them(tmp_path):
    sources = {name: module(forward, "[torch.randn(B, D, E)]", "B = 20\nD = 40\nE = 36")
               for name, forward in REDUCTIONS.items()}
    lowered_and_run(tmp_path, sources, "row_map_reduce", forms.ROWS)


WINDOWS = {  # layer, input shape, family it lifts as: convolutions and pooling as KernelBench's are written
    "conv2d": ("nn.Conv2d(3, 5, 3, stride=2, padding=1, dilation=1, groups=1, bias=True)", "B, 3, H, W",
               forms.CONTRACTION),
    "conv2d_grouped_dilated": (
        "nn.Conv2d(4, 6, (3, 2), padding=(2, 1), dilation=(2, 1), groups=2, bias=False)", "B, 4, H, W",
        None),  # no family: a group's input channels follow the output channel, in neither factor alone
    "depthwise": ("nn.Conv2d(4, 4, 3, padding=1, groups=4, bias=False)", "B, 4, H, W", forms.WINDOW),
    # groups follow a size of the module: right at every size, not only the traced one
    "depthwise_sized": ("nn.Conv2d(C, C, 3, padding=1, groups=C, bias=False)", "B, C, H, W", forms.WINDOW),
    "depthwise_multiplier": ("nn.Conv2d(C, 2 * C, (3, 1), stride=(1, 2), groups=C, bias=True)", "B, C, H, W",
                             forms.WINDOW),
    "conv1d": ("nn.Conv1d(3, 4, 5, stride=3, bias=True)", "B, 3, W", forms.CONTRACTION),
    "conv3d": ("nn.Conv3d(2, 3, 2, padding=1, bias=False)", "B, 2, H, W, W", forms.CONTRACTION),
    "maxpool2d": ("nn.MaxPool2d(3, stride=2, padding=1)", "B, 3, H, W", forms.WINDOW),
    "avgpool1d": ("nn.AvgPool1d(4, stride=2, padding=1)", "B, 3, W", forms.WINDOW),
    "maxpool3d_dilated": ("nn.MaxPool3d(2, stride=1, padding=1, dilation=2)", "B, 2, H, W, W", forms.WINDOW),
}


@needs_gxx
def test_convolutions_and_pooling_lower_to_a_thread_per_output_that_computes_them(tmp_path):
    sources = {name: module("self.layer(x)", f"[torch.randn({shape})]", "B = 20\nC = 6\nH = 23\nW = 29",
                            layer=layer)
               for name, (layer, shape, _) in WINDOWS.items()}
    lowered_and_run(tmp_path, sources, "window", {name: lifts for name, (_, _, lifts) in WINDOWS.items()})


# ConvTranspose as KernelBench's are written: stride, padding, output padding, dilation, groups
TRANSPOSED = {
    "convt2d": ("nn.ConvTranspose2d(3, 5, 3, stride=2, padding=1, output_padding=1, bias=True)",
                "B, 3, H, W"),
    "convt1d_dilated": ("nn.ConvTranspose1d(4, 3, 3, stride=3, padding=2, dilation=2, bias=False)",
                        "B, 4, W"),
    "convt3d_grouped": ("nn.ConvTranspose3d(4, 6, (3, 2, 2), stride=(2, 1, 2), padding=(1, 0, 1), groups=2)",
                        "B, 4, H, W, W"),
    "convt2d_sized_groups": ("nn.ConvTranspose2d(C, C, 3, stride=2, groups=C // 2, bias=False)",
                             "B, C, H, W"),
}


@needs_gxx
def test_transposed_convolutions_lower_to_the_gather_they_are_and_compute_the_module(tmp_path):
    sizes = "B = 3\nC = 6\nH = 7\nW = 9"
    sources = {name: module("self.layer(x)", f"[torch.randn({shape})]", sizes, layer=layer)
               for name, (layer, shape) in TRANSPOSED.items()}
    # one group: a product over (input channel, taps), the tile computing it; groups: no family
    lifts = {"convt2d": forms.CONTRACTION, "convt1d_dilated": forms.CONTRACTION}
    lowered_and_run(tmp_path, sources, "window", lifts, skeleton="contraction.smem_register_tile")


NORMS = {  # layer, input shape: as KernelBench's normalisations are written
    "layernorm_3d": ("nn.LayerNorm((C, H, W))", "B, C, H, W"),
    "layernorm_last_plain": ("nn.LayerNorm(W, eps=1e-3, elementwise_affine=False)", "B, C, W"),
    "instancenorm2d": ("nn.InstanceNorm2d(C)", "B, C, H, W"),
    "instancenorm1d_affine": ("nn.InstanceNorm1d(C, affine=True)", "B, C, W"),
}


@needs_gxx
def test_normalisations_lower_to_a_thread_per_row_that_computes_them(tmp_path):
    sizes = "B = 3\nC = 5\nH = 7\nW = 37"
    sources = {name: module("self.layer(x)", f"[torch.randn({shape}) * 3.0 + 1.0]", sizes, layer=layer)
               for name, (layer, shape) in NORMS.items()}
    lowered_and_run(tmp_path, sources, "row_map_reduce", forms.ROWS, skeleton="rows.block_per_row")


SCANS = {  # as KernelBench's scans are written (89, 90, 91), and a scan of a pointwise value
    "cumsum": "torch.cumsum(x, dim=1)",
    "cumprod": "torch.cumprod(1.0 + 0.01 * x, dim=1)",
    "cumsum_reverse": "torch.cumsum(x.flip(1), dim=1).flip(1)",
    "cumsum_middle": "torch.cumsum(x * x, dim=0)",
}


@needs_gxx
def test_scans_lower_to_a_thread_per_row_with_a_running_value_that_computes_them(tmp_path):
    sizes = "B = 5\nN = 37"
    sources = {name: module(forward, "[torch.randn(B, N)]", sizes) for name, forward in SCANS.items()}
    lowered_and_run(tmp_path, {k: v for k, v in sources.items() if k != "cumsum_middle"}, "row_scan",
                    forms.SCAN, skeleton="scan.block_scan")
    # along dim 0 the row walks a column (INNER apart): it lifts too; the skeleton is not tried
    lowered_and_run(tmp_path, {"cumsum_middle": sources["cumsum_middle"]}, "row_scan", forms.SCAN)
