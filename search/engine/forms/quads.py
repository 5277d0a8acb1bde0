"""map.quads and window.quads: four neighbouring elements a thread, each with the
kernel's own work, their results stored as one float4.

A direct map (every access p[i]) has float4 lanes for every pointer (skeletons.Vec4Map).
Most maps people write are not direct: a broadcast operand (`bias[i % C]`), two halves of
a row (`x[m * 2 * D + d]` and `x[m * 2 * D + D + d]`), a gather (`x[(oy / 2) * W + ox / 2]`),
a neighbour (`x[i + half]`); a window's output reads its window. What they share with a
direct map is the write: element i of the output is `y[i]`, i the flat index of the
thread's coordinates. A thread then takes
the quad of flat indices 4q .. 4q + 3, runs the element's work for each with its
coordinates worked out from the flat index (the other reads as written: scalar loads,
four of them in flight), and stores the quad's four results as one float4. A pointer
read only at the flat index is loaded as one float4 too.

Preconditions, each checked, never assumed:
- every write is `p[e] = v` with e the same integer function of the coordinates as the
  flat index (strides.same_index, read through the work's integer locals, none of them
  assigned again), p a float pointer, written on every path through the work (else the
  quad is loaded first, so that a lane that writes nothing stores back what was there);
- the work has no `return` or `goto` (a lane's exit would end the whole quad);
- at run time, every pointer taken as float4 is 16-byte aligned; otherwise, and for the
  last total % 4 elements, the thread runs the elements one at a time.
"""

from __future__ import annotations

import re
from typing import Any

from profiling.harness import expr
from profiling.harness.spec import Task

from ..rewrites.syntax import parse, text, walk
from . import emit, strides
from .skeleton_base import DEFAULT_BLOCK, Emitted, Skeleton, flat_total, kernel_text, plan_with, unflatten
from .transposes import element_type
from .types import WINDOW, Form

COMPONENTS = ("x", "y", "z", "w")  # a float4's lanes, in memory order
_PREFIX = "void optiml_quad_body() {\n"


def narrow(total: str, task: Task, plan: dict[str, Any]) -> bool:
    """Whether every flat index fits 32 bits at every size the task runs (L1 and each L0):
    the coordinates are then worked out with 32-bit divisions, as the kernel did."""
    tunables = plan.get("tunables", {})
    try:
        return all(expr.evaluate_int(total, {**point, **tunables}) < 2**31
                   for point in (task.sizes, *task.l0_sizes))
    except expr.ExpressionError:  # a size the plan cannot say: the 64-bit arithmetic
        return False


def map_prologue(form: Form, narrow_: bool) -> str:
    """A map's coordinates from the flat index optiml_flat."""
    if narrow_:
        return "const unsigned optiml_u = (unsigned)optiml_flat;\n" + unflatten(form, "optiml_u", "unsigned")
    return unflatten(form, "optiml_flat")


def _is_written(subscript) -> bool:
    """Whether a subscript is stored to: an assignment's left side (compound ones too), or
    the operand of ++ or --."""
    parent = subscript.parent
    if parent.type == "assignment_expression":
        return parent.child_by_field_name("left") == subscript
    return parent.type == "update_expression"


def quad_work(form: Form, prologue: str) -> tuple[str, str] | str:
    """(the work of one quad, the pointers that must be 16-byte aligned) or why not;
    `prologue` declares an element's coordinates from optiml_flat."""
    body = form.body
    if re.search(r"\b(?:return|goto)\b", body):
        return "the element's work can return or jump: a lane's exit would end its quad"
    tree = parse(f"{_PREFIX}{body}\n}}")
    function = tree.root_node.named_children[0]
    statements = list(function.child_by_field_name("body").named_children)
    locals_ = emit.uniform_locals(body)
    flat = _flat_index(form)
    pointers = set(form.reads) | set(form.writes)
    at_flat: dict[str, list] = {p: [] for p in pointers}
    elsewhere: set[str] = set()  # accessed at another index than the flat one
    written_elsewhere: set[str] = set()
    for node in walk(function):
        if node.type != "subscript_expression":
            continue
        pointer = text(node.child_by_field_name("argument"))
        if pointer not in pointers:
            continue
        index = text(node.child_by_field_name("indices"))[1:-1]
        if _reassigned(index, locals_, body) or not strides.same_index(
                strides.through(index, locals_, keep=""), flat):
            elsewhere.add(pointer)
            written_elsewhere |= {pointer} if _is_written(node) else set()
        else:
            at_flat[pointer].append(node)
    for pointer in form.writes:
        if pointer in written_elsewhere:
            return f"{pointer} is written at an element other than the thread's own"
        if pointer in elsewhere:
            return (f"{pointer} is written at the thread's own element but read at another: "
                    "a quad would read a neighbour another thread writes")
        if element_type(form.signature, pointer) != "float":
            return f"{pointer} is not a float pointer"
    from .lift import always_written

    written_everywhere = always_written(statements)
    vectors = sorted(p for p in pointers if p not in elsewhere and at_flat[p]
                     and element_type(form.signature, p) == "float")
    loaded = [p for p in vectors if p in form.reads or p not in written_everywhere]
    lines = [f"const float4 {p}_v4 = reinterpret_cast<const float4*>({p})[optiml_q];"
             for p in loaded if p not in form.writes]
    load = " = reinterpret_cast<const float4*>({})[optiml_q]"
    lines += [f"float4 {p}_v4{load.format(p) if p in loaded else ''};" for p in form.writes]
    replaced = [node for p in vectors for node in at_flat[p]]
    for lane, component in enumerate(COMPONENTS):
        work = _substituted(body, replaced, component)
        lines.append("{\n" + emit.indent(f"const long long optiml_flat = optiml_q * 4 + {lane};\n"
                                         f"{prologue}\n{work}", 4) + "\n}")
    lines += [f"reinterpret_cast<float4*>({p})[optiml_q] = {p}_v4;" for p in form.writes]
    aligned = " | ".join(f"(unsigned long long){p}" for p in vectors)
    return "\n".join(lines), aligned


def quad_body(form: Form, quad: str, aligned: str, prologue: str) -> str:
    """The kernel's body: the quads at a grid stride where aligned, then the elements left."""
    return f"""    const long long optiml_total = {flat_total(form)};
    const long long optiml_stride = (long long)blockDim.x * gridDim.x;
    const long long optiml_first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long optiml_done = 0;
    if ((({aligned}) & 15ull) == 0) {{
        const long long optiml_quads = optiml_total / 4;
        for (long long optiml_q = optiml_first; optiml_q < optiml_quads; optiml_q += optiml_stride) {{
{emit.indent(quad, 12)}
        }}
        optiml_done = optiml_quads * 4;
    }}
    for (long long optiml_flat = optiml_done + optiml_first; optiml_flat < optiml_total;
         optiml_flat += optiml_stride) {{
{emit.indent(prologue, 8)}
{emit.indent(form.body, 8)}
    }}"""


def _flat_index(form: Form) -> str:
    """The flat index of the form's coordinates, slowest first: a * (B * C) + b * C + c."""
    terms = []
    for position, axis in enumerate(form.space):
        inner = [f"({a.bound})" for a in form.space[position + 1:]]
        terms.append(" * ".join([f"({axis.name})", *inner]))
    return " + ".join(terms)


def _reassigned(index: str, locals_: dict[str, str], body: str) -> bool:
    """Whether a local the index reads (directly or through others) is assigned after its
    declaration: its declared value would then not be the one the access sees."""
    names, seen = set(re.findall(r"[A-Za-z_]\w*", index)), set()
    while names:
        name = names.pop()
        if name in seen or name not in locals_:
            continue
        seen.add(name)
        names |= set(re.findall(r"[A-Za-z_]\w*", locals_[name]))
        changes = re.findall(rf"\b{name}\s*(?:[-+*/%&|^]|<<|>>)?=(?!=)|\b{name}\s*(?:\+\+|--)"
                             rf"|(?:\+\+|--)\s*{name}\b", body)
        if len(changes) > 1:
            return True
    return False


def _substituted(body: str, nodes: list, component: str) -> str:
    """The body with each of these subscripts (p[...] at the flat index) as p_v4.<component>."""
    source = body.encode()
    offset = len(_PREFIX.encode())
    for node in sorted(nodes, key=lambda n: n.start_byte, reverse=True):
        pointer = text(node.child_by_field_name("argument"))
        start, end = node.start_byte - offset, node.end_byte - offset
        source = source[:start] + f"{pointer}_v4.{component}".encode() + source[end:]
    return source.decode()


def window_prologue(form: Form, narrow_: bool) -> str:
    """A window output's coordinates from optiml_flat: on a grid, its axes (the work
    declares the rest); from one flat index, the row, the column and the planes' flat
    index optiml_rest, then what the kernel worked out from them (setups, the index)."""
    if len(form.space) > 1:
        return map_prologue(form, narrow_)
    row, column = form.coordinates
    integer, flat = ("unsigned", "optiml_u") if narrow_ else ("long long", "optiml_flat")
    width, height = f"({integer})({column.bound})", f"({integer})({row.bound})"
    lines = ["const unsigned optiml_u = (unsigned)optiml_flat;" if narrow_ else "",
             f"const {integer} optiml_rest = {flat} / ({height} * {width});",
             f"const {row.ctype} {row.name} = ({row.ctype})(({flat} / {width}) % {height});",
             f"const {column.ctype} {column.name} = ({column.ctype})({flat} % {width});",
             *form.setups, form.rebuild]
    return "\n".join(line for line in lines if line)


class WindowQuads(Skeleton):
    name = "window.quads"
    family = WINDOW
    intents = ("WINDOW_REUSE", "UNROLL")
    # neighbouring outputs' windows overlap: read by one thread, what they share is in L1
    # or in registers (tile); four outputs a thread, unrolled, one float4 store (vectorize)
    families = ("tile", "vectorize", "unroll")
    summary = ("four neighbouring outputs of a row a thread, each with the kernel's own window "
               "work (the inputs their windows share read by one thread), stored as one float4")

    def _emit(self, form: Form, plan: dict[str, Any], task: Task, sizes: list[str]) -> Emitted | str:
        if not form.coordinates:
            return "no output coordinates"
        total = " * ".join(f"({size})" for size in sizes)
        prologue = window_prologue(form, narrow(total, task, plan))
        work = quad_work(form, prologue)
        if isinstance(work, str):
            return work
        grid = f"max(cdiv({total}, 4 * BLOCK), 1)"
        new_plan = plan_with(form, plan, task, grid, {"BLOCK": DEFAULT_BLOCK})
        if isinstance(new_plan, str):
            return new_plan
        return Emitted(kernel_text(form, quad_body(form, *work, prologue)), new_plan, self.summary)
