"""Anti-unification of steps into generalised rewrites (lineage/engine/antiunify.py), on
kernels written differently: other names, other loop shapes, other index expressions. A
rewrite must match where it should and refuse where its pattern does not hold."""

from lineage.engine import antiunify as au
from search.engine.rewrites.syntax import parse

SCALE_A = """__global__ void scale(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
"""
SCALE_B = """__global__ void shift(const float* input, float* output, int count) {
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < count; k += gridDim.x * blockDim.x)
        output[k] = input[k] + 1.0f;
}
"""


def restricted(source: str) -> str:
    return source.replace("const float* ", "const float* __restrict__ ").replace(
        ", float* ", ", float* __restrict__ ")


SOFT_A = """__global__ void soft(const float* x, float* y, int n, float m) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = expf(x[i] - m);
}
"""
SOFT_B = """__global__ void ce(const float* logits, float* loss, int rows, float mx, float s) {
    int r = blockIdx.x;
    if (r < rows) loss[r] = expf(logits[r * 4] - mx) / s;
}
"""


def compiles_as_cuda(source: str) -> bool:
    return not parse(source).root_node.has_error


def test_an_edit_is_the_smallest_whole_unit_holding_every_change():
    edit = au.edit_of(SCALE_A, restricted(SCALE_A))
    assert edit.kind == "parameter_list" and edit.context == "function_declarator"
    assert au.text_of(edit.before) == "(const float * x, float * y, int n)"
    assert au.text_of(edit.after) == "(const float * __restrict__ x, float * __restrict__ y, int n)"
    assert au.edit_of(SCALE_A, SCALE_A) is None


def test_two_steps_written_differently_give_one_rewrite_that_carries_names_over():
    rewrite = au.generalise([au.edit_of(SCALE_A, restricted(SCALE_A)),
                             au.edit_of(SCALE_B, restricted(SCALE_B))])
    assert rewrite.usable and rewrite.holes == 3 and rewrite.examples == 2
    # The third parameter is carried over whole: the rewrite does not look inside it.
    assert au.show(rewrite.before) == "(const float * ?0, float * ?1, ?2)"
    assert au.show(rewrite.after) == "(const float * __restrict__ ?0, float * __restrict__ ?1, ?2)"
    assert rewrite.bindings == [["x", "input"], ["y", "output"], ["int n", "int count"]]

    third = """__global__ void clamp01(const float* src, float* dst, int len) {
    int t = threadIdx.x + blockIdx.x * blockDim.x;
    if (t < len) dst[t] = fminf(fmaxf(src[t], 0.0f), 1.0f);
}
"""
    (applied,) = au.apply(rewrite, third)
    # The rewritten parameters keep the layout they were written with.
    assert "clamp01(const float* __restrict__ src, float* __restrict__ dst, int len)" in applied.source
    assert applied.bindings == {0: "src", 1: "dst", 2: "int len"} and compiles_as_cuda(applied.source)
    assert "+__global__ void clamp01(const float* __restrict__ src" in applied.diff(third)


def test_a_rewrite_refuses_a_kernel_its_pattern_does_not_hold_for():
    rewrite = au.generalise([au.edit_of(SCALE_A, restricted(SCALE_A)),
                             au.edit_of(SCALE_B, restricted(SCALE_B))])
    other_shapes = [
        # four parameters, not three
        "__global__ void k(const float* a, float* b, int n, int m) { }\n",
        # the output first
        "__global__ void k(float* b, const float* a, int n) { }\n",
        # an int buffer, not a float one
        "__global__ void k(const int* a, float* b, int n) { }\n",
        # already restricted
        restricted("__global__ void k(const float* a, float* b, int n) { }\n"),
    ]
    for source in other_shapes:
        assert au.apply(rewrite, source) == [], source


def test_a_call_rewrite_generalises_over_its_argument_and_its_surroundings():
    fast = lambda s: s.replace("expf(", "__expf(")  # noqa: E731
    rewrite = au.generalise([au.edit_of(SOFT_A, fast(SOFT_A)), au.edit_of(SOFT_B, fast(SOFT_B))])
    assert rewrite.kind == "call_expression" and rewrite.context == ""  # the two sat in different places
    assert au.show(rewrite.before) == "expf(?0)" and au.show(rewrite.after) == "__expf(?0)"
    assert rewrite.usable
    kernel = """__global__ void gelu_ish(const float* v, float* w, int n) {
    for (int j = threadIdx.x; j < n; j += blockDim.x) { float e = expf(-v[j]); w[j] = v[j] / (1.0f + e); }
}
"""
    applied = au.apply(rewrite, kernel)
    assert [a.bindings[0] for a in applied] == ["-v[j]"]
    assert "float e = __expf(-v[j]);" in applied[0].source and compiles_as_cuda(applied[0].source)
    assert au.apply(rewrite, kernel.replace("expf", "logf")) == []


def test_an_after_side_no_match_can_supply_is_open_and_never_applied():
    opened = au.generalise([
        au.edit_of(SCALE_A, SCALE_A.replace("2.0f * x[i]", "x[i] * x[i]")),
        au.edit_of(SOFT_A, SOFT_A.replace("expf(x[i] - m)", "x[i]")),
    ])
    # The right-hand sides differ and so do their replacements, with nothing in common.
    assert au.show(opened.before) == "y[i] = ?0" and au.show(opened.after) == "y[i] = /*?*/"
    assert opened.open and not opened.usable
    assert au.apply(opened, SCALE_A) == []


def test_edits_of_different_kinds_do_not_generalise():
    constant = au.edit_of(SCALE_A, SCALE_A.replace("2.0f *", "3.0f *"))
    product = au.edit_of(SOFT_A, SOFT_A.replace("- m", "- 2.0f * m"))
    assert constant.kind != product.kind and au.generalise([constant, product]) is None
    assert au.generalise([]) is None


def test_a_step_that_changes_two_places_is_two_edits():
    before = (SCALE_A.replace("2.0f * x[i]", "expf(x[i])")
              + "__global__ void g(const float* p, float* q) { }\n")
    after = restricted(before).replace("expf(", "__expf(")
    edits = au.edits_of(before, after)
    assert [e.kind for e in edits] == ["parameter_declaration"] * 2 + ["call_expression"] + [
        "parameter_declaration"] * 2
    merged = au.edits_of(before, after, merge=True)
    assert len(merged) == 1 and merged[0].kind == "translation_unit"


def test_a_rewrite_applied_everywhere_changes_each_match_once():
    rewrite = au.generalise([au.edit_of(SOFT_A, SOFT_A.replace("expf(", "__expf(")),
                             au.edit_of(SOFT_B, SOFT_B.replace("expf(", "__expf("))])
    kernel = "__device__ float f(float a, float b) { return expf(a) + expf(b * expf(a)); }\n"
    applied = au.apply_everywhere(rewrite, kernel)
    # The outer expf(b * expf(a)) is one match: the inner call is inside it, left for later.
    assert applied.source == (
        "__device__ float f(float a, float b) { return __expf(a) + __expf(b * expf(a)); }\n")
    assert au.apply_everywhere(rewrite, "__device__ float f(float a) { return a; }\n") is None


def test_string_literals_stay_whole():
    edit = au.edit_of('void f() { g("a b"); }\n', 'void f() { h("a b"); }\n')
    assert au.text_of(edit.after) == 'h("a b")'


def test_one_step_leaves_the_statements_it_carries_over_as_holes():
    before = "__global__ void k(const float* x, float* y, int n) { y[0] = x[0]; }\n"
    after = before.replace("__global__ void k", "__global__ void __launch_bounds__(256) k")
    rewrite = au.generalise([au.edit_of(before, after)])
    assert rewrite.kind == "function_definition" and rewrite.usable
    assert au.show(rewrite.before).endswith("?0") and au.show(rewrite.after).endswith("?0")
    # The same step on the same kernel with another body: the body is carried over as it is.
    other = before.replace("y[0] = x[0];", "for (int i = 0; i < n; ++i) y[i] = 2.0f * x[i];")
    (applied,) = au.apply(rewrite, other)
    assert applied.source == ("__global__ void __launch_bounds__(256) k(const float* x, float* y, int n) "
                              "{ for (int i = 0; i < n; ++i) y[i] = 2.0f * x[i]; }\n")
