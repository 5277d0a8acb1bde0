"""A reduction in two launches, read as the one-launch reduction it computes.

"CUDA by Example"'s dot product: the first launch leaves one partial per block (its
block's reduction, `if (tid == 0) partial[blockIdx.x] = cache[0];`) or per thread
(`partial[blockIdx.x * blockDim.x + threadIdx.x] = t;`) in a scratch buffer, and the
second, one thread or one block, adds them into the output:

    float s = 0;  for (int k = 0; k < parts; k++) s += partial[k];  out[0] = s;

Each partial is written once, by one thread, and the second launch only adds them all,
from 0, into the output; so the plan computes what zeroing the output and adding each
partial to it with an atomic computes (`atomicAdd(out, cache[0]);`, the sums regrouped,
which any reduction's tolerance allows). `lifted(source, plan, lift_one)` rewrites the
plan so (the second kernel's body as the zeroing of its output, launched first; the
first kernel's store as the atomic, its partials' parameter renamed to the output's and
passed the output) and lifts that with `lift_one`, which must read a full reduction.

It is refused, saying why, wherever the second launch does more than add the partials
(a division or a scale of the sum, another operator, a start that is not 0, a count of
partials that is not the first launch's blocks, or threads) or the first could leave a
slot unwritten or write one twice (a return, a store in a loop or under another test,
an index that is not the block's or the thread's own). A plan that does not look like
one (not two launches, or no scratch buffer the first writes and the second reads) is
None: the lift goes on as before.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from tree_sitter import Node

from profiling.harness import expr

from ..rewrites.syntax import (
    Edit,
    Kernel,
    find_kernels,
    is_builtin,
    is_global_index,
    named_statements,
    parse,
    splice,
    strip_parens,
    text,
    walk,
)
from . import strides
from .accumulators import _accumulation
from .block_reduce import block_reduced
from .lone_thread import lone_thread
from .normalize import block_constants_as_dims, normalized
from .reading import _declaration
from .types import FULL_REDUCE, Form, Refusal
from .zeroing import _first_thread, zeroed_output

_WHY = "two launches, partials then their sum: "
_ZEROS = ("0", "0.0f", "0.f", "0.0", "0.0F")
_SAMPLES = 24  # random bindings at which two plan expressions must agree to count as one


def lifted(source: str, plan: dict[str, Any], lift_one: Callable[[str, dict], Form | Refusal]
           ) -> Form | Refusal | None:
    """The plan's full reduction, a refusal that says why not, or None (not two such launches)."""
    launches = plan.get("launches") or []
    scratch = {str(s.get("name", "")) for s in plan.get("scratch", [])}
    if len(launches) != 2:
        return None
    first, second = launches
    shared = [a for a in first.get("args", []) if a in scratch and a in second.get("args", [])]
    if len(shared) != 1:
        return None
    source = normalized(source)
    kernels = {k.name: k for k in find_kernels(parse(source))}
    producer, combiner = kernels.get(first.get("kernel", "")), kernels.get(second.get("kernel", ""))
    if producer is None or combiner is None or producer.name == combiner.name or \
            zeroed_output(producer, first) is not None:
        return None  # (a launch that zeroes what the next accumulates into: lift reads it)
    buffer = shared[0]
    summed = _summed(source, second, plan.get("tunables", {}), buffer)
    if isinstance(summed, str):
        return Refusal(_WHY + summed, family=FULL_REDUCE)
    count, out = summed
    out_arg = second["args"][[p.name for p in combiner.params].index(out)]
    source = block_constants_as_dims(source, first)
    written = _written(source, first, buffer, out_arg)
    if isinstance(written, str):
        return Refusal(_WHY + written, family=FULL_REDUCE)
    store, per_thread = written
    expected = _threads(first, "grid") + (f" * {_threads(first, 'block')}" if per_thread else "")
    if not _same_count(count, expected, plan.get("tunables", {})):
        slots = "each thread's" if per_thread else "each block's"
        return Refusal(f"{_WHY}the second launch adds {count} partials; the first writes {slots}, "
                       f"{expected}", family=FULL_REDUCE)
    rewritten, args = _as_atomics(source, first, second, store, buffer, out)
    form = lift_one(rewritten, {**plan, "launches": [second, {**first, "args": args}]})
    if isinstance(form, Refusal):
        return Refusal(f"{_WHY}the first launch, its partials added into {out_arg}: {form.reason}",
                       family=FULL_REDUCE)
    if form.family != FULL_REDUCE:
        return Refusal(f"{_WHY}the first launch with atomics is a {form.family}", family=FULL_REDUCE)
    return replace(form, launch_args=tuple(args))


def _threads(launch: dict[str, Any], field: str) -> str:
    dims = [str(d).strip() for d in launch.get(field, [])]
    return dims[0] if dims else "1"


def _summed(source: str, launch: dict[str, Any], tunables: dict[str, Any],
            buffer: str) -> tuple[str, str] | str:
    """(the number of partials added, the output's parameter) of a second launch that
    only adds the partials into its output's first element, or why it does more."""
    if any(str(d).strip() != "1" for d in launch.get("grid", [])):
        return f"the second launch runs a grid of {launch.get('grid')}; one block adds the partials"
    found = _one_thread(block_constants_as_dims(source, launch), launch, tunables)
    if found is None:
        return "the second launch's threads do not add the partials as one thread or one block's reduction"
    kernel, statements = found
    names = [p.name for p in kernel.params]
    partials = names[launch["args"].index(buffer)]
    if len(statements) != 3:
        return f"the second launch does more than add the partials: {len(statements)} statements"
    start, loop, store = statements
    declared = _declaration(start)
    if declared is None or _compact(declared[2]) not in (*_ZEROS, f"{partials}[0]"):
        return f"the second launch's sum starts at `{text(start)}`, not 0"
    total, first = declared[0], "1" if _compact(declared[2]) == f"{partials}[0]" else "0"
    header = _compact(loop)[: _compact(loop).find(")") + 1]
    match = re.fullmatch(rf"for\((?:int|unsigned|unsignedint|size_t|long)?(\w+)={first};\1<([\w.]+);"
                         r"(?:\1\+\+|\+\+\1|\1\+=1|\1=\1\+1)\)", header)
    if match is None or loop.type != "for_statement":
        return f"the second launch's loop is not over the partials from {first} by one"
    problem = _adds(loop, total, f"{partials}[{match.group(1)}]")
    if problem:
        return problem
    out = next((p for p in names if _compact(store) in (f"{p}[0]={total};", f"*{p}={total};")), None)
    if out is None:
        return f"the second launch stores `{text(store)}`, not the partials' sum"
    if {kernel.params[names.index(p)].base_type for p in (out, partials)} != {"float"}:
        return "the partials or the output are not float; full reductions add floats"
    bound = match.group(2)
    count = launch["args"][names.index(bound)] if bound in names else strides.expand_macros(bound, source)
    return str(count), out


def _one_thread(source: str, launch: dict[str, Any], tunables: dict[str, Any]) -> tuple[Kernel, list] | None:
    """(the kernel, the statements one thread runs) of a launch whose work is one
    thread's: blocks of one thread, thread 0's under its test, or a block's strided loop
    and shared-memory reduction written as one thread's walk (block_reduce.py)."""
    kernel = _kernel(source, launch)
    statements = named_statements(kernel.body)
    if len(statements) == 1 and statements[0].type == "if_statement" and _first_thread(statements[0]):
        return kernel, _inner(statements[0])
    if all(str(d).strip() == "1" for d in launch.get("block", [])):
        return kernel, statements
    one = lone_thread(source, launch) or block_reduced(source, launch, tunables)
    if one is None:
        return None
    kernel = _kernel(*one)
    return kernel, named_statements(kernel.body)


def _adds(loop: Node, total: str, term: str) -> str | None:
    """Why the loop's body is not `total += term;` (or `total = total + term;`), or None."""
    inner = loop.child_by_field_name("body")
    step = named_statements(inner) if inner.type == "compound_statement" else [inner]
    found = _accumulation(step[0]) if len(step) == 1 else None
    if found is not None and found[1] != "sum":
        return f"the second launch combines the partials by {found[1]}; a full reduction sums them"
    if len(step) != 1 or _compact(step[0]) not in (f"{total}+={term};", f"{total}={total}+{term};",
                                                   f"{total}={term}+{total};"):
        return f"the second launch's loop does more than add {term}"
    return None


def _compact(node: Node) -> str:
    return re.sub(r"\s", "", text(node))


def _kernel(source: str, launch: dict[str, Any]) -> Kernel:
    return next(k for k in find_kernels(parse(source)) if k.name == launch["kernel"])


def _written(source: str, launch: dict[str, Any], buffer: str, out_arg: str) -> tuple[Node, bool] | str:
    """(the store of the first kernel's partial, whether a partial is a thread's rather
    than a block's), or why each slot may not be written exactly once."""
    if out_arg in launch.get("args", []):
        return f"the first launch is passed {out_arg} too"
    if any(str(d).strip() != "1" for field in ("grid", "block") for d in launch.get(field, [])[1:]):
        return "the first launch's grid or block has more than one dimension"
    kernel = _kernel(source, launch)
    partials = kernel.params[launch["args"].index(buffer)].name
    uses = [n for n in walk(kernel.body) if n.type == "identifier" and text(n) == partials]
    if any(n.type == "return_statement" for n in walk(kernel.body)):
        return "the first launch returns early: a partial's slot could stay unwritten"
    assignment = uses[0].parent.parent if len(uses) == 1 and uses[0].parent.type == "subscript_expression" \
        else None
    store = assignment.parent if assignment is not None else None
    if store is None or store.type != "expression_statement" or assignment.type != "assignment_expression" \
            or text(assignment.child_by_field_name("operator")) != "=" or \
            assignment.child_by_field_name("left") != uses[0].parent:
        return f"the first launch uses {partials} other than by one store `{partials}[slot] = value;`"
    statements = named_statements(kernel.body)
    aliases = _aliases(statements, kernel.body)
    tested = store not in statements
    test = store.parent if store.parent.type == "if_statement" else store.parent.parent
    if tested and not (test in statements and test.type == "if_statement" and _thread_zero(test, aliases)
                       and _inner(test) == [store]):
        return "the partial's store is inside a loop or under a test other than thread 0's"
    slot = _through(text(uses[0].parent.child_by_field_name("indices"))[1:-1], aliases)
    block = _threads(launch, "block")
    if is_builtin(slot, "blockIdx") and text(strip_parens(slot)).endswith(".x"):
        if not tested and block != "1":
            return "every thread of a block stores the block's partial: not one value per slot"
        return store, False
    if is_global_index(slot) and not tested:
        return store, True
    return f"the partial's slot {text(slot)} is not the block's (blockIdx.x) nor the thread's own"


def _inner(statement: Node) -> list[Node]:
    body = statement.child_by_field_name("consequence")
    return named_statements(body) if body.type == "compound_statement" else [body]


def _thread_zero(statement: Node, aliases: dict[str, str]) -> bool:
    if statement.child_by_field_name("alternative") is not None:
        return False
    condition = re.sub(r"\s", "", text(statement.child_by_field_name("condition")))
    names = {"threadIdx.x", *(a for a, v in aliases.items() if re.sub(r"\s", "", v) == "threadIdx.x")}
    return condition in {f"({n}==0)" for n in names} | {f"(0=={n})" for n in names}


def _aliases(statements: list[Node], body: Node) -> dict[str, str]:
    """Locals declared at the top of the kernel and never assigned again: name -> value."""
    assigned = {text(n.child_by_field_name("left" if n.type == "assignment_expression" else "argument"))
                for n in walk(body) if n.type in ("assignment_expression", "update_expression")}
    found = {}
    for statement in statements:
        declared = _declaration(statement)
        if declared is not None and declared[0] not in assigned:
            found[declared[0]] = text(declared[2])
    return found


def _through(index: str, aliases: dict[str, str]) -> Node:
    """The slot's expression with the kernel's unchanging locals read through (3 levels)."""
    for _ in range(3):
        index = re.sub(r"(?<![.\w])(\w+)\b(?!\s*\()", lambda m: f"({aliases[m.group(1)]})"
                       if m.group(1) in aliases else m.group(1), index)
    declaration = parse(f"long optiml_slot = {index};").root_node.named_children[0]
    return strip_parens(_declaration(declaration)[2])


def _same_count(count: str, expected: str, tunables: dict[str, Any]) -> bool:
    """Two plan expressions of the number of partials are the same: equal as text, or at
    every one of _SAMPLES random sizes (the tunables at the plan's values)."""
    if re.sub(r"\s", "", count) == re.sub(r"\s", "", expected):
        return True
    try:
        free = (expr.names_in(count) | expr.names_in(expected)) - set(tunables)
        pick = random.Random(0)
        for _ in range(_SAMPLES):
            names = {**{n: pick.randint(1, 1 << 20) for n in free}, **tunables}
            if expr.evaluate_int(count, names) != expr.evaluate_int(expected, names):
                return False
    except (expr.ExpressionError, ValueError, ZeroDivisionError):
        return False
    return True


def _as_atomics(source: str, first: dict[str, Any], second: dict[str, Any], store: Node, buffer: str,
                out: str) -> tuple[str, list[str]]:
    """The source with the partial's store an atomicAdd into the output (the parameter
    renamed to the output's where that name is free) and the second kernel zeroing its
    output; the first launch's arguments with the output for the buffer."""
    producer, combiner = _kernel(source, first), _kernel(source, second)
    partials = producer.params[first["args"].index(buffer)].name
    taken = {text(n) for n in walk(producer.definition) if n.type == "identifier"}
    name = out if out not in taken else partials
    value = text(store.named_children[0].child_by_field_name("right"))
    edits = [Edit(combiner.body.start_byte, combiner.body.end_byte, f"{{\n    {out}[0] = 0.0f;\n}}"),
             Edit(store.start_byte, store.end_byte, f"atomicAdd({name}, {value});")]
    declarator = next(n for n in walk(producer.definition) if n.type == "identifier" and text(n) == partials
                      and n.start_byte < producer.body.start_byte)
    edits.append(Edit(declarator.start_byte, declarator.end_byte, name))
    args = [str(a) for a in first["args"]]
    args[args.index(buffer)] = second["args"][[p.name for p in combiner.params].index(out)]
    return splice(source.encode(), sorted(edits, key=lambda e: e.start)), args
