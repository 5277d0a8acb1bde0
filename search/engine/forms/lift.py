"""Lift a kernel to its family form, or refuse and say why.

    lift(source, plan) -> Form | Refusal

The index space comes from reading.py; the statements one index point runs decide the
family: no loops is an elementwise map (or, with one `atomicAdd(out, term)` after an
output zeroed by the plan's first launch, a full reduction); loops over the row with a
one-axis space is a row map-reduce (rows.py reads the loops). Whatever the analysis
cannot vouch for (shared memory, barriers, shuffles, thread indices read in the math,
calls it does not know, an early exit inside the work) refuses the lift.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from tree_sitter import Node

from ..rewrites.syntax import (
    Kernel,
    defined_functions,
    find_kernels,
    named_statements,
    parse,
    text,
    walk,
)
from . import contraction, flatmap, permutes, planes, radix, rows, scans, two_pass, windows
from .accumulators import _accumulation
from .block_reduce import block_reduced
from .hand_tiled import hand_tiled
from .lone_thread import lone_thread
from .normalize import block_constants_as_dims, normalized
from .reading import NotRead, _declaration, condition_of, plane_bounds, read_space, reads_thread
from .types import CONTRACTION, FULL_REDUCE, MAP, Form, Refusal
from .warp_reduce import warp_reduced
from .zeroing import zeroed_output

# Calls whose effect depends on which threads run together, or that reach memory behind
# the analysis' back. atomicAdd is read only as a full reduction's last statement.
_THREAD_SENSITIVE = ("__sync", "__shfl", "__ballot", "__any", "__all", "__activemask", "__match",
                     "__reduce", "__nanosleep", "__threadfence", "atomic", "malloc", "free", "asm",
                     "cooperative_groups", "cg::")
_FORBIDDEN = ("break_statement", "continue_statement", "goto_statement", "labeled_statement",
              "gnu_asm_expression", "return_statement")
_LOOPS = ("for_statement", "while_statement", "do_statement")


def lift(source: str, plan: dict[str, Any]) -> Form | Refusal:
    """The family form of the plan's kernel (the last launch's, after a zeroing launch; a
    reduction's two launches, partials then their sum, as one: two_pass.py)."""
    two = two_pass.lifted(source, plan, _lift_one)
    return two if two is not None else _lift_one(source, plan)


def _lift_one(source: str, plan: dict[str, Any]) -> Form | Refusal:
    launches = plan.get("launches") or []
    source = block_constants_as_dims(normalized(source), launches[-1] if launches else {})
    lone = lone_thread(source, launches[-1]) if launches else None
    if lone is not None:  # only thread 0 of each block works: blocks of one thread (lone_thread.py)
        source, launches = lone[0], [*launches[:-1], lone[1]]
    reduced = block_reduced(source, launches[-1], plan.get("tunables", {})) if launches else None
    if reduced is not None:  # a block's reduction through shared memory (block_reduce.py)
        source, launches = reduced[0], [*launches[:-1], reduced[1]]
    warped = warp_reduced(source, launches[-1], plan.get("tunables", {})) if launches else None
    if warped is not None:  # a warp's reduction through shuffles (warp_reduce.py)
        source, launches = warped[0], [*launches[:-1], warped[1]]
    tiled = hand_tiled(source, launches[-1]) if launches else None  # a product tiled by hand (hand_tiled.py)
    if isinstance(tiled, Refusal):
        return tiled
    source = tiled or source
    tree = parse(source)
    kernels = {k.name: k for k in find_kernels(tree)}
    zeroed = None
    if len(launches) == 2:
        zeroed = zeroed_output(kernels.get(launches[0].get("kernel", "")), launches[0])
        if zeroed is None:
            return Refusal("two launches, and the first does not just zero one output")
    elif len(launches) != 1:
        return Refusal(f"{len(launches)} launches; a form is lifted from one kernel")
    launch = launches[-1]
    kernel = kernels.get(launch.get("kernel", ""))
    if kernel is None:
        return Refusal(f"no extern \"C\" kernel named {launch.get('kernel')!r}")
    helpers = defined_functions(tree.root_node) - set(kernels)
    extra: tuple[str, ...] = ()
    try:
        space = read_space(kernel, plane_bounds(launch.get("grid", []), launch.get("args", []),
                                                [p.name for p in kernel.params], launch.get("block")))
    except NotRead as error:
        widened = planes.told(source, launch, [p.name for p in kernel.params], error)
        if widened is None:
            return Refusal(str(error))
        source, launch, extra = widened  # the grid's extents passed as parameters
        tree = parse(source)
        kernel = {k.name: k for k in find_kernels(tree)}[launch["kernel"]]
        try:
            names = [p.name for p in kernel.params]
            space = read_space(kernel, plane_bounds(launch["grid"], launch["args"], names,
                                                    launch.get("block")))
        except NotRead as again:
            return Refusal(str(again))
    problem = _hazard(space.body, space.thread_names | {"blockIdx", "threadIdx", "blockDim", "gridDim"},
                      helpers)
    if problem:
        return Refusal(problem)
    common = {**_common(kernel, source, space, helpers, launch.get("args", [])), "extra_args": extra}
    if space.after:
        return _partial_sums(space, common, zeroed)
    if any(n.type in _LOOPS for statement in space.body for n in walk(statement)):
        atomics = zeroed is not None or any(_atomic_call(s) is not None for s in space.body)
        if len(space.axes) >= 2:
            # a product first, then a window; else rows over the flattened axes (a
            # reduction per (b, j))
            form = contraction.lift_contraction(kernel, space, common)
            if isinstance(form, Form) or atomics:
                return form
            window = windows.lift_window(kernel, space, common)
            if isinstance(window, Form):
                return window
            as_rows = rows.lift_rows(kernel, space, common)
            return _not_a_product(as_rows, form) if isinstance(as_rows, Form) else form
        product = None
        if radix.decomposed(space) or not atomics:  # a flat index read as (n, k, p): a product first
            product = contraction.lift_contraction(kernel, space, common) if radix.decomposed(space) else None
            if isinstance(product, Form):
                return product
            window = windows.lift_window(kernel, space, common) if not atomics else None
            if isinstance(window, Form):
                return window
        if atomics:
            return Refusal("a row kernel that accumulates with atomics", family=rows.ROWS)
        return _not_a_product(_rows_or_scan(kernel, space, common), product)
    atomics = [s for s in space.body if _atomic_call(s) is not None]
    if atomics:
        return _full_reduction(space, common, atomics, zeroed)
    if zeroed is not None:
        return Refusal("the first launch zeroes an output that no atomic accumulates into")
    form = Form(family=MAP, body=_text(space.body), direct=_direct(space, kernel), **form_fields(common))
    flat = flatmap.flattened(form) if len(space.axes) == 2 else None
    if flat is not None and _direct(replace(space, axes=flat.space, body=flatmap.statements(flat.body)),
                                    kernel):
        return replace(flat, direct=True)  # a 2-D map of p[row * W + col] alone (flatmap.py)
    return permutes.lift_permutation(space, common) or form  # reads along one coordinate, writes another


def _rows_or_scan(kernel: Kernel, space, common: dict[str, Any]) -> Form | Refusal:
    """A row map-reduce, or, where its running value is read inside its loop, a scan."""
    as_rows = rows.lift_rows(kernel, space, common)
    if isinstance(as_rows, Form):
        return as_rows
    scan = scans.lift_scan(kernel, space, common)
    if isinstance(scan, Form):
        return scan
    return replace(as_rows, reason=f"{as_rows.reason}; not a scan: {scan.reason}")


def _not_a_product(form: Form | Refusal, product: Form | Refusal | None) -> Form | Refusal:
    """A kernel read as rows after it was refused as a contraction says why it was."""
    if not isinstance(form, Form) or not isinstance(product, Refusal) or product.family != CONTRACTION:
        return form
    return replace(form, notes=(*form.notes, f"not a contraction: {product.reason}"))


def _common(kernel: Kernel, source: str, space, helpers: set[str], launch_args) -> dict[str, Any]:
    reads, writes = rows.pointer_use(kernel, space.body)
    start = kernel.definition.start_byte
    signature = source.encode()[start:kernel.body.start_byte].decode().strip()
    if not signature.startswith("extern"):
        signature = f'extern "C" {signature}'  # the definition sat inside an extern "C" block
    kinds = {p.name: p.base_type for p in kernel.params}
    return {"kernel": kernel.name, "signature": signature, "kinds": kinds,
            "args": [str(a) for a in launch_args],
            "params": tuple(p.name for p in kernel.params), "prelude": _text(space.prelude),
            "space": space.axes, "reads": tuple(sorted(reads)), "writes": tuple(sorted(writes)),
            "helpers": _helper_text(source, helpers)}


def form_fields(common: dict[str, Any]) -> dict[str, Any]:
    """What a Form keeps of what every lift reads (the parameters' types and the plan's
    arguments only serve the checks)."""
    return {k: v for k, v in common.items() if k not in ("kinds", "args")}


_DIRECTIVES = ("preproc_def", "preproc_function_def", "preproc_include", "preproc_call")


def _helper_text(source: str, helpers: set[str]) -> str:
    """What the kernel's math may need from the rest of the file, in its order: the
    top-level directives (`#define IDX(r, c) ...`, `#include <...>`) and the helper
    functions the kernel calls."""
    tree = parse(source)
    pieces = []
    for node in tree.root_node.named_children:
        if node.type in _DIRECTIVES:
            pieces.append(text(node).rstrip())
        elif node.type == "function_definition" and \
                text(node.child_by_field_name("declarator")).split("(")[0].split()[-1] in helpers:
            pieces.append(text(node))
    return "\n\n".join(pieces)


def _text(statements) -> str:
    return "\n".join(text(s) for s in statements)


def _hazard(body, thread_names: set[str], helpers: set[str]) -> str | None:
    for node in (n for statement in body for n in walk(statement)):
        where = f"line {node.start_point.row + 1}"
        if node.type in _FORBIDDEN:
            return f"{where}: a {node.type.replace('_', ' ')} inside the work of one index point"
        if node.type == "identifier" and text(node) in thread_names:
            return f"{where}: the math reads {text(node)}; only the index variables may be read"
        if node.type == "type_qualifier" and text(node) == "__shared__":
            return f"{where}: __shared__ memory: threads cooperate, which a family form does not read"
        if node.type == "storage_class_specifier" and text(node) == "static":
            return f"{where}: a static local"
        if node.type == "call_expression":
            name = text(node.child_by_field_name("function"))
            if name.startswith(_THREAD_SENSITIVE) and not name.startswith("atomicAdd"):
                return f"{where}: calls {name}, whose effect depends on the other threads"
            if name in helpers and _helper_hazard(node):
                return f"{where}: calls {name}, which reads thread indices"
        if node.type == "pointer_expression" and text(node).startswith("*") and _writes_target(node):
            return f"{where}: writes through *{text(node)[1:]}; only p[index] writes are read"
    return None


def _helper_hazard(call: Node) -> bool:
    root = call
    while root.parent is not None:
        root = root.parent
    name = text(call.child_by_field_name("function"))
    for node in root.named_children:
        declarator = node.child_by_field_name("declarator") if node.type == "function_definition" else None
        if declarator is not None and text(declarator).split("(")[0].split()[-1] == name:
            return reads_thread(node) or any(
                text(n).startswith(_THREAD_SENSITIVE) for n in walk(node) if n.type == "identifier")
    return True


def _writes_target(node: Node) -> bool:
    parent = node.parent
    return parent is not None and (
        (parent.type == "assignment_expression" and parent.child_by_field_name("left") == node)
        or parent.type == "update_expression")


def _atomic_call(statement: Node) -> Node | None:
    for node in walk(statement):
        if node.type == "call_expression" and text(node.child_by_field_name("function")).startswith("atomic"):
            return node
    return None


def _full_reduction(space, common: dict[str, Any], atomics: list[Node], zeroed: str | None) -> Form | Refusal:
    if len(atomics) != 1 or atomics[0] is not space.body[-1] or len(space.axes) != 1:
        return Refusal("atomics other than one accumulation as the last statement", family=FULL_REDUCE)
    statement, guard = _guarded_term(atomics[0])
    call = _atomic_call(statement)
    name = text(call.child_by_field_name("function"))
    arguments = call.child_by_field_name("arguments").named_children
    if name != "atomicAdd" or len(arguments) != 2 or text(statement).rstrip(";") != text(call):
        return Refusal(f"{text(atomics[0])}: not a plain atomicAdd(out, term)", family=FULL_REDUCE)
    target = text(arguments[0]).replace(" ", "")
    into = target[1:].removesuffix("[0]") if target.startswith("&") else target
    if into not in common["params"]:
        return Refusal(f"atomicAdd into {target}, not an output parameter's first element",
                       family=FULL_REDUCE)
    problem = _accumulated_output(common, into, zeroed)
    if problem:
        return Refusal(problem, family=FULL_REDUCE)
    written = common["writes"]
    if set(written) - {into}:
        return Refusal("writes outputs besides the accumulated one", family=FULL_REDUCE)
    term = text(arguments[1]) if guard is None else f"(({guard}) ? ({text(arguments[1])}) : 0.0f)"
    return Form(family=FULL_REDUCE, body=_text(space.body[:-1]), total=term, into=into,
                **{**form_fields(common), "writes": (into,)})


def _guarded_term(statement: Node) -> tuple[Node, str | None]:
    """`if (c) atomicAdd(out, t);` (braced or not, no else): (the atomic's statement, c),
    a term that is t where c holds and 0 elsewhere; any other statement: (it, None)."""
    if statement.type != "if_statement" or statement.child_by_field_name("alternative") is not None:
        return statement, None
    consequence = statement.child_by_field_name("consequence")
    inner = named_statements(consequence) if consequence.type == "compound_statement" else [consequence]
    condition = condition_of(statement)
    if len(inner) != 1 or condition is None:
        return statement, None
    return inner[0], text(condition)


def _accumulated_output(common: dict[str, Any], into: str, zeroed: str | None) -> str | None:
    """Why `into` is not a float output that the plan's first launch zeroes, or None."""
    if into not in common["params"]:
        return f"accumulates into {into}, not a parameter"
    if common["kinds"].get(into) != "float":
        return f"accumulates into {into}, a {common['kinds'].get(into)} buffer; float sums only"
    position = common["params"].index(into)
    accumulated = common["args"][position] if position < len(common["args"]) else None
    if zeroed is None or zeroed != accumulated:
        return f"the plan does not zero {accumulated} before the atomics add to it"
    return None


def _partial_sums(space, common: dict[str, Any], zeroed: str | None) -> Form | Refusal:
    """A grid-stride loop summing into a thread's partial, then one atomicAdd(out, partial
    [/ or * a uniform factor]): a full reduction whose term is the loop's summand."""
    if len(space.after) != 1 or _atomic_call(space.after[0]) is None:
        return Refusal("statements after the grid-stride loop other than one atomicAdd", family=FULL_REDUCE)
    declared = {}
    for statement in space.prelude:
        found = _declaration(statement)
        if found is not None:
            declared[found[0]] = found[1]
    updates = [(s, _accumulation(s)) for s in space.body]
    sums = [(s, found[0]) for s, found in updates if found and found[1] == "sum" and found[0] in declared]
    if len(sums) != 1 or declared[sums[0][1]].replace("const ", "") != "float":
        return Refusal("the grid-stride loop does not sum one float partial", family=FULL_REDUCE)
    update, partial = sums[0]
    call = _atomic_call(space.after[0])
    arguments = call.child_by_field_name("arguments").named_children
    if text(call.child_by_field_name("function")) != "atomicAdd" or len(arguments) != 2:
        return Refusal("the partial is not added with atomicAdd(out, ...)", family=FULL_REDUCE)
    value = text(arguments[1]).replace(" ", "")
    linear = re.fullmatch(rf"\(?{partial}\)?(?:[/*]\(?[\w.]+\)?)?|\(?[\w.]+\)?\*\(?{partial}\)?", value)
    if linear is None or value.count(partial) != 1:
        return Refusal(f"{text(arguments[1])} is not the partial times or over a uniform factor",
                       family=FULL_REDUCE)
    if any(n.type == "identifier" and text(n) == partial for s in space.body if s is not update
           for n in walk(s)):
        return Refusal(f"the partial {partial} is read inside the loop", family=FULL_REDUCE)
    term = update.named_children[0].child_by_field_name("right")
    if text(update.named_children[0].child_by_field_name("operator")) != "+=":
        term = next(n for n in (term.child_by_field_name("left"), term.child_by_field_name("right"))
                    if text(n) != partial)
    target = text(arguments[0]).replace(" ", "")
    into = target[1:].removesuffix("[0]") if target.startswith("&") else target
    problem = _accumulated_output(common, into, zeroed)
    if problem:
        return Refusal(problem, family=FULL_REDUCE)
    start = next(_declaration(s)[2] for s in space.prelude
                 if _declaration(s) and _declaration(s)[0] == partial)
    if text(start) not in ("0.0f", "0.f", "0", "0.0"):
        return Refusal(f"the partial {partial} does not start at zero", family=FULL_REDUCE)
    finish = re.sub(rf"\b{partial}\b", "optiml_sum", text(arguments[1]))
    body = [s for s in space.body if s is not update]
    return Form(family=FULL_REDUCE, body=_text(body), total=text(term), into=into, finish=finish,
                **{**form_fields(common), "writes": (into,)})


def _direct(space, kernel: Kernel) -> bool:
    """Every memory access is p[i] of the one index, every pointer a float parameter, and
    each written pointer written on every path through the element's work."""
    if len(space.axes) != 1:
        return False
    index = space.axes[0].name
    pointers = {p.name for p in kernel.pointer_params()}
    if any(p.base_type != "float" for p in kernel.pointer_params()):
        return False
    for statement in space.body:
        for node in walk(statement):
            if node.type == "identifier" and text(node) == index:
                parent = node.parent
                subscript = parent.parent if parent is not None else None
                if parent is None or parent.type != "subscript_argument_list" or subscript is None \
                        or len(parent.named_children) != 1 \
                        or text(subscript.child_by_field_name("argument")) not in pointers:
                    return False
            if node.type == "identifier" and text(node) in pointers:
                parent = node.parent
                if parent is None or parent.type != "subscript_expression" \
                        or text(parent.child_by_field_name("indices")).replace(" ", "") != f"[{index}]":
                    return False  # x[0], x[i + 1], or the pointer itself passed on
                outer = parent.parent
                if outer is not None and outer.type == "pointer_expression":
                    return False  # &x[i]: an address, not a value a float4 lane can stand for
    written = {rows.assigned_subscript(n) for s in space.body for n in walk(s)} - {None}
    return written <= always_written(list(space.body))


def always_written(statements: list[Node]) -> set[str]:
    """The pointers every path through the statements writes (p[...] = ..., an if with an
    else writing them on both sides)."""
    found: set[str] = set()
    for statement in statements:
        target = rows.assigned_subscript(statement)
        if target is not None:
            found.add(target)
        elif statement.type == "compound_statement":
            found |= always_written(named_statements(statement))
        elif statement.type == "if_statement" and statement.child_by_field_name("alternative") is not None:
            alternative = statement.child_by_field_name("alternative")
            other = alternative.named_children[-1] if alternative.type == "else_clause" else alternative
            found |= always_written([statement.child_by_field_name("consequence")]) & \
                always_written([other])
    return found
