"""What every skeleton shares: the emitted kernel and plan, the family check, the index
space's bounds as plan expressions, and the kernel's text around a new body."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from profiling.harness import expr
from profiling.harness.spec import Task

from . import emit, strides
from .types import CONTRACTION, FULL_REDUCE, MAP, PERMUTATION, ROWS, SCAN, WINDOW, Form, LoopHole, Uniform

DEFAULT_BLOCK = 256  # threads; a multiple of the warp, 8 warps per block as CUB's defaults
DEFAULT_ITEMS = 4  # elements per thread per grid-stride step: four loads in flight
# A wave of blocks for the grid-stride reduction: 132 SMs (H100 and H200 SXM) x 8 resident
# blocks of 256 threads; a tunable, so the search moves it.
DEFAULT_WAVE_BLOCKS = 1056


@dataclass(frozen=True)
class Emitted:
    source: str
    plan: dict[str, Any]
    rationale: str


def last_launch(plan: dict[str, Any]) -> dict[str, Any]:
    return (plan.get("launches") or [{}])[-1]


def buffer_names(task: Task, plan: dict[str, Any]) -> set[str]:
    return {t.name for t in task.all_tensors()} | {s.get("name", "") for s in plan.get("scratch", [])}


def launch_of(form: Form, plan: dict[str, Any]) -> dict[str, Any]:
    """The plan's launch of the lifted kernel, with the arguments the lift added (or
    rewrote: a reduction in two launches, two_pass.py)."""
    launch = last_launch(plan)
    return {**launch, "args": [*(form.launch_args or launch.get("args", [])), *form.extra_args]}


def plan_with(form: Form, plan: dict[str, Any], task: Task, grid: str, tunables: dict[str, int],
             before: list[dict[str, Any]] | None = None) -> dict[str, Any] | str:
    sizes = [task.sizes, *task.l0_sizes]
    problem = emit.check_at_sizes(grid, sizes, tunables)
    if problem:
        return problem
    launch = {"kernel": form.kernel, "grid": [grid], "block": ["BLOCK"], "shared_bytes": 0,
              "args": list(launch_of(form, plan)["args"])}
    launches = [*(before or []), launch]
    passed = {str(a) for each in launches for a in each["args"]}
    # a buffer no launch is passed any more (a two-pass reduction's partials) is not allocated
    return {"launches": launches, "scratch": [s for s in plan.get("scratch", []) if s.get("name") in passed],
            "tunables": {**plan.get("tunables", {}), **tunables}}


def size_expression(form: Form, text: str, plan: dict[str, Any], task: Task) -> str:
    """A kernel-side size as a plan expression (the kernel's #defines expanded first)."""
    locals_ = {name: strides.expand_macros(value, form.helpers)
               for name, value in emit.uniform_locals(form.prelude).items()}
    return emit.plan_expression(strides.expand_macros(text, form.helpers), form, launch_of(form, plan),
                                buffer_names(task, plan), locals_)


# A row skeleton spreads a row's loops over threads: rows shorter than a warp at the
# task's sizes (a 2 x 2 pooling window read as a row) would leave most of them idle.
SHORTEST_ROW = 32


def short_rows_problem(form: Form, plan: dict[str, Any], task: Task) -> str | None:
    """Why the form's longest row loop is too short to spread over threads at the task's
    sizes, or None (also when a bound is worked out per row: nothing to evaluate then)."""
    longest = 0
    for loop in (step for step in form.steps if isinstance(step, LoopHole)):
        try:
            count = 1
            for variable in loop.variables:
                bound = size_expression(form, variable.bound, plan, task)
                count *= expr.evaluate_int(bound, dict(task.sizes))
        except (emit.PlanProblem, expr.ExpressionError, ValueError, ZeroDivisionError):
            return None
        longest = max(longest, count)
    if longest < SHORTEST_ROW:
        return (f"rows of {longest} iterations at the task's sizes: spread over a block, most of its "
                "threads would idle")
    return None


def flat_total(form: Form) -> str:
    return " * ".join(f"(long long)({axis.bound})" for axis in form.space)


def unflatten(form: Form, flat: str, integer: str = "long long") -> str:
    """Declarations of the form's index variables from one flat index (slowest first), in
    `integer` arithmetic (`unsigned` where every flat index fits: 32-bit divisions)."""
    lines, inner = [], []
    for axis in reversed(form.space):
        divisor = " * ".join(f"({integer})({b})" for b in inner) or ""
        value = f"({flat} / ({divisor}))" if divisor else flat
        if axis is not form.space[0]:
            value = f"({value} % ({integer})({axis.bound}))"
        lines.append(f"{axis.ctype} {axis.name} = ({axis.ctype}){value};")
        inner.append(axis.bound)
    return "\n".join(reversed(lines))


def block_row(form: Form, sizes: list[str]) -> tuple[list[str], str]:
    """A block per row: the declarations of the block's row from blockIdx.x (unflattened,
    slowest axis first, when rows span a grid's axes) and the number of rows."""
    if len(form.space) == 1:
        axis = form.space[0]
        return [f"const {axis.ctype} {axis.name} = ({axis.ctype})blockIdx.x;"], sizes[0]
    return (["const long long optiml_flat_row = blockIdx.x;", unflatten(form, "optiml_flat_row")],
            " * ".join(f"({size})" for size in sizes))


def uniform_lines(step: Uniform) -> list[str]:
    """A row's uniform statement under a block per row: one that writes memory is written
    by one thread, and the block waits for it before anything reads it."""
    if step.writes:
        return ["if (threadIdx.x == 0) {", emit.indent(step.text, 4), "}", "__syncthreads();"]
    return [step.text]


def set_aside(loop: LoopHole) -> list[str]:
    """Each reduction's value before the loop kept aside, and the accumulator reset to its
    identity (an arg-reduction's index to its sentinel) for the threads' partials."""
    lines = []
    for r in loop.reductions:
        lines += [f"const {r.ctype} optiml_{r.name}_before = {r.name};", f"{r.name} = {r.identity};"]
        if r.index:
            lines += [f"const {r.index_ctype} optiml_{r.index}_before = {r.index};",
                      f"{r.index} = ({r.index_ctype})({r.sentinel});"]
    return lines


def spread_loop(loop: LoopHole, first: str, step: str) -> list[str]:
    """The loop's iterations `first`, `first + step`, ... (a nest flattened through
    optiml_t), each running the loop's own body."""
    if len(loop.variables) == 1:
        v = loop.variables[0]
        start = first if loop.start == "0" else f"({loop.start}) + {first}"
        head = f"{v.ctype} {v.name} = {start}; {v.name} < ({v.bound}); {v.name} += {step}"
        return [f"for ({head}) {{", emit.indent(loop.body, 4), "}"]
    total = " * ".join(f"(long long)({v.bound})" for v in loop.variables)
    names = "\n".join(nest_index(loop, position) for position in range(len(loop.variables)))
    return [f"for (long long optiml_t = {first}; optiml_t < {total}; optiml_t += {step}) {{",
            emit.indent(names, 4), emit.indent(loop.body, 4), "}"]


def nest_index(loop: LoopHole, position: int) -> str:
    """The declaration of a flattened loop nest's variable at `position` from optiml_t."""
    v = loop.variables[position]
    inner = " * ".join(f"(long long)({w.bound})" for w in loop.variables[position + 1:])
    value = f"optiml_t / ({inner})" if inner else "optiml_t"
    if position > 0:
        value = f"({value}) % (long long)({v.bound})"
    return f"const {v.ctype} {v.name} = ({v.ctype})({value});"


def kernel_text(form: Form, body: str, helpers: str = "") -> str:
    pieces = [p for p in (form.helpers, helpers) if p]
    head = emit.restricted(form.signature)
    return "\n\n".join([*pieces, f"{head} {{\n{emit.indent(form.prelude, 4)}\n{body}\n}}\n"])


_WHAT = {MAP: "an elementwise map", ROWS: "a row map-reduce", FULL_REDUCE: "a full reduction",
         CONTRACTION: "a contraction", WINDOW: "a window reduction", PERMUTATION: "a permutation",
         SCAN: "a scan"}


class Skeleton:
    """What every skeleton checks first: the form's family, and its index space's bounds
    written as plan expressions over the task's sizes (`sizes`, slowest axis first)."""

    family: str
    summary: str
    # the search's families (search/engine/types.FAMILIES) its schedule addresses, for the
    # judge's prior
    families: tuple[str, ...] = ()

    def emit(self, form: Form, plan: dict[str, Any], task: Task) -> Emitted | str:
        if not isinstance(form, Form):  # a Refusal names the family it looked like, not a form
            return f"no form to emit: {getattr(form, 'reason', form)}"
        if form.family != self.family:
            return f"a {form.family} form, not {_WHAT[self.family]}"
        try:
            sizes = [size_expression(form, axis.bound, plan, task) for axis in form.space]
        except emit.PlanProblem as error:
            return str(error)
        return self._emit(form, plan, task, sizes)

    def _emit(self, form: Form, plan: dict[str, Any], task: Task, sizes: list[str]) -> Emitted | str:
        raise NotImplementedError
