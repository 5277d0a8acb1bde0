"""Window reductions (pooling, depthwise stencils) written as a thread per output lift
as windows: the output's two fastest coordinates, the slower ones from the planes, the
taps' loops as written. window.walk_rows (WALK rows of a column a thread) computes them
on the CPU emulator as the naive kernels' references do. Row reductions read through
digits, and loops bounded by sizes, are not windows."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest
from cuda_on_cpu import CpuKernels, inputs_for, mismatch

from profiling.harness import expr, tasks
from profiling.harness.candidate import Candidate
from profiling.harness.spec import Task, TensorSpec, Tolerance
from search.engine.forms import ROWS, WINDOW, Form, Refusal, lift
from search.engine.forms.skeletons import by_name

WALK = by_name("window.walk_rows")
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU emulator needs g++")
ROOT = Path(__file__).resolve().parents[2]


def _transfer_task(name: str) -> Task:
    path = ROOT / "bench/transfer_tasks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"window_test_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.TASK


# 2 x 2 average pooling, stride 2, on a grid of (column, row) with a plane per (n, c) in z;
# the divisor counts the taps inside, as a newcomer writes it.
AVGPOOL = """extern "C" __global__ void avgpool2(const float* x, float* y, int NC, int H, int W) {
    int ow = blockIdx.x * blockDim.x + threadIdx.x;
    int oh = blockIdx.y * blockDim.y + threadIdx.y;
    int p = blockIdx.z;
    int OH = H / 2;
    int OW = W / 2;
    if (ow < OW && oh < OH) {
        float s = 0.0f;
        int n = 0;
        for (int i = 0; i < 2; i++) {
            for (int j = 0; j < 2; j++) {
                s += x[(p * H + oh * 2 + i) * W + ow * 2 + j];
                n++;
            }
        }
        y[(p * OH + oh) * OW + ow] = s / n;
    }
}
"""
X = TensorSpec("x", "float32", ("NC", "H", "W"))
Y = TensorSpec("y", "float32", ("NC", "H // 2", "W // 2"))


def _avgpool_reference(inputs, sizes):
    x = inputs["x"].astype("float64")
    nc, h, w = x.shape
    pooled = x[:, : h // 2 * 2, : w // 2 * 2].reshape(nc, h // 2, 2, w // 2, 2).mean(axis=(2, 4))
    return {"y": pooled.astype("float32")}


AVGPOOL_TASK = Task(
    name="avgpool2_test", description="2 x 2 average pooling", sizes={"NC": 64, "H": 64, "W": 64},
    l0_sizes=({"NC": 1, "H": 2, "W": 2}, {"NC": 3, "H": 9, "W": 14}, {"NC": 2, "H": 17, "W": 5}),
    inputs=(X,), outputs=(Y,), reference=_avgpool_reference, flops=lambda s: 1.0, bytes=lambda s: 1.0,
    naive_source=AVGPOOL,
    naive_plan={"launches": [{"kernel": "avgpool2", "grid": ["cdiv(W // 2, 16)", "cdiv(H // 2, 16)", "NC"],
                              "block": [16, 16], "shared_bytes": 0, "args": ["x", "y", "NC", "H", "W"]}],
                "scratch": [], "tunables": {}},
    tolerances={"float32": Tolerance(atol=1e-6, rtol=1e-6)},
)


# The same pooling with its window and stride passed as sizes, as a general kernel is written.
SIZED = (AVGPOOL.replace("int NC, int H, int W)", "int NC, int H, int W, int K, int S)")
         .replace("i < 2", "i < K").replace("j < 2", "j < K").replace("oh * 2 + i", "oh * S + i")
         .replace("ow * 2 + j", "ow * S + j"))
SIZED_TASK = Task(**{**AVGPOOL_TASK.__dict__, "naive_source": SIZED, "naive_plan": {
    **AVGPOOL_TASK.naive_plan, "launches": [{**AVGPOOL_TASK.naive_plan["launches"][0],
                                            "args": ["x", "y", "NC", "H", "W", "2", "2"]}]}})


# The depthwise stencil as another newcomer writes it: a grid-stride loop, other names,
# the taps counted with while loops from 0, the padding as a ternary.
GRID_STRIDE_DEPTHWISE = """extern "C" __global__ void dw(const float* in, const float* k, float* out,
                                   int N, int C, int H, int W) {
    int total = N * C * H * W;
    for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < total; t += blockDim.x * gridDim.x) {
        int x0 = t % W;
        int y0 = (t / W) % H;
        int nc = t / (H * W);
        int ch = nc % C;
        float acc = 0.0f;
        int a = 0;
        while (a < 3) {
            int b = 0;
            while (b < 3) {
                int yy = y0 + a - 1;
                int xx = x0 + b - 1;
                bool ok = yy >= 0 && yy < H && xx >= 0 && xx < W;
                acc += ok ? in[(nc * H + yy) * W + xx] * k[ch * 9 + a * 3 + b] : 0.0f;
                b++;
            }
            a++;
        }
        out[t] = acc;
    }
}
"""


def _grid_stride_depthwise() -> Task:
    task = _transfer_task("depthwise3x3")
    launch = {"kernel": "dw", "grid": ["min(cdiv(N * C * H * W, 256), 64)"], "block": [256],
              "shared_bytes": 0, "args": ["x", "w", "y", "N", "C", "H", "W"]}
    return Task(**{**task.__dict__, "naive_source": GRID_STRIDE_DEPTHWISE,
                   "naive_plan": {"launches": [launch], "scratch": [], "tunables": {}}})


def test_taps_bounded_by_sizes_lift_where_each_is_added_to_a_coordinate():
    form = lift(SIZED, SIZED_TASK.naive_plan)
    assert isinstance(form, Form) and form.family == WINDOW, form
    assert form.notes == ("taps: K x K",)
    # a window and stride of one size: `oh * K + i` reads as rows of K x K, not as taps
    same = SIZED.replace("oh * S + i", "oh * K + i").replace("ow * S + j", "ow * K + j")
    assert not (isinstance(lift(same, SIZED_TASK.naive_plan), Form)
                and lift(same, SIZED_TASK.naive_plan).family == WINDOW)


def test_the_depthwise_stencil_lifts_with_its_planes_worked_out_from_the_rest():
    form = lift(_transfer_task("depthwise3x3").naive_source, _transfer_task("depthwise3x3").naive_plan)
    assert isinstance(form, Form) and form.family == WINDOW, form
    assert [(c.name, c.bound) for c in form.coordinates] == [("row", "H"), ("col", "W")]
    assert form.setups == ("const int c = (int)((optiml_rest) % (C));",
                           "const int plane = (int)(optiml_rest);")
    assert "int col = i % W;" not in form.body and "y[i] = sum;" in form.body
    assert form.notes == ("taps: 3 x 3",)


def test_a_pooling_with_a_long_flat_index_and_skips_lifts_as_a_window():
    task = tasks.get("maxpool3d")
    form = lift(task.naive_source, task.naive_plan)
    assert isinstance(form, Form) and form.family == WINDOW, form
    assert [c.name for c in form.coordinates] == ["oh", "ow"]
    assert "const long long plane = (long long)(optiml_rest / (OD));" in form.setups
    assert form.notes == ("taps: 3 x 3 x 3",)


@needs_gxx
@pytest.mark.parametrize("name", ["depthwise3x3", "maxpool3d", "avgpool", "avgpool walk 3", "sized",
                                  "grid-stride while"])
def test_walking_rows_computes_the_windows(name, tmp_path):
    task = {"depthwise3x3": _transfer_task("depthwise3x3"), "maxpool3d": tasks.get("maxpool3d"),
            "avgpool": AVGPOOL_TASK, "avgpool walk 3": AVGPOOL_TASK, "sized": SIZED_TASK,
            "grid-stride while": _grid_stride_depthwise()}[name]
    emitted = WALK.emit(lift(task.naive_source, task.naive_plan), task.naive_plan, task)
    assert not isinstance(emitted, str), emitted
    plan = emitted.plan
    if name.endswith("walk 3"):  # rows that do not divide by the walk, and 2 rows of threads a block
        plan = {**plan, "tunables": {**plan["tunables"], "WALK": 3, "BLOCK": 64}}
    kernels = CpuKernels(Candidate.from_dict({**plan, "source": emitted.source}), tmp_path)
    for sizes in task.l0_sizes[:3]:
        inputs = inputs_for(task, sizes)
        assert mismatch(task, sizes, inputs, kernels.run(task, sizes, inputs)) is None, sizes


@needs_gxx
@pytest.mark.parametrize("name", ["depthwise3x3", "maxpool3d", "avgpool", "sized", "grid-stride while"])
def test_four_neighbouring_outputs_a_thread_compute_the_windows(name, tmp_path):
    """window.quads (quads.py): the L0 sizes have rows of 1 and of odd widths, so quads
    straddle rows and planes, and the scalar tail runs where the total is not a multiple of 4."""
    task = {"depthwise3x3": _transfer_task("depthwise3x3"), "maxpool3d": tasks.get("maxpool3d"),
            "avgpool": AVGPOOL_TASK, "sized": SIZED_TASK, "grid-stride while": _grid_stride_depthwise()}[name]
    emitted = by_name("window.quads").emit(lift(task.naive_source, task.naive_plan), task.naive_plan, task)
    assert not isinstance(emitted, str), emitted
    assert "[optiml_q] = " in emitted.source  # the quads' float4 store
    kernels = CpuKernels(Candidate.from_dict({**emitted.plan, "source": emitted.source}), tmp_path)
    for sizes in task.l0_sizes:
        inputs = inputs_for(task, sizes)
        assert mismatch(task, sizes, inputs, kernels.run(task, sizes, inputs)) is None, sizes


def test_more_planes_than_a_grid_holds_are_walked_by_the_grid_stride():
    task = AVGPOOL_TASK
    emitted = WALK.emit(lift(task.naive_source, task.naive_plan), task.naive_plan, task)
    z = emitted.plan["launches"][0]["grid"][2]
    assert [expr.evaluate_int(z, {"NC": nc}) for nc in (1, 70000)] == [1, 65535]
    assert "optiml_rest += gridDim.z" in emitted.source


@pytest.mark.parametrize(("change", "cause"), [
    # a loop bounded by a size down the plane's rows: a reduction, not a window's side
    (("for (int i = 0; i < 2; i++)", "for (int i = 0; i < H; i++)", "oh * 2 + i) * W", "i) * W"),
     "bounded by a size and walks no window"),
    # the same loop counted from 1: a size-bounded side counts from 0
    (("for (int i = 0; i < 2; i++)", "for (int i = 1; i < H; i++)"), "count from 0"),
    # 64 taps: a row, not a window
    (("int j = 0; j < 2; j++", "int j = 0; j < 64; j++"), "64 iterations"),
    # no tap added to an output coordinate: every output reads the same 2 x 2 corner
    (("oh * 2 + i) * W + ow * 2 + j", "i) * W + j"), "no tap is added"),
])
def test_kernels_that_do_not_walk_a_window_are_not_windows(change, cause):
    source = AVGPOOL
    for old, new in zip(change[::2], change[1::2], strict=True):
        assert old in source
        source = source.replace(old, new)
    form = lift(source, AVGPOOL_TASK.naive_plan)
    assert not (isinstance(form, Form) and form.family == WINDOW), form
    from search.engine.forms import windows
    from search.engine.forms.lift import _common
    from search.engine.forms.reading import plane_bounds, read_space
    from search.engine.rewrites.syntax import find_kernels, parse

    (kernel,) = find_kernels(parse(source))
    launch = AVGPOOL_TASK.naive_plan["launches"][0]
    space = read_space(kernel, plane_bounds(launch["grid"], launch["args"], [p.name for p in kernel.params]))
    refused = windows.lift_window(kernel, space, _common(kernel, AVGPOOL, space, set(), launch["args"]))
    assert isinstance(refused, Refusal) and cause in refused.reason, refused


def test_a_mean_over_a_middle_dimension_read_through_digits_stays_rows():
    source = """extern "C" __global__ void mean_mid(const float* x, float* y, int B, int K, int J) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < B * J) {
        int j = idx % J;
        int b = idx / J;
        float s = 0.0f;
        for (int k = 0; k < K; k++) s += x[(b * K + k) * J + j];
        y[idx] = s / K;
    }
}
"""
    plan = {"launches": [{"kernel": "mean_mid", "grid": ["cdiv(B * J, 256)"], "block": [256],
                          "args": ["x", "y", "B", "K", "J"]}]}
    form = lift(source, plan)
    assert isinstance(form, Form) and form.family == ROWS, form


def test_a_plane_whose_compound_extent_the_kernel_is_not_told_is_added_as_a_parameter():
    source = """extern "C" __global__ void pool(const float* x, float* y, int H, int W, int OH, int OW) {
    int ow = blockIdx.x * blockDim.x + threadIdx.x;
    int oh = blockIdx.y * blockDim.y + threadIdx.y;
    int plane = blockIdx.z;
    if (ow < OW && oh < OH) {
        float m = -INFINITY;
        for (int ky = 0; ky < 3; ky++)
            for (int kx = 0; kx < 3; kx++) {
                int ih = oh * 2 - 1 + ky, iw = ow * 2 - 1 + kx;
                if (ih >= 0 && ih < H && iw >= 0 && iw < W) m = fmaxf(m, x[(plane * H + ih) * W + iw]);
            }
        y[(plane * OH + oh) * OW + ow] = m;
    }
}
"""
    launch = {"kernel": "pool", "grid": ["cdiv(OW, 16)", "cdiv(OH, 16)", "N * C"], "block": [16, 16],
              "shared_bytes": 0, "args": ["x", "y", "H", "W", "OH", "OW"]}
    form = lift(source, {"launches": [launch], "scratch": [], "tunables": {}})
    assert isinstance(form, Form) and form.family == WINDOW, form
    assert form.extra_args == ("N * C",) and form.space[0].bound == "optiml_planes_z"


def _bench_task(folder: str, name: str) -> Task:
    path = ROOT / "bench" / folder / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"quads_test_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.TASK


@needs_gxx
@pytest.mark.parametrize(("folder", "name"), [("transfer_tasks", "silu_mul"), ("transfer_tasks", "rotary"),
                                              ("transfer_tasks", "upsample2x"), ("admission_tasks", "prelu")])
def test_map_quads_compute_the_maps_that_read_elsewhere_of_the_transfer_and_admission_tasks(folder, name,
                                                                                          tmp_path):
    """The maps map.quads is for, as newcomers wrote them (a row's halves, a neighbour
    half a head away, a gather, a broadcast slope), at every L0 size."""
    task = _bench_task(folder, name)
    emitted = by_name("map.quads").emit(lift(task.naive_source, task.naive_plan), task.naive_plan, task)
    assert not isinstance(emitted, str), emitted
    kernels = CpuKernels(Candidate.from_dict({**emitted.plan, "source": emitted.source}), tmp_path)
    for sizes in task.l0_sizes:
        inputs = inputs_for(task, sizes)
        assert mismatch(task, sizes, inputs, kernels.run(task, sizes, inputs)) is None, sizes
