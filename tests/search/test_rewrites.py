"""The source rewrites on the ten naive kernels: where they apply, that the result compiles
with the real nvcc and that its plan holds at every size; and the RewriteSource contract.

The refusals (counter-examples for every precondition) are in test_rewrite_refusals.py.
"""

import re
import shutil
from collections import Counter

import pytest

from profiling.harness import tasks
from profiling.harness.candidate import Candidate
from profiling.harness.compile import compile_candidate
from profiling.harness.gate import check_plan
from search.engine.rewrites import RewriteSource, all_rewrites
from search.engine.rewrites.syntax import find_kernels, named_statements, parse, text
from search.engine.types import FAMILIES, NodeContext

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")

NAIVE_TASKS = tuple(task.name for task in tasks.all_tasks())  # the whole suite
# Which naive kernels each rewrite's precondition admits (fast-math allowed), and why not the others:
# unroll needs constant trip counts (only the 3x3 windows), grid_stride a grid larger than 132 x 16
# blocks at L1 and an elementwise body, vectorize_float4 a body touching only p[i].
APPLIES = {
    "restrict": set(NAIVE_TASKS),
    "unroll": {"conv2d", "maxpool3d"},
    "launch_bounds": set(NAIVE_TASKS),
    "grid_stride": {"conv2d", "maxpool3d", "relu", "self_attention"},
    "vectorize_float4": {"relu"},
    "grid_stride_accumulate": {"reduce_sum"},
    "warp_shuffle_reduce": {"reduce_sum"},
    "block_per_row": {"cross_entropy", "layernorm", "self_attention", "softmax"},
    "online_softmax": {"cross_entropy", "softmax"},
    "vectorize_rows": set(),  # no naive kernel strides over a row by blockDim.x (block_per_row's do)
    "fast_math": {"cross_entropy", "layernorm", "self_attention", "softmax"},
}
REWRITES = {rewrite.name: rewrite for rewrite in all_rewrites()}
PAIRS = [(name, task) for name in REWRITES for task in NAIVE_TASKS]
APPLICABLE = [(name, task) for name, task in PAIRS if task in APPLIES[name]]


def naive(task: str) -> Candidate:
    spec = tasks.get(task)
    return Candidate.from_source_and_plan(spec.naive_source, spec.naive_plan)


def run(rewrite: str, task: str, candidate: Candidate | None = None, fast_math: bool = True):
    """(the proposal or None, the refusal or None) of one rewrite."""
    context = NodeContext(
        task=task,
        candidate=candidate or naive(task),
        measurement=None,
        diagnosis=None,
        tolerance_allows_fast_math=fast_math,
    )
    proposals, refused = RewriteSource((REWRITES[rewrite],)).evaluate(context)
    return (proposals[0] if proposals else None), refused.get(rewrite)


def test_the_expected_table_covers_every_rewrite():
    assert set(APPLIES) == set(REWRITES)


@pytest.mark.parametrize(("rewrite", "task"), PAIRS)
def test_each_rewrite_applies_to_exactly_the_naive_kernels_whose_precondition_holds(rewrite, task):
    proposal, refusal = run(rewrite, task)
    if task in APPLIES[rewrite]:
        assert proposal is not None, refusal
        assert refusal is None
    else:
        assert proposal is None
        assert refusal  # a stated reason, never silence


@pytest.mark.parametrize(("rewrite", "task"), APPLICABLE)
def test_a_rewrite_proposal_says_where_it_came_from_and_what_changed(rewrite, task):
    proposal, _ = run(rewrite, task)
    assert proposal.source == f"rewrite:{rewrite}"
    assert proposal.title and proposal.rationale
    assert set(proposal.families) <= set(FAMILIES) and proposal.families
    assert proposal.diff.startswith("---") and "+++" in proposal.diff
    assert proposal.candidate.content_hash() != naive(task).content_hash()
    assert not parse(proposal.candidate.source).root_node.has_error


@pytest.mark.parametrize(("rewrite", "task"), APPLICABLE)
def test_a_rewritten_plan_passes_the_plan_check_at_l1_and_every_l0_size(rewrite, task):
    proposal, _ = run(rewrite, task)
    check_plan(tasks.get(task), proposal.candidate, tasks.get(task).sizes)  # raises CandidateError if not


@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.parametrize(("rewrite", "task"), APPLICABLE)
def test_every_rewritten_naive_kernel_compiles_with_nvcc(rewrite, task, tmp_path):
    proposal, _ = run(rewrite, task)
    report = compile_candidate(proposal.candidate, cache_dir=tmp_path)
    assert report.ok, report.log[-2000:]
    assert {k.kernel for k in report.kernels} >= {launch.kernel for launch in proposal.candidate.launches}


@pytest.mark.parametrize(("rewrite", "task"), APPLICABLE)
def test_a_rewrite_does_not_apply_twice(rewrite, task):
    proposal, _ = run(rewrite, task)
    again, refusal = run(rewrite, task, proposal.candidate)
    assert again is None and refusal


def chain(task: str, order) -> tuple[Candidate, list[str]]:
    candidate, applied = naive(task), []
    for rewrite in order:
        proposal, _ = run(rewrite.name, task, candidate)
        if proposal is not None:
            candidate, applied = proposal.candidate, [*applied, rewrite.name]
    return candidate, applied


@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.parametrize("task", NAIVE_TASKS)
@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_rewrites_compose_in_either_order_and_still_compile(task, direction, tmp_path):
    order = all_rewrites() if direction == "forward" else tuple(reversed(all_rewrites()))
    candidate, applied = chain(task, order)
    expected = {name for name, tasks_ in APPLIES.items() if task in tasks_}
    if direction == "forward":
        # block_per_row leaves loops strided by blockDim.x, which vectorize_rows (after it) takes.
        expected |= {"vectorize_rows"} if "block_per_row" in expected else set()
    else:
        # Backwards, vectorize_float4 makes relu a grid-stride loop first, so grid_stride has
        # nothing to do; online_softmax fuses the row's first two loops into a pair block_per_row
        # does not combine, so it leaves softmax and cross_entropy alone.
        expected -= {"grid_stride"} if task == "relu" else set()
        expected -= {"block_per_row"} if "online_softmax" in expected else set()
    assert set(applied) == expected
    check_plan(tasks.get(task), candidate, tasks.get(task).sizes)
    report = compile_candidate(candidate, cache_dir=tmp_path)
    assert report.ok, report.log[-2000:]


def test_restrict_marks_only_the_pointers_a_kernel_reads():
    proposal, _ = run("restrict", "layernorm")
    source = proposal.candidate.source
    for read_only in ("x", "gamma", "beta"):
        assert f"const float* __restrict__ {read_only}" in source
    assert "float* y" in source and "__restrict__ y" not in source  # written through `out`


def test_unroll_puts_a_pragma_before_each_constant_loop_and_none_before_the_runtime_one():
    proposal, _ = run("unroll", "conv2d")
    source = proposal.candidate.source
    assert source.count("#pragma unroll") == 2
    assert "#pragma unroll\n        for (int r = 0; r < 3; ++r)" in source
    assert "#pragma unroll\n    for (int c" not in source


def test_launch_bounds_uses_the_tunable_names_so_it_follows_the_plan():
    sgemm, _ = run("launch_bounds", "sgemm")
    assert "__launch_bounds__(TILE * TILE) sgemm_naive(" in sgemm.candidate.source
    reduce_sum, refusal = run("launch_bounds", "reduce_sum")
    assert "__launch_bounds__(BLOCK) block_sum(" in reduce_sum.candidate.source
    assert (
        "zero_output(" in reduce_sum.candidate.source
        and "__launch_bounds__(1)" not in reduce_sum.candidate.source
    )


def test_grid_stride_caps_the_grid_at_132_sms_times_16_blocks():
    proposal, _ = run("grid_stride", "relu")
    assert proposal.candidate.launches[0].grid == ("min(cdiv(n, BLOCK), 132 * 16)",)
    assert "i += (long long)blockDim.x * gridDim.x" in proposal.candidate.source


def test_warp_shuffle_reduce_stops_the_tree_at_64_and_guards_the_block_size():
    proposal, _ = run("warp_shuffle_reduce", "reduce_sum")
    source = proposal.candidate.source
    assert "stride > 32; stride /= 2" in source
    assert "__shfl_down_sync(0xffffffffu, warp_value, offset)" in source
    assert "static_assert(BLOCK >= 64 && (BLOCK & (BLOCK - 1)) == 0" in source


@pytest.mark.nvcc
@needs_nvcc
def test_the_static_assert_stops_a_later_tuning_step_below_64_threads(tmp_path):
    proposal, _ = run("warp_shuffle_reduce", "reduce_sum")
    too_small = Candidate.from_dict({**proposal.candidate.to_dict(), "tunables": {"BLOCK": 32}})
    report = compile_candidate(too_small, cache_dir=tmp_path)
    assert not report.ok and "warp_shuffle_reduce needs a power-of-two block" in report.log


# --- vectorize_float4: the generated loops cover every element exactly once --------------------

_BUILTINS = {"blockIdx.x": "bx", "blockDim.x": "bd", "threadIdx.x": "tx", "gridDim.x": "gd"}


def as_python(expression: str) -> str:
    """A C index expression of the generated code as Python (casts dropped, / as //)."""
    expression = re.sub(r"\((?:long long|int)\)", "", expression)
    for builtin, name in _BUILTINS.items():
        expression = expression.replace(builtin, name)
    return expression.replace("/", "//")


def generated_loops(source: str):
    """vec_count's initialiser, and (start, bound, step) of the float4 loop and the tail loop."""
    kernel = find_kernels(parse(source))[0]
    statements = named_statements(kernel.body)
    declarations = {
        text(d.child_by_field_name("declarator")): text(d.child_by_field_name("value"))
        for s in statements
        if s.type == "declaration"
        for d in s.children_by_field_name("declarator")
    }
    loops = []
    for loop in (s for s in statements if s.type == "for_statement"):
        init = loop.child_by_field_name("initializer").children_by_field_name("declarator")[0]
        condition, update = loop.child_by_field_name("condition"), loop.child_by_field_name("update")
        loops.append(
            (
                text(init.child_by_field_name("value")),
                text(condition.child_by_field_name("right")),
                text(update.child_by_field_name("right")),
            )
        )
    return declarations, loops


def covered(source: str, n: int, grid: int, block: int) -> Counter:
    declarations, ((vec_start, vec_bound, vec_step), (tail_start, tail_bound, tail_step)) = generated_loops(
        source
    )
    names = {"n": n, "bd": block, "gd": grid}
    names["vec_count"] = eval(as_python(declarations["vec_count"]), {}, names)  # noqa: S307 - our own output
    names["vec_stride"] = eval(as_python(declarations["vec_stride"]), {}, names)  # noqa: S307
    assert (vec_bound, tail_bound, vec_step, tail_step) == ("vec_count", "n", "vec_stride", "vec_stride")
    seen: Counter = Counter()
    for bx in range(grid):
        for tx in range(block):
            thread = {**names, "bx": bx, "tx": tx}
            v = eval(as_python(vec_start), {}, thread)  # noqa: S307
            while v < names["vec_count"]:
                seen.update(range(4 * v, 4 * v + 4))
                v += names["vec_stride"]
            i = eval(as_python(tail_start), {}, thread)  # noqa: S307
            while i < n:
                seen[i] += 1
                i += names["vec_stride"]
    return seen


@pytest.mark.parametrize("n", [1, 3, 4, 5, 1000, 4099, 65537])
@pytest.mark.parametrize("first", [None, "grid_stride"])
def test_vectorized_relu_covers_every_element_once_including_the_n_mod_4_tail(n, first):
    candidate = naive("relu") if first is None else run(first, "relu")[0].candidate
    proposal, refusal = run("vectorize_float4", "relu", candidate)
    assert proposal is not None, refusal
    from profiling.harness import expr

    names = {"n": n, **proposal.candidate.tunables}
    grid = expr.evaluate_int(proposal.candidate.launches[0].grid[0], names)
    block = expr.evaluate_int(proposal.candidate.launches[0].block[0], names)
    seen = covered(proposal.candidate.source, n, grid, block)
    assert sorted(seen) == list(range(n)) and set(seen.values()) == {1}


def test_vectorized_relu_loads_and_stores_float4_and_keeps_the_scalar_body_for_the_tail():
    proposal, _ = run("vectorize_float4", "relu")
    source = proposal.candidate.source
    assert "const float4 x_f4 = reinterpret_cast<const float4*>(x)[vec_i];" in source
    assert "reinterpret_cast<float4*>(y)[vec_i] = y_f4;" in source
    assert [f"y_f4.{lane} = fmaxf(x_f4.{lane}, 0.0f);" in source for lane in "xyzw"] == [True] * 4
    assert source.count("y[i] = fmaxf(x[i], 0.0f);") == 1  # the tail loop
    assert proposal.candidate.launches[0].grid == ("cdiv(n, 4 * BLOCK)",)


# --- the RewriteSource contract ----------------------------------------------------------------


def context_for(source: str, task: str = "relu") -> NodeContext:
    plan = {**tasks.get(task).naive_plan}
    return NodeContext(
        task=task,
        candidate=Candidate.from_source_and_plan(source, plan),
        measurement=None,
        diagnosis=None,
        tolerance_allows_fast_math=True,
    )


def test_a_source_that_does_not_parse_gets_no_proposals_and_says_why():
    source = 'extern "C" __global__ void relu(const float* x, float* y, int n) { y[0] = (; }'
    proposals, refused = RewriteSource().evaluate(context_for(source))
    assert proposals == []
    assert set(refused) == set(REWRITES) and all("does not parse" in why for why in refused.values())


def test_kernels_without_extern_c_are_left_alone():
    source = "__global__ void relu(const float* x, float* y, int n) { y[0] = x[0]; }"
    assert RewriteSource().propose(context_for(source)) == []


def test_every_proposal_of_the_source_differs_from_its_parent():
    for task in NAIVE_TASKS:
        parent = naive(task)
        context = NodeContext(
            task=task, candidate=parent, measurement=None, diagnosis=None, tolerance_allows_fast_math=True
        )
        hashes = [p.candidate.content_hash() for p in RewriteSource().propose(context)]
        assert parent.content_hash() not in hashes
        assert len(hashes) == len(set(hashes))
