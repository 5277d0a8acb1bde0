"""Permutations (search/engine/forms/permutes.py): maps whose reads walk memory along one
coordinate and whose write walks it along another lift as permutations, on a 2-D or
3-D grid or through a flat index's digits; maps that only look alike (a scatter through
an index array, a copy, two writes, a write under a test) stay maps. The skeleton's
runs on the CPU emulator are in test_forms_skeletons.py."""

import pytest
from forms_kernels import (
    MAP_2D,
    MAP_TRANSPOSE,
    MAP_TRANSPOSE_FLAT,
    PERMUTE_BATCHED,
    PERMUTE_NHWC,
    PERMUTE_OFFSETS,
    plan,
)

from search.engine import forms
from search.engine.forms import MAP, PERMUTATION, Form


def lifted(source: str, the_plan: dict) -> Form:
    form = forms.lift(source, the_plan)
    assert isinstance(form, Form), form
    return form


@pytest.mark.parametrize("kernel, along, written_at", [
    (MAP_TRANSPOSE, ("c", "r"), "c * rows + r"),
    (MAP_TRANSPOSE_FLAT, ("c", "r"), "c * H + r"),
    (PERMUTE_BATCHED, ("c", "r"), "(b * W + c) * H + r"),  # the threads' x along r: reads scattered
    (PERMUTE_NHWC, ("w", "c"), "(((n * H + h) * W + w) * C + c)"),  # the write's local read through
    (PERMUTE_OFFSETS, ("c", "r"), "(b * W * H) + (c * H + r)"),  # through pointer offsets
], ids=lambda k: getattr(k, "name", None))
def test_a_map_that_reads_along_one_coordinate_and_writes_along_another_is_a_permutation(
        kernel, along, written_at):
    form = lifted(kernel.source, kernel.plan)
    assert form.family == PERMUTATION
    assert form.along == along and form.written_at == written_at
    assert form.holes()["reads_along"] == along[0]


def test_the_coordinates_of_a_flat_index_are_its_digits_the_outermost_exact_or_rounded_up():
    form = lifted(PERMUTE_NHWC.source, PERMUTE_NHWC.plan)
    assert [c.name for c in form.coordinates] == ["n", "c", "h", "w"]
    assert form.coordinates[0].bound == "N"  # N * C * H * W over C * H * W: no division
    assert form.rebuild.startswith("const int i = ")
    told_total = """extern "C" __global__ void transpose_flat(const float* x, float* y, int H, int W, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int r = i / W;
        int c = i % W;
        y[c * H + r] = x[i];
    }
}
"""
    the_plan = plan("transpose_flat", ["x", "y", "H", "W", "H * W"], grid="cdiv(H * W, BLOCK)")
    total = lifted(told_total, the_plan)
    assert total.family == PERMUTATION
    assert total.coordinates[0].bound == "(((long long)(n) + (long long)(W) - 1) / ((long long)(W)))"


_GRID = ["cdiv(W, 16)", "cdiv(H, 16)"]


def _two_d(body: str, params: str = "const float* x, float* y") -> str:
    return f"""extern "C" __global__ void k({params}, int H, int W) {{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < H && col < W) {{
{body}
    }}
}}
"""


@pytest.mark.parametrize("body, params, args", [
    # a scatter: where the value goes is read from memory
    ("y[perm[row * W + col]] = x[row * W + col];", "const float* x, const int* perm, float* y",
     ["x", "perm", "y", "H", "W"]),
    # two writes: a transpose and a copy
    ("y[col * H + row] = x[row * W + col];\n z[row * W + col] = x[row * W + col];",
     "const float* x, float* y, float* z", ["x", "y", "z", "H", "W"]),
    # a write under a test
    ("if (x[row * W + col] > 0.0f) y[col * H + row] = x[row * W + col];", "const float* x, float* y",
     ["x", "y", "H", "W"]),
    # reads along the row and along the column: no one coordinate is the reads'
    ("y[col * H + row] = x[row * W + col] + x[col * H + row];", "const float* x, float* y",
     ["x", "y", "H", "W"]),
], ids=["scatter", "two-writes", "conditional-write", "reads-both-ways"])
def test_a_map_that_only_looks_like_a_permutation_stays_a_map(body, params, args):
    form = lifted(_two_d(body, params), plan("k", args, grid=_GRID, block=[16, 16]))
    assert form.family == MAP


def test_a_copy_and_a_flat_map_are_not_permutations():
    copy = lifted(_two_d("y[row * W + col] = x[row * W + col];"), plan("k", ["x", "y", "H", "W"], grid=_GRID,
                                                                     block=[16, 16]))
    assert copy.family == MAP and copy.direct
    assert lifted(MAP_2D.source, MAP_2D.plan).family == MAP
