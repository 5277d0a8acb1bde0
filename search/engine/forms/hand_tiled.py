"""A matrix product already tiled by hand in shared memory, read as the product it computes.

The tutorial's kernel: each thread of a T x T block loads one element of an A tile and
one of a B tile (zero outside the matrices), the block waits, each thread adds its
row of the A tile times its column of the B tile, the block waits again, for every
tile along K:

    for (int t = 0; t < (K + T - 1) / T; t++) {
        As[ty][tx] = (row < M && t * T + tx < K) ? A[row * K + t * T + tx] : 0.0f;
        Bs[ty][tx] = (t * T + ty < K && col < N) ? B[(t * T + ty) * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < T; k++) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N) C[row * N + col] = acc;

As[ty][k] is what thread (ty, k) stored: the load with threadIdx.x = k, so t * T + k;
Bs[k][tx] the load of thread (k, tx). With kk = t * T + k (or t + k where t steps by
T), the thread adds A's load at kk times B's at kk for every kk the tiles cover, in
increasing order; where kk >= K both loads are zero, and inside the output's test the
loads' other tests hold. So the thread computes what one thread per output computes,

    if (row < M && col < N) {
        float acc = 0.0f;
        for (kk = 0; kk < K; kk++) acc += A[row * K + kk] * B[kk * N + col];
        C[row * N + col] = acc;
    }

the same terms added in the same order. `hand_tiled(source, launch)` writes the kernel so
(contraction.py then reads it); it returns None for a kernel without two square shared
tiles, and a Refusal saying why where it cannot show the two compute the same: a block
that is not T x T, a slot other than the thread's own, a load without the zero fill at
K's edge, a tile loop that does not cover K, an inner loop not over the tile, a barrier
missing, an output written outside the test the loads' tests rely on.
"""

from __future__ import annotations

import re
from typing import Any

from tree_sitter import Node

from profiling.harness import expr

from ..rewrites.syntax import Edit, find_kernels, named_statements, parse, splice, strip_parens, text, walk
from . import strides
from .reading import _declaration, condition_of
from .types import CONTRACTION, Refusal

_INDEX = "optiml_k"  # the reduction index of the rewritten loop
_ZEROS = ("0", "0.0f", "0.f", "0.0", "0.0F")
_LARGEST_K = 4096  # the tile loop must cover every K from 1 to this (checked one by one)


def hand_tiled(source: str, launch: dict[str, Any]) -> str | Refusal | None:
    """The source with the launch's hand-tiled product written as one thread per output,
    a refusal, or None (no two shared tiles: not this construct)."""
    kernel = next((k for k in find_kernels(parse(source)) if k.name == launch.get("kernel")), None)
    if kernel is None:
        return None
    statements = named_statements(kernel.body)
    tiles = {name: size for s in statements if (found := _tile(s)) for name, size in [found]}
    if len(tiles) != 2 or text(kernel.body).count("__shared__") != 2:
        return None
    loops = [s for s in statements if s.type == "for_statement" and any(t in text(s) for t in tiles)]
    body = _statements(loops[0].child_by_field_name("body")) if len(loops) == 1 else []
    if not any(s.type == "for_statement" and not isinstance(_products(s, tiles, _aliases(statements)), str)
               for s in body):
        return None  # no `acc += As[ty][k] * Bs[k][tx]` over the tiles: not this construct
    if any(t in text(s) for s in statements if s is not loops[0] and not _tile(s) for t in tiles):
        return _no("the shared tiles are used outside one loop over the tiles")
    block = [str(d).strip() for d in launch.get("block", [])]
    sizes = {_number(size, source) for size in tiles.values()}
    if len(sizes) != 1 or None in sizes or block[:2] != [str(next(iter(sizes)))] * 2 or \
            block[2:] not in ([], ["1"]):
        return _no(f"tiles of {', '.join(tiles.values())} loaded by blocks of {' x '.join(block)}")
    size = next(iter(sizes))
    loop = loops[0]
    before = [s for s in statements[:statements.index(loop)] if not _tile(s)]
    after = statements[statements.index(loop) + 1:]
    if any(_declaration(s) is None for s in before):
        return _no("statements before the tile loop other than declarations")
    spelled = {"blockDim.x", "blockDim.y", *_spellings(size, source)}
    locals_ = {d[0]: text(d[2]) for s in before if (d := _declaration(s))}
    return _rewritten(source, kernel, loop, before, after, tiles, size, spelled, locals_)


def _aliases(statements: list[Node]) -> dict[str, set[str]]:
    """The thread's index per axis, as `threadIdx.x` and the locals declared as it."""
    found = {"x": {"threadIdx.x"}, "y": {"threadIdx.y"}}
    for statement in statements:
        declared = _declaration(statement)
        if declared is not None and _compact(declared[2]) in ("threadIdx.x", "threadIdx.y"):
            found[_compact(declared[2])[-1]].add(declared[0])
    return found


def _statements(body: Node) -> list[Node]:
    """A block's statements, `#pragma unroll` left out."""
    found = named_statements(body) if body.type == "compound_statement" else [body]
    return [s for s in found if not (s.type.startswith("preproc") and "pragma" in text(s))]


def _no(reason: str) -> Refusal:
    return Refusal(f"a product tiled by hand in shared memory: {reason}", family=CONTRACTION)


def _rewritten(source, kernel, loop, before, after, tiles, size, spelled, locals_) -> str | Refusal:
    counter, step = _tile_loop(loop, spelled)
    if counter is None:
        return _no("the tile loop does not count tiles from 0 (by one, or by the tile)")
    body = _statements(loop.child_by_field_name("body"))
    shape = [s.type if _compact(s) != "__syncthreads();" else "sync" for s in body]
    declared = [s for s in body if _declaration(s) is not None and not any(t in text(s) for t in tiles)]
    rest = [s for s in body if s not in declared]
    if [t if t == "sync" else "" for t in shape[len(declared):]] != ["", "", "sync", "", "sync"] \
            or body[:len(declared)] != declared:
        return _no("the tile loop is not: locals, two tile loads, a barrier, the products, a barrier")
    tids = _aliases(before)
    loads = {}
    for store in rest[:2]:
        found = _own_store(store, tiles, tids)
        if found is None:
            return _no(f"`{text(store)}` does not load the thread's own slot [threadIdx.y][threadIdx.x]")
        loads[found[0]] = found[1]
    product = _products(rest[3], tiles, tids, spelled)
    if isinstance(product, str) or set(loads) != set(tiles):
        return _no(product if isinstance(product, str) else "the two loads do not fill both tiles")
    accumulator, by_row, by_column = product
    inner_locals = {d[0]: text(d[2]) for s in declared if (d := _declaration(s))}
    if any(re.search(rf"\b{re.escape(name)}\b", value) for value in (*loads.values(), *inner_locals.values())
           for name in (*tiles, accumulator)):
        return _no("a tile load reads a tile or the accumulator")
    everything = {**locals_, **inner_locals}
    assigned = {n for n in _assigned(kernel.body)} - {counter, accumulator}
    if assigned & set(everything) or accumulator not in locals_:
        return _no("a local the loads read is changed, or the accumulator is not declared before the loop")
    factors = []
    for tile, axis in ((by_row, "x"), (by_column, "y")):
        through = {**{n: v for n, v in locals_.items() if _reads(v, tids[axis], locals_)}, **inner_locals}
        value = _at_k(loads[tile], through, tids[axis], counter, spelled, step)
        if isinstance(value, str):
            return _no(value)
        factors.append(value)
    return _assembled(source, kernel, before, after, factors, counter, loop, size, step, accumulator)


def _assembled(source, kernel, before, after, factors, counter, loop, size, step,
               accumulator) -> str | Refusal:
    (row_value, row_tests, row_k), (column_value, column_tests, column_k) = factors
    if row_k != column_k:
        return _no(f"the loads are zero past {row_k} and past {column_k}: not one K")
    covered = _covers(loop, counter, row_k, size, step, source)
    if covered is not None:
        return _no(covered)
    if len(after) != 1 or after[0].type != "if_statement" or after[0].child_by_field_name("alternative"):
        return _no("the output is not written under one test after the tile loop")
    output_tests = _conjuncts(strip_parens(condition_of(after[0])))
    missing = [t for t in (*row_tests, *column_tests) if t not in output_tests]
    if missing:
        return _no(f"a load tests {missing[0]}, which the output's test does not")
    kept = _read_by(after[0].child_by_field_name("condition"), before)
    moved = [s for s in before if s not in kept]
    consequence = after[0].child_by_field_name("consequence")
    work = named_statements(consequence) if consequence.type == "compound_statement" else [consequence]
    lines = [*(text(s) for s in kept), f"if ({text(strip_parens(condition_of(after[0])))}) {{",
             *(f"    {text(s)}" for s in moved),
             f"    for (int {_INDEX} = 0; {_INDEX} < {row_k}; {_INDEX} += 1) "
             f"{accumulator} += ({row_value}) * ({column_value});",
             *(f"    {text(s)}" for s in work), "}"]
    body = "{\n" + "\n".join(f"    {line}" for line in lines) + "\n}"
    return splice(source.encode(), [Edit(kernel.body.start_byte, kernel.body.end_byte, body)])


def _tile(statement: Node) -> tuple[str, str] | None:
    match = re.fullmatch(r"__shared__(?:float)(\w+)\[(\w+)\]\[(\w+)\];", _compact(statement))
    return (match.group(1), match.group(2)) if match and match.group(2) == match.group(3) else None


def _spellings(size: int, source: str) -> list[str]:
    """The tile's size as a number and as the #defines of it."""
    return [str(size), *(m.group(1) for m in strides._DEFINE.finditer(source)
                         if not m.group(2) and _number(m.group(1), source) == size)]


def _number(name: str, source: str) -> int | None:
    value = strides.expand_macros(name, source).strip("() ")
    return int(value) if value.isdigit() else None


def _tile_loop(loop: Node, spelled: set[str]) -> tuple[str | None, str]:
    """(counter, 'one' or 'tile') of `for (int t = 0; t < ...; t++)` or `t += T`."""
    header = _header(loop)
    match = re.fullmatch(r"for\(int(\w+)=0;[^;]+;(\w+)(\+\+|\+=1|\+=(\w+(?:\.\w)?))\)|"
                         r"for\(int(\w+)=0;[^;]+;\+\+(\w+)\)", header)
    if match is None:
        return None, ""
    counter, again = (match.group(1), match.group(2)) if match.group(1) else (match.group(5), match.group(6))
    if counter != again or (match.group(4) and match.group(4) not in spelled):
        return None, ""
    return counter, "tile" if match.group(4) else "one"


def _own_store(store: Node, tiles: dict[str, str], tids: dict[str, set[str]]) -> tuple[str, str] | None:
    """(tile, the value stored) of `Tile[ty][tx] = value;` (or an if/else storing there)."""
    if store.type == "if_statement" and store.child_by_field_name("alternative") is not None:
        then = _own_store(_single(store.child_by_field_name("consequence")), tiles, tids)
        other = _own_store(_single(store.child_by_field_name("alternative")), tiles, tids)
        if then is None or other is None or then[0] != other[0]:
            return None
        return then[0], f"({text(strip_parens(condition_of(store)))}) ? ({then[1]}) : ({other[1]})"
    expression = store.named_children[0] if store.type == "expression_statement" else None
    if expression is None or expression.type != "assignment_expression" or \
            text(expression.child_by_field_name("operator")) != "=":
        return None
    target = _compact(expression.child_by_field_name("left"))
    for tile in tiles:
        if any(target == f"{tile}[{y}][{x}]" for y in tids["y"] for x in tids["x"]):
            return tile, text(expression.child_by_field_name("right"))
    return None


def _single(node: Node) -> Node:
    while node.type in ("else_clause", "compound_statement") and len(node.named_children) == 1:
        node = node.named_children[0]
    return node


def _products(inner: Node, tiles, tids, spelled: set[str] | None = None):
    """(accumulator, the tile read along its row [ty][k], the tile read down [k][tx]) of
    `for (int k = 0; k < T; k++) acc += Rt[ty][k] * Ct[k][tx];`, or why not."""
    header = _header(inner) if inner.type == "for_statement" else ""
    match = re.fullmatch(r"for\(int(\w+)=0;(\w+)<([\w.]+);(?:(\w+)\+\+|\+\+(\w+)|(\w+)\+=1)\)", header)
    k = match.group(1) if match else ""
    if match is None or {k, match.group(2), match.group(4) or match.group(5) or match.group(6)} != {k} \
            or (spelled is not None and match.group(3) not in spelled):
        return "the products are not one loop over the tile from 0 by one"
    step = _statements(inner.child_by_field_name("body"))
    compact = _compact(step[0]) if len(step) == 1 else ""
    for a in tiles:
        for b in tiles:
            for y in tids["y"]:
                for x in tids["x"]:
                    first, second = f"{a}[{y}][{k}]", f"{b}[{k}][{x}]"
                    for term in (f"{first}*{second}", f"{second}*{first}"):
                        found = re.fullmatch(rf"(\w+)(?:\+=|=\1\+){re.escape(term)};", compact)
                        if found and a != b:
                            return found.group(1), a, b
    return "the products are not `acc += As[ty][k] * Bs[k][tx];`"


def _at_k(value: str, through: dict[str, str], tids: set[str], counter: str, spelled: set[str],
          step: str) -> tuple[str, list[str], str] | str:
    """(the load at the reduction index, its tests other than the index's, K) of the
    value a thread stored: thread k's, with `through` read through (the tile loop's locals
    and those before it that read the thread's index along the tile's row or column)."""
    for _ in range(4):
        value = re.sub(r"(?<![.\w])(\w+)\b(?!\s*\()",
                       lambda m: f"({through[m.group(1)]})" if m.group(1) in through else m.group(1), value)
    value = re.sub(r"threadIdx\.[xy]|(?<![.\w])(\w+)\b", lambda m: "optiml_thread" if m.group(0) in tids
                   else m.group(0), value)
    value = re.sub(r"\s*([^\w\s])\s*", r"\1", value.strip())  # spaces only between words (`long long`)
    value = value.replace("(optiml_thread)", "optiml_thread")
    tile = "|".join(re.escape(s) for s in spelled)
    starts = [rf"{counter}\*(?:{tile})", rf"(?:{tile})\*{counter}"] if step == "one" else [counter]
    sums = [f"{a}\\+{b}" for start in starts for a, b in ((start, "optiml_thread"), ("optiml_thread", start))]
    # the position along K: `(t*T+k)` anywhere, `t*T+k` where nothing binds tighter on either side
    merged = "|".join([*(rf"\({s}\)" for s in sums), *(rf"(?<![-*/%!~\w.]){s}(?![*/%\w\[(.])" for s in sums)])
    value = re.sub(merged, _INDEX, value)
    if re.search(rf"\b(?:{counter}|optiml_thread)\b", value):
        return f"a load reads the tile's index other than as the position along K: {value.strip()}"
    parsed = strip_parens(_declaration(parse(f"float optiml_v = {value};").root_node.named_children[0])[2])
    if parsed.type != "conditional_expression" or \
            _compact(parsed.child_by_field_name("alternative")).strip("()") not in _ZEROS:
        return "a tile load reads past K without a zero fill"
    tests = _conjuncts(strip_parens(parsed.child_by_field_name("condition")))
    bounds = [t for t in tests if re.fullmatch(rf"{_INDEX}<(\w+)", t)]
    if len(bounds) != 1:
        return "a tile load reads past K without a zero fill"
    return text(parsed.child_by_field_name("consequence")), [t for t in tests if t not in bounds], bounds[0][
        len(_INDEX) + 1:]


def _covers(loop: Node, counter: str, k: str, size: int, step: str, source: str) -> str | None:
    """Why the tile loop may stop before K, or None: `t < K` by the tile, or `t < n` by
    one where n tiles of the size cover every K (checked from 1 to _LARGEST_K)."""
    condition = _compact(condition_of(loop))
    if step == "tile":
        return None if condition == f"{counter}<{k}" else f"the tile loop runs while {condition}, not to {k}"
    tile = "|".join(re.escape(s) for s in _spellings(size, source))
    if re.fullmatch(rf"(?:{counter}\*(?:{tile})|(?:{tile})\*{counter})<{re.escape(k)}", condition):
        return None  # while t * T < K: every K
    bound = condition.removeprefix(f"{counter}<") if condition.startswith(f"{counter}<") else None
    if bound is None:
        return f"the tile loop runs while {condition}"
    formula = strides.expand_macros(bound, source).replace("/", "//")
    try:
        if expr.names_in(formula) != {k}:
            return f"the tile loop's count {bound} is not a formula of {k} alone"
        if any(expr.evaluate_int(formula, {k: n}) * size < n for n in range(1, _LARGEST_K + 1)):
            return f"the tile loop covers {bound} tiles of {size}, fewer than {k} for some {k}"
    except (expr.ExpressionError, ValueError, ZeroDivisionError):
        return f"the tile loop's count {bound} is not a formula of {k} alone"
    return None


def _conjuncts(condition: Node) -> list[str]:
    if condition.type == "binary_expression" and text(condition.child_by_field_name("operator")) == "&&":
        return [*_conjuncts(strip_parens(condition.child_by_field_name("left"))),
                *_conjuncts(strip_parens(condition.child_by_field_name("right")))]
    return [_compact(condition)]


def _read_by(condition: Node, before: list[Node]) -> list[Node]:
    """The declarations the condition reads, and those they read (kept before the test)."""
    names = {text(n) for n in walk(condition) if n.type == "identifier"}
    kept: list[Node] = []
    for statement in reversed(before):
        declared = _declaration(statement)
        if declared[0] in names:
            kept.insert(0, statement)
            names |= {text(n) for n in walk(declared[2]) if n.type == "identifier"}
    return kept


def _reads(value: str, tids: set[str], locals_: dict[str, str], depth: int = 4) -> bool:
    names = set(re.findall(r"threadIdx\.[xy]|(?<![.\w])\w+", value))
    return bool(names & tids) or depth > 0 and any(
        _reads(locals_[n], tids, locals_, depth - 1) for n in names if n in locals_)


def _assigned(body: Node) -> set[str]:
    return {_compact(n.child_by_field_name("left") or n.named_children[0])
            for n in walk(body) if n.type in ("assignment_expression", "update_expression")}


def _header(loop: Node) -> str:
    """`for(init;test;step)`, compacted."""
    return _compact_text(loop.text[: loop.child_by_field_name("body").start_byte - loop.start_byte].decode())


def _compact(node: Node) -> str:
    return _compact_text(text(node))


def _compact_text(value: str) -> str:
    return re.sub(r"\s+", "", value)
