"""A flat index peeled through one local (`rest /= W`) reads as the divisions it is."""

from __future__ import annotations

from search.engine import forms
from search.engine.forms.peeled import peeled_digits_as_divisions

POOL = """extern "C" __global__ void pool(const float* x, float* y, long long total, int C, int H, int W,
                                  int OH, int OW) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= total) return;
    long long rest = idx;
    int ow = rest % OW;
    rest /= OW;
    int oh = rest % OH;
    rest = rest / OH;
    int c = rest % C;
    int n = rest / C;
    float m = -INFINITY;
    for (int dy = 0; dy < 2; dy++)
        for (int dx = 0; dx < 2; dx++)
            m = fmaxf(m, x[((n * C + c) * H + oh * 2 + dy) * W + ow * 2 + dx]);
    y[idx] = m;
}
"""
TOTAL = "N * C * (H / 2) * (W / 2)"
PLAN = {"launches": [{"kernel": "pool", "grid": [f"cdiv({TOTAL}, BLOCK)"], "block": ["BLOCK"],
                      "args": ["x", "y", TOTAL, "C", "H", "W", "H / 2", "W / 2"]}],
        "tunables": {"BLOCK": 256}}


def test_each_read_of_the_local_becomes_the_index_divided_so_far():
    out = peeled_digits_as_divisions(POOL)
    assert "rest" not in out
    assert "int oh = ((idx) / (OW)) % OH;" in out
    assert "int n = ((idx) / (OW) / (OH)) / C;" in out


def test_a_peeled_pooling_kernel_lifts_as_a_window():
    form = forms.lift(POOL, PLAN)
    assert isinstance(form, forms.Form) and form.family == forms.WINDOW, form
    assert [a.name for a in form.coordinates] == ["oh", "ow"]


def test_a_local_changed_any_other_way_is_left_as_written():
    nested = POOL.replace("    rest /= OW;\n", "    if (OW > 1) rest /= OW;\n")
    assert peeled_digits_as_divisions(nested) == nested
    incremented = POOL.replace("    int c = rest % C;\n", "    rest++;\n    int c = rest % C;\n")
    assert peeled_digits_as_divisions(incremented) == incremented
    addressed = POOL.replace("    int c = rest % C;\n", "    long long* p = &rest;\n    int c = rest % C;\n")
    assert peeled_digits_as_divisions(addressed) == addressed
    # the divisor changes after it divided: the division is not the one written
    moved = POOL.replace("    int n = rest / C;\n", "    int n = rest / C;\n    OW = 0;\n")
    assert peeled_digits_as_divisions(moved) == moved
