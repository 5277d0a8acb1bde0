"""Blocks whose work only their thread 0 does, read as blocks of one thread.

A newcomer gives each row a block and lets its first thread do the row:

    int row = blockIdx.x;
    if (threadIdx.x == 0) { ...the row's work... }      (or `if (threadIdx.x != 0) return;`)

Every other thread of the block does nothing, so the kernel computes what the same
kernel without the test computes launched with blocks of one thread (`block: [1]`),
which the index space reads (`reading.single_threads`: `blockIdx.x` is then a plane).
`lone_thread` writes it so. It leaves the kernel alone (None) wherever that could change
what it computes: the thread index read anywhere but in the test, the block's size read
(`blockDim`), threads that meet (`__syncthreads`, `__shared__`, shuffles), a block of
more than one dimension, or work after a wrapping test.
"""

from __future__ import annotations

from typing import Any

from tree_sitter import Node

from ..rewrites.syntax import Edit, find_kernels, named_statements, parse, splice, strip_parens, text, walk
from .reading import _declaration, condition_of

# What lets the threads of a block meet or see their number: none may remain.
_SHARED = ("__syncthreads", "__shared__", "__shfl", "blockDim", "__syncwarp", "cooperative_groups")


def lone_thread(source: str, launch: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """(source, launch) with the thread-0 test taken away and blocks of one thread, or None."""
    block = [str(d).strip() for d in launch.get("block", [])]
    if not block or any(d != "1" for d in block[1:]) or block[0] == "1":
        return None
    tree = parse(source)
    kernel = next((k for k in find_kernels(tree) if k.name == launch.get("kernel")), None)
    if kernel is None:
        return None
    statements = named_statements(kernel.body)
    aliases: set[str] = set()  # `int tid = threadIdx.x;`, read by the test alone
    for position, statement in enumerate(statements):
        declared = _declaration(statement)
        if declared is not None and declared[2] is not None and \
                text(strip_parens(declared[2])).replace(" ", "") == "threadIdx.x":
            aliases.add(declared[0])
            continue
        kind = _thread_zero_test(statement, aliases)
        if kind is None:
            continue
        rest = statements[position + 1:]
        if kind == "wraps" and rest:
            return None  # work after the test would be done by every thread
        body = statement.child_by_field_name("consequence")
        kept = [s for s in statements if s.id != statement.id and not _is_alias(s, aliases)]
        if kind == "wraps":
            inner = named_statements(body) if body.type == "compound_statement" else [body]
            kept = [s for s in kept if s.start_byte < statement.start_byte] + inner
        if any(_reads_thread(s, aliases) or _threads_meet(s) for s in kept):
            return None
        source_bytes = source.encode()
        written = "\n".join(f"    {text(s)}" for s in kept)
        rewritten = splice(source_bytes, [Edit(kernel.body.start_byte, kernel.body.end_byte,
                                               "{\n" + written + "\n}")])
        return rewritten, {**launch, "block": ["1"] * len(block)}
    return None


def _thread_zero_test(statement: Node, aliases: set[str]) -> str | None:
    """'wraps' for `if (threadIdx.x == 0) {...}`, 'returns' for `if (threadIdx.x != 0)
    return;` (or `> 0`), None for anything else (an else branch included)."""
    if statement.type != "if_statement" or statement.child_by_field_name("alternative") is not None:
        return None
    condition = strip_parens(condition_of(statement))
    if condition is None or condition.type != "binary_expression":
        return None
    left, right = condition.child_by_field_name("left"), condition.child_by_field_name("right")
    compare = text(condition.child_by_field_name("operator"))
    names = {"threadIdx.x", *aliases}
    pair = (text(strip_parens(left)).replace(" ", ""), text(strip_parens(right)).replace(" ", ""))
    if pair[1] in names and pair[0] == "0":
        pair, compare = (pair[1], pair[0]), {"==": "==", "!=": "!=", "<": ">"}.get(compare, "")
    if pair[0] not in names or pair[1] != "0":
        return None
    if compare == "==":
        return "wraps"
    consequence = statement.child_by_field_name("consequence")
    inner = named_statements(consequence) if consequence.type == "compound_statement" else [consequence]
    if compare in ("!=", ">") and len(inner) == 1 and text(inner[0]).replace(" ", "") == "return;":
        return "returns"
    return None


def _is_alias(statement: Node, aliases: set[str]) -> bool:
    declared = _declaration(statement)
    return declared is not None and declared[0] in aliases


def _reads_thread(statement: Node, aliases: set[str]) -> bool:
    return any((n.type == "identifier" and text(n) in aliases) or
               (n.type == "field_expression" and text(n).replace(" ", "").startswith("threadIdx."))
               for n in walk(statement))


def _threads_meet(statement: Node) -> bool:
    return any(word in text(statement) for word in _SHARED)
