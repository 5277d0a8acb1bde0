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


def _arithmetic(index: str):
    """(the names it reads, its compiled code) when `index` is plain integer arithmetic
    (casts dropped, `/` as floor division), else None."""
    try:
        tree = ast.parse(_CASTS.sub("", index).replace("/", "//"), mode="eval")
    except SyntaxError:
        return None
    if not all(isinstance(node, _ALLOWED) for node in ast.walk(tree)):
        return None
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}, compile(tree, "<index>", "eval")


def _at(code, values: dict[str, int]) -> int | None:
    try:
        return eval(code, {"__builtins__": {}}, values)  # noqa: S307
    except (ZeroDivisionError, TypeError):
        return None


def stride(index: str, variable: str, fixed: dict[str, int] | None = None) -> int | None:
    """index(variable + 1) - index(variable), other names fixed (those in `fixed` at their
    values: parameters every launch passes as a number); None if not arithmetic."""
    found = _arithmetic(index)
    if found is None:
        return None
    names, code = sorted(found[0] - {variable}), found[1]
    rng = random.Random(20261206)  # fixed: the answer must not change from run to run
    values = {name: rng.randrange(1_000, 1_000_000) for name in names}
    values.update({name: value for name, value in (fixed or {}).items() if name in values})
    at = [_at(code, {**values, variable: j}) for j in (7, 8)]
    return None if None in at else at[1] - at[0]


def same_index(a: str, b: str) -> bool:
    """Whether two index expressions are the same integer function of their names (each
    evaluated at three points, every name a distinct large value); False if either is not
    plain arithmetic."""
    found = [_arithmetic(a), _arithmetic(b)]
    if None in found:
        return False
    names = sorted(found[0][0] | found[1][0])
    rng = random.Random(20261207)
    for _ in range(3):
        values = {name: rng.randrange(1_000, 1_000_000) for name in names}
        left, right = (_at(code, values) for _, code in found)
        if left is None or right is None or left != right:
            return False
    return True


def contiguity_problem(loop: LoopHole, helpers: str = "", fixed: dict[str, int] | None = None) -> str | None:
    """Why a block striding over this loop would not read contiguous memory, or None
    (`helpers`: the kernel's #defines, expanded in the indices first; `fixed`: parameters
    the plan passes as numbers, `literal_arguments`)."""
    variable = loop.variables[-1].name  # the innermost: consecutive flattened iterations
    strides = []
    locals_ = emit.uniform_locals(loop.body)  # `int idx = r * cols + c;`: read through
    for pointer, index in accesses(loop):
        step = stride(expand_macros(through(index, locals_, keep=""), helpers), variable, fixed)
        if step is None:
            return f"{pointer}[{index}]: an index whose stride in {variable} cannot be worked out"
        if step not in (0, 1, -1):
            return (f"{pointer}[{index}] steps by {step if abs(step) < 1000 else 'a size'} per iteration of "
                    f"{variable}: threads striding over the loop would read scattered addresses")
        strides.append(step)
    return None if any(strides) or not strides else f"no access walks along {variable}"


def literal_arguments(form: Form, args: list[str]) -> dict[str, int]:
    """The integer parameters the launch passes as a number (a generic kernel's stride of 1,
    `x[j * INNER]` launched with INNER = 1): the skeletons keep the launch's arguments, so
    the number holds wherever the kernel runs."""
    return literal_arguments_of(form.params, args)


def literal_arguments_of(params, args: list[str]) -> dict[str, int]:
    found = {}
    for name, arg in zip(params, args, strict=False):
        literal = str(arg).strip().removeprefix("i64:").strip()
        while literal.startswith("(") and literal.endswith(")"):
            literal = literal[1:-1].strip()
        if re.fullmatch(r"-?\d+", literal):
            found[name] = int(literal)
    return found


def neighbour_problem(form: Form, fixed: dict[str, int] | None = None) -> str | None:
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
        step = stride(through(expand_macros(offset + f"({index})", form.helpers), locals_, row), row, fixed)
        if step is None:
            return f"{pointer}[{index}]: an index whose stride in {row} cannot be worked out"
        if step not in (0, 1, -1):
            size = step if abs(step) < 1000 else "a size"
            return (f"{pointer}[{index}] steps by {size} from one {row} to the next"
                    ": rows side by side do not read side by side")
        steps.append(step)
    return None if any(steps) else f"no access in the loops moves with {row}"


def through(index: str, locals_: dict[str, str], keep: str) -> str:
    """The index with each local replaced by its definition (8 levels at most)."""
    for _ in range(8):
        replaced = _NAME.sub(lambda m: f"({locals_[m.group(0)]})" if m.group(0) in locals_ and
                             m.group(0) != keep else m.group(0), index)
        if replaced == index:
            break
        index = replaced
    return index


_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)(\(([^)]*)\))?[ \t]*(.*?)[ \t]*$", re.MULTILINE)


def expand_macros(index: str, helpers: str) -> str:
    """The index with the kernel's one-line #defines expanded (`IDX(r, c, n)` with
    `#define IDX(r, c, n) ((r) * (n) + (c))`; `N` with `#define N 1024`), 8 levels at most."""
    macros = {m.group(1): ([p.strip() for p in m.group(3).split(",")] if m.group(2) else None, m.group(4))
              for m in _DEFINE.finditer(helpers)}
    for _ in range(8):
        expanded = _expand_once(index, macros)
        if expanded == index:
            break
        index = expanded
    return index


def _expand_once(index: str, macros: dict, bare: frozenset[str] = frozenset()) -> str:
    """One round of expansion; the bodies of the macros named in `bare` are put in as
    they are (an accessor's `A[(i) * K + (j)]`, which stays an lvalue), the others in
    parentheses."""
    out, position = [], 0
    for match in _NAME.finditer(index):
        name = match.group(0)
        if match.start() < position or name not in macros:
            continue
        params, body = macros[name]
        if params is None:
            out += [index[position:match.start()], f"({body})"]
            position = match.end()
            continue
        rest = index[match.end():]
        if not rest.lstrip().startswith("("):
            continue
        opening = match.end() + len(rest) - len(rest.lstrip())
        arguments, end = _arguments(index, opening)
        if arguments is None or len(arguments) != len(params):
            continue
        for param, argument in zip(params, arguments, strict=True):
            body = re.sub(rf"\b{re.escape(param)}\b", f"({argument})", body)
        out += [index[position:match.start()], body if name in bare else f"({body})"]
        position = end
    return "".join(out) + index[position:]


def _arguments(text_: str, opening: int) -> tuple[list[str] | None, int]:
    """The comma-separated arguments of the parenthesis at `opening`, and the index after it."""
    depth, start, found = 0, opening + 1, []
    for position in range(opening, len(text_)):
        char = text_[position]
        if char in "([":
            depth += 1
        elif char in ")]":
            depth -= 1
            if depth == 0:
                found.append(text_[start:position])
                return [a.strip() for a in found], position + 1
        elif char == "," and depth == 1:
            found.append(text_[start:position])
            start = position + 1
    return None, len(text_)
