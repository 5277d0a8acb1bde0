"""How a row loop walks memory: the stride of each access per iteration.

`rows.block_per_row` pays off when one thread per row reads far-apart addresses (each
thread its own row) while the loop itself walks memory contiguously: a block striding
over the loop then reads neighbouring addresses together. When the loop jumps (a
convolution's channel loop steps by H*W), one thread per output already had its
neighbours reading neighbouring addresses, and a block per output reads scattered ones.

The stride of an access is measured, not derived: its index is evaluated as integer
arithmetic at two consecutive iterations, every other name standing for a distinct
large value (the same at both iterations). An index that is not plain arithmetic gives
no stride, and the loop is then not vouched for.
"""

from __future__ import annotations

import ast
import random
import re

from ..rewrites.syntax import parse, text, walk
from . import emit
from .types import Form, LoopHole, Uniform

_CASTS = re.compile(r"\(\s*(?:const\s+)?(?:unsigned\s+)?(?:long\s+long|long|int|size_t|int64_t)\s*\)")
_NAME = re.compile(r"[A-Za-z_]\w*")
_POINTER_LOCAL = re.compile(r"\*\s*(?:__restrict__\s+)?(\w+)\s*=\s*\w+\s*\+\s*([^;]+);")
_ALLOWED = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Name, ast.Load, ast.Add, ast.Sub,
            ast.Mult, ast.FloorDiv, ast.Mod, ast.USub, ast.UAdd)


def accesses(loop: LoopHole) -> list[tuple[str, str]]:
    """(pointer, index text) of every subscript in the loop's body."""
    tree = parse(f"void optiml_body() {{\n{loop.body}\n}}")
    found = []
    for node in walk(tree.root_node):
        if node.type == "subscript_expression":
            indices = node.child_by_field_name("indices")
            found.append((text(node.child_by_field_name("argument")), text(indices)[1:-1].strip()))
    return found


def stride(index: str, variable: str) -> int | None:
    """index(variable + 1) - index(variable), other names fixed; None if not arithmetic."""
    python = _CASTS.sub("", index).replace("/", "//")
    try:
        tree = ast.parse(python, mode="eval")
    except SyntaxError:
        return None
    if not all(isinstance(node, _ALLOWED) for node in ast.walk(tree)):
        return None
    names = sorted({n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - {variable})
    rng = random.Random(20261206)  # fixed: the answer must not change from run to run
    values = {name: rng.randrange(1_000, 1_000_000) for name in names}
    code = compile(tree, "<index>", "eval")
    try:
        at = [eval(code, {"__builtins__": {}}, {**values, variable: j}) for j in (7, 8)]  # noqa: S307
    except (ZeroDivisionError, TypeError):
        return None
    return at[1] - at[0]


def contiguity_problem(loop: LoopHole) -> str | None:
    """Why a block striding over this loop would not read contiguous memory, or None."""
    variable = loop.variables[-1].name  # the innermost: consecutive flattened iterations
    strides = []
    for pointer, index in accesses(loop):
        step = stride(index, variable)
        if step is None:
            return f"{pointer}[{index}]: an index whose stride in {variable} cannot be worked out"
        if step not in (0, 1, -1):
            return (f"{pointer}[{index}] steps by {step if abs(step) < 1000 else 'a size'} per iteration of "
                    f"{variable}: threads striding over the loop would read scattered addresses")
        strides.append(step)
    return None if any(strides) or not strides else f"no access walks along {variable}"


def neighbour_problem(form: Form) -> str | None:
    """Why neighbouring rows would not read neighbouring addresses in the row's loops (a
    reduction across columns reads x[i * D + col]: the next row is the next address), or
    None. Index locals declared before the loops (`int b = idx / D2;`) are read through."""
    row = form.space[-1].name  # the fastest axis: the next row is the next index point
    locals_: dict[str, str] = {}
    offsets: dict[str, str] = {}  # `const float* in = x + row * N;`: in[j] is x[row * N + j]
    for text_ in [form.prelude, *(s.text for s in form.steps if isinstance(s, Uniform))]:
        locals_.update(emit.uniform_locals(text_))
        offsets.update({m.group(1): m.group(2) for m in _POINTER_LOCAL.finditer(text_)})
    found = [(pointer, index) for loop in form.steps if isinstance(loop, LoopHole)
             for pointer, index in accesses(loop)]
    steps = []
    for pointer, index in found:
        offset = f"({offsets[pointer]}) + " if pointer in offsets else ""
        step = stride(_through(offset + f"({index})", locals_, row), row)
        if step is None:
            return f"{pointer}[{index}]: an index whose stride in {row} cannot be worked out"
        if step not in (0, 1, -1):
            size = step if abs(step) < 1000 else "a size"
            return (f"{pointer}[{index}] steps by {size} from one {row} to the next"
                    ": rows side by side do not read side by side")
        steps.append(step)
    return None if any(steps) else f"no access in the loops moves with {row}"


def _through(index: str, locals_: dict[str, str], keep: str) -> str:
    """The index with each local replaced by its definition (8 levels at most)."""
    for _ in range(8):
        replaced = _NAME.sub(lambda m: f"({locals_[m.group(0)]})" if m.group(0) in locals_ and
                             m.group(0) != keep else m.group(0), index)
        if replaced == index:
            break
        index = replaced
    return index
