"""A block's reduction through shared memory, read as the reduction it computes.

The reduction every CUDA tutorial teaches: each thread puts its value in a shared array,
the block combines the array (a halving tree, or thread 0 in a loop), and thread 0 hands
the block's result on:

    __shared__ float buf[256];
    buf[tid] = (i < n) ? fabsf(x[i]) : 0.0f;      (or a thread's own strided partial)
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) { if (tid < s) buf[tid] += buf[tid + s]; __syncthreads(); }
    if (tid == 0) atomicAdd(out, buf[0]);         (or out[row] = f(buf[0]))

The combine only groups the same terms under the same associative operator, so the
kernel computes what a kernel without it computes, written without shared memory:

- *into an atomic* (`atomicAdd(out, buf[0])`): each thread adds its own value,
  `if (i < n) atomicAdd(out, fabsf(x[i]));` (a full reduction, `lift._full_reduction`);
- *into a row's element* (`int row = blockIdx.x;`, each thread's partial strided over
  the row by blockDim.x, `out[row] = f(buf[0])`): one thread walks the whole row,
  launched with blocks of one thread (a row map-reduce, `reading.single_threads`).

`block_reduced(source, launch)` writes the kernel so, or returns None wherever it cannot
show the two compute the same: another shared array, a combine that is not one of these
two shapes or not the values' operator (+, max or min), a halving tree over a block
that is not a power of two, an identity that is not the operator's, the thread index
or block size read anywhere else. Floating-point sums are regrouped, which the task's
tolerance allows of any reduction; the gate checks every kernel made from the form.
"""

from __future__ import annotations

import re
from typing import Any

from tree_sitter import Node

from ..rewrites.syntax import Edit, find_kernels, named_statements, parse, splice, strip_parens, text, walk
from . import strides
from .reading import _declaration

_IDENTITY = {"+": {"0", "0.0", "0.f", "0.0f", "0.0F", "0.F"},
             "max": {"-INFINITY", "-FLT_MAX", "-1e30f", "-1e38f", "-3.4e38f", "-HUGE_VALF", "-1.0e30f"},
             "min": {"INFINITY", "FLT_MAX", "1e30f", "1e38f", "3.4e38f", "HUGE_VALF", "1.0e30f"}}


def block_reduced(source: str, launch: dict[str, Any], tunables: dict[str, Any]) -> tuple[str, dict] | None:
    """(source, launch) with the block's shared-memory reduction written as what it
    computes, or None (the kernel as it is)."""
    kernel = next((k for k in find_kernels(parse(source)) if k.name == launch.get("kernel")), None)
    block = [str(d).strip() for d in launch.get("block", [])]
    if kernel is None or len(block) != 1:
        return None
    size = str(tunables.get(block[0], block[0]))
    threads = int(size) if size.isdigit() else None
    statements = named_statements(kernel.body)
    shared = [s for s in statements if "__shared__" in text(s)]
    if len(shared) != 1 or "__shared__" in text(kernel.body).replace(text(shared[0]), "", 1):
        return None
    array = _shared_array(shared[0])
    if array is None:
        return None
    aliases = {d[0] for s in statements
               if (d := _declaration(s)) is not None and _compact(d[2]) == "threadIdx.x"}
    tids = {"threadIdx.x", *aliases}
    store = next((k for k, s in enumerate(statements) if _stores_own(s, array, tids)), None)
    if store is None:
        return None
    skipped = {shared[0].id} | {s.id for s in statements if _alias(s, aliases)}
    halves = {"blockDim.x", *([size] if threads else []), *_named(source, size)}
    combine = _combine(statements[store + 1:], array, tids, threads, halves)
    if combine is not None and combine[2] == len(statements) - store - 1 and len(combine[1]) == 1 \
            and _compact(combine[1][0]).startswith("atomicAdd(") and combine[0] == "+":
        # into an atomic: every thread still runs, its own index (`int tid = threadIdx.x;`
        # kept) with it; the shared array and the barriers go
        before = [s for s in statements[:store] if s.id != shared[0].id]
        value = _stored_value(statements[store], array, tids)
        written = _into_atomic(before, value, combine[1][0], array, combine[0])
        new_launch, unread = launch, {array, "__syncthreads"}
    else:
        written = _walk_rows(statements, skipped, array, tids, threads, halves)
        new_launch, unread = {**launch, "block": ["1"]}, tids | {array, "blockDim", "__syncthreads"}
    if written is None or any(_reads(line, unread) for line in written):
        return None
    body = "{\n" + "\n".join(f"    {line}" for line in written) + "\n}"
    return splice(source.encode(), [Edit(kernel.body.start_byte, kernel.body.end_byte, body)]), new_launch


def _into_atomic(before: list[Node], value, result: Node, array: str, operator: str) -> list[str] | None:
    """Each thread adds its own value: `if (cond) atomicAdd(out, term);`."""
    target = _compact(result)[len("atomicAdd("):].split(",", 1)
    if len(target) != 2 or target[1] != f"{array}[0]);":
        return None
    lines = [text(s) for s in before]
    if isinstance(value, tuple):  # (test, term, identity)
        test, term, identity = value
        if identity not in _IDENTITY[operator]:
            return None
        return [*lines, f"if ({test}) atomicAdd({target[0]}, {term});"]
    return [*lines, f"atomicAdd({target[0]}, {value});"]


def _walk_rows(statements: list[Node], skipped: set[int], array: str, tids: set[str],
               threads: int | None, halves: set[str]) -> list[str] | None:
    """The kernel as one thread walking its row: each loop strided from the thread's
    index by blockDim.x from 0 by one; each reduction through the shared array (a
    thread's partial stored, combined, `array[0]` read) the partial itself; thread 0's
    work done by the one thread. None where a step is none of these."""
    lines: list[str] = []
    loops: dict[str, list[Node]] = {}  # a partial's name -> the strided loops that accumulate it
    starts: dict[str, str] = {}  # a local's name -> its initial value, as declared
    touched: set[str] = set()  # locals assigned outside the strided loops
    own = re.compile(rf"\b{re.escape(array)}\s*\[\s*0\s*\]")
    k = 0
    while k < len(statements):
        statement = statements[k]
        if statement.id in skipped or _compact(statement) == "__syncthreads();":
            k += 1
            continue
        walked = _from_zero(statement, tids)
        if walked is not None:
            lines.append(walked)
            for name in _assigned(statement):
                loops.setdefault(name, []).append(statement)
            k += 1
            continue
        value = _stored_value(statement, array, tids)
        if value is not None:
            combine = _combine(statements[k + 1:], array, tids, threads, halves)
            if combine is None or not isinstance(value, str) or value not in loops or value in touched \
                    or not all(_accumulates(loop, value, combine[0]) for loop in loops[value]):
                return None
            if combine[0] == "+" and starts.get(value) not in _IDENTITY["+"]:
                return None  # every thread's own start would be added once per thread
            lines += [own.sub(value, _source(s)) for s in combine[1]]
            k += 1 + combine[2]
            continue
        first = _thread_zero(statement, tids)
        for done in first if first is not None else [statement]:
            declared = _declaration(done)
            if declared is not None:
                starts[declared[0]] = _compact(declared[2])
            touched.update(_assigned(done))
            lines.append(text(done))
        k += 1
    return None if any(array in line for line in lines) else lines


def _from_zero(loop: Node, tids: set[str]) -> str | None:
    """`for (int c = tid; c < C; c += blockDim.x) body` as `for (int c = 0; c < C; c += 1) body`."""
    if loop.type != "for_statement":
        return None
    header = _compact(loop)[: _compact(loop).find(")") + 1]
    tid = "|".join(re.escape(t) for t in tids)
    match = re.fullmatch(rf"for\((int|long|unsignedint|size_t)?(\w+)=({tid});(\w+)<([^;]+);"
                         rf"(\w+)\+=blockDim\.x\)", header)
    if match is None or match.group(2) != match.group(4) or match.group(2) != match.group(6):
        return None
    counter, bound = match.group(2), match.group(5)
    kind = {"unsignedint": "unsigned int"}.get(match.group(1) or "", match.group(1) or "")
    declared = f"{kind} {counter} = 0" if kind else f"{counter} = 0"
    return f"for ({declared}; {counter} < {bound}; {counter} += 1) {text(loop.child_by_field_name('body'))}"


def _combine(rest: list[Node], array: str, tids: set[str], threads: int | None, halves: set[str]):
    """(operator, what reads the block's value with `array[0]` in it, statements used) of
    what follows a thread's store: `__syncthreads();`, then a halving tree (a `for`, or
    `int s = blockDim.x / 2; while (s != 0) {...; s /= 2;}`) and either `T name =
    array[0];` or `if (tid == 0) {...}`; or thread 0's loop over the array,
    `if (tid == 0) { r = array[0]; for (k = 1; k < blockDim.x; k++) r = r op array[k]; ... }`."""
    if len(rest) < 2 or _compact(rest[0]) != "__syncthreads();":
        return None
    counted = 2 if len(rest) >= 4 and rest[2].type == "while_statement" else 1  # its counter declared first
    if rest[counted].type in ("for_statement", "while_statement") and len(rest) >= counted + 2:
        operator = _tree(rest[1:counted + 1], array, tids, halves)
        after = rest[counted + 1]
        if operator is None or threads is None or threads & (threads - 1):
            return None  # a halving tree sums every element only over a power of two
        if counted == 2 and any(_reads(text(s), {_declaration(rest[1])[0]}) for s in rest[counted + 1:]):
            return None  # the counter read after the tree: the tree cannot go
        declared = _declaration(after)
        if declared is not None and _compact(declared[2]) == f"{array}[0]":
            return operator, [after], counted + 2
        results = _thread_zero(after, tids)
        return None if results is None else (operator, results, counted + 2)
    results = _thread_zero(rest[1], tids)
    if results is None or len(results) < 3:
        return None
    start, loop, *finals = results
    declared = _declaration(start)
    if declared is None or _compact(declared[2]) != f"{array}[0]" or loop.type != "for_statement":
        return None
    name = declared[0]
    header = _compact(loop)[: _compact(loop).find(")") + 1]
    match = re.fullmatch(r"for\((?:int)?(\w+)=1;(\w+)<(?:blockDim\.x|(\d+));"
                         r"(?:\w+\+\+|\+\+\w+|\w+\+=1)\)", header)
    if match is None or match.group(1) != match.group(2) or \
            (match.group(3) is not None and threads is not None and int(match.group(3)) != threads):
        return None
    step = _statements(loop.child_by_field_name("body"))
    operator = _op_of(step, name, f"{array}[{match.group(1)}]") if len(step) == 1 else None
    if operator is None:
        return None
    own = re.compile(rf"\b{re.escape(name)}\b")
    return operator, [_Text(own.sub(f"{array}[0]", text(s))) for s in finals], 2


def _halved(name: str) -> str:
    """`name` halved: `s >>= 1`, `s /= 2`, `s = s / 2`, `s = s >> 1` (compacted)."""
    return rf"{name}(?:>>=1|/=2|={name}/2|={name}>>1)"


def _tree(statements: list[Node], array: str, tids: set[str], halves: set[str]) -> str | None:
    """The operator of `for (s = blockDim.x / 2; s > 0; s >>= 1) { if (tid < s) buf[tid] op=
    buf[tid + s]; __syncthreads(); }` (the block's size also spelt as its number or a
    #define of it; or `s` declared just before a `while (s != 0)` whose body ends by
    halving it), or None."""
    block = "|".join(re.escape(h) for h in halves)
    loop, whole = statements[-1], _compact(statements[-1])
    header = whole[: whole.find(")") + 1]
    body = loop.child_by_field_name("body")
    inner = named_statements(body) if body.type == "compound_statement" else []
    if len(statements) == 2:  # int s = blockDim.x / 2; while (s != 0 | s > 0) {...; s /= 2;}
        start = re.fullmatch(rf"(?:unsigned)?(?:int)?(\w+)=(?:{block})(?:/2|>>1);", _compact(statements[0]))
        half = start.group(1) if start else ""
        if start is None or header not in (f"while({half}!=0)", f"while({half}>0)") or not inner or \
                re.fullmatch(rf"{_halved(half)};", _compact(inner[-1])) is None:
            return None
        inner = inner[:-1]
    else:
        halving = _halved(r"\1")
        match = re.fullmatch(rf"for\((?:unsigned)?(?:int)?(\w+)=(?:{block})(?:/2|>>1);\1>0;{halving}\)",
                             header)
        if match is None:
            return None
        half = match.group(1)
    if len(inner) != 2 or _compact(inner[1]) != "__syncthreads();" or inner[0].type != "if_statement":
        return None
    test = _compact(inner[0].child_by_field_name("condition"))
    tid = next((t for t in tids if test in (f"({t}<{half})", f"({half}>{t})")), None)
    if tid is None or inner[0].child_by_field_name("alternative") is not None:
        return None
    step = _statements(inner[0].child_by_field_name("consequence"))
    return _op_of(step, f"{array}[{tid}]", f"{array}[{tid}+{half}]") if len(step) == 1 else None


def _op_of(step: list[Node], into: str, other: str) -> str | None:
    """'+', 'max' or 'min' when the one statement combines `other` into `into`."""
    s = _compact(step[0])
    forms = {f"{into}+={other};": "+", f"{into}={into}+{other};": "+", f"{into}={other}+{into};": "+"}
    for name, op in (("fmaxf", "max"), ("max", "max"), ("fminf", "min"), ("min", "min")):
        forms[f"{into}={name}({into},{other});"] = op
        forms[f"{into}={name}({other},{into});"] = op
    return forms.get(s)


def _thread_zero(statement: Node, tids: set[str]) -> list | None:
    if statement.type != "if_statement" or statement.child_by_field_name("alternative") is not None:
        return None
    if _compact(statement.child_by_field_name("condition")) not in {f"({t}==0)" for t in tids}:
        return None
    return _statements(statement.child_by_field_name("consequence"))


def _stores_own(statement: Node, array: str, tids: set[str]) -> bool:
    return _stored_value(statement, array, tids) is not None


def _stored_value(statement: Node, array: str, tids: set[str]):
    """`buf[tid] = v;` -> 'v'; `buf[tid] = (c) ? e : id;` or `if (c) buf[tid] = e; else
    buf[tid] = id;` -> (c, e, id); else None."""
    if statement.type == "expression_statement":
        for tid in tids:
            prefix = f"{array}[{tid}]="
            compact = _compact(statement)
            if compact.startswith(prefix) and compact.endswith(";"):
                value = statement.named_children[0].child_by_field_name("right")
                if value is None:
                    return None
                while value.type == "parenthesized_expression":
                    value = value.named_children[0]
                if value.type == "conditional_expression":
                    parts = [value.child_by_field_name(f)
                             for f in ("condition", "consequence", "alternative")]
                    return (text(strip_parens(parts[0])), text(parts[1]), _compact(parts[2]))
                return text(value)
    if statement.type == "if_statement" and statement.child_by_field_name("alternative") is not None:
        then = _stored_value(_single(statement.child_by_field_name("consequence")), array, tids)
        other = _stored_value(_single(statement.child_by_field_name("alternative")), array, tids)
        if isinstance(then, str) and isinstance(other, str):
            test = statement.child_by_field_name("condition").child_by_field_name("value")
            return (text(strip_parens(test)), then, _compact_text(other))
    return None


def _statements(node: Node) -> list[Node]:
    return named_statements(node) if node.type == "compound_statement" else [node]


def _single(node: Node | None) -> Node:
    while node is not None and node.type in ("else_clause", "compound_statement") \
            and len(node.named_children) == 1:
        node = node.named_children[0]
    return node


def _accumulates(loop: Node, name: str, operator: str) -> bool:
    """Every assignment of `name` in the loop combines into it with `operator`."""
    for node in walk(loop):
        if node.type in ("assignment_expression", "update_expression") and \
                _compact(node).split("=", 1)[0].rstrip("+-*/") == name:
            s = _compact(node)
            ok = s.startswith(f"{name}+=") or s.startswith(f"{name}={name}+") if operator == "+" else \
                re.match(rf"{name}=(fmaxf|max|fminf|min)\(", s) and \
                ("max" in s.split("(", 1)[0]) == (operator == "max")
            if not ok:
                return False
    return True


def _assigned(statement: Node) -> set[str]:
    return {_compact(n.child_by_field_name("left")) for n in walk(statement)
            if n.type == "assignment_expression"}


def _alias(statement: Node, aliases: set[str]) -> bool:
    declared = _declaration(statement)
    return declared is not None and declared[0] in aliases


def _named(source: str, size: str) -> list[str]:
    """The #defines of the block's size (`#define TPB 256` for blocks of 256)."""
    return [m.group(1) for m in strides._DEFINE.finditer(source)
            if not m.group(2) and m.group(4).strip() == size and size.isdigit()]


def _shared_array(statement: Node) -> str | None:
    match = re.fullmatch(r"__shared__(?:float|double|int)(\w+)\[[^\]]+\];", _compact(statement))
    return match.group(1) if match else None


def _reads(line: str, names: set[str]) -> bool:
    return any(re.search(rf"\b{re.escape(n)}\b" if "." not in n else re.escape(n), line) for n in names)


class _Text:
    """A statement rewritten as text (thread 0's finals with the combined value in place)."""

    def __init__(self, value: str):
        self.value = value


def _source(node) -> str:
    return node.value if isinstance(node, _Text) else text(node) if node is not None else ""


def _compact(node) -> str:
    return _compact_text(_source(node))


def _compact_text(value: str) -> str:
    return re.sub(r"\s+", "", value)
