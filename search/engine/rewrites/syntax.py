"""The CUDA syntax tree, read through tree-sitter: kernels, parameters, and text splices.

Every rewrite edits the source by byte ranges of parsed nodes (never by regexes over the
whole file), so a comment or a string that merely looks like code is never touched.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import tree_sitter_cuda
from tree_sitter import Language, Node, Parser, Tree

_LANGUAGE = Language(tree_sitter_cuda.language())

# Names the CUDA runtime gives every thread: where it is and how big the launch is.
THREAD_BUILTINS = frozenset({"threadIdx", "blockIdx", "blockDim", "gridDim"})
# Integer types of at least 64 bits (LP64: `long` is 64-bit for nvcc on Linux).
WIDE_INTEGER_TYPES = frozenset({
    "long long", "long long int", "long", "long int", "int64_t", "ptrdiff_t",
    "unsigned long long", "unsigned long long int", "size_t", "uint64_t",
})
INTEGER_TYPES = WIDE_INTEGER_TYPES | {"int", "unsigned", "unsigned int", "int32_t", "uint32_t"}


class RewriteError(ValueError):
    """A rewrite could not be carried out as planned (overlapping edits, say)."""


def parse(source: str | bytes) -> Tree:
    return Parser(_LANGUAGE).parse(source.encode() if isinstance(source, str) else source)


def text(node: Node) -> str:
    return (node.text or b"").decode()


def walk(node: Node) -> Iterator[Node]:
    """The node and all its descendants, in source order."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.children))


def named_statements(block: Node) -> list[Node]:
    """The statements of a compound statement, without its comments."""
    return [child for child in block.named_children if child.type != "comment"]


def identifiers(node: Node) -> Iterator[Node]:
    return (n for n in walk(node) if n.type == "identifier")


def strip(node: Node) -> Node:
    """The expression under any parentheses and casts: `(long long)blockIdx.x` -> blockIdx.x."""
    while node.type in ("parenthesized_expression", "cast_expression"):
        cast = node.type == "cast_expression"
        inner = node.child_by_field_name("value") if cast else node.named_children[0]
        if inner is None:
            break
        node = inner
    return node


def strip_parens(node: Node) -> Node:
    while node.type == "parenthesized_expression" and node.named_children:
        node = node.named_children[0]
    return node


def operator(node: Node) -> str:
    op = node.child_by_field_name("operator")
    return op.type if op is not None else ""


def operands(node: Node) -> tuple[Node, Node]:
    left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
    if left is None or right is None:
        raise RewriteError(f"binary expression without two operands: {text(node)!r}")
    return left, right


def is_builtin(node: Node, base: str, field: str = "x") -> bool:
    """`node` is `base.field`, e.g. threadIdx.x."""
    node = strip(node)
    if node.type != "field_expression" or operator(node) != ".":
        return False
    argument, name = node.child_by_field_name("argument"), node.child_by_field_name("field")
    return argument is not None and name is not None and text(argument) == base and text(name) == field


def is_product_of(node: Node, first: str, second: str) -> bool:
    """`node` is first.x * second.x in either order, under any casts."""
    node = strip(node)
    if node.type != "binary_expression" or operator(node) != "*":
        return False
    left, right = operands(node)
    return (is_builtin(left, first) and is_builtin(right, second)) or (
        is_builtin(left, second) and is_builtin(right, first))


def is_global_index(node: Node) -> bool:
    """`blockIdx.x * blockDim.x + threadIdx.x`, the one-thread-per-element index."""
    node = strip(node)
    if node.type != "binary_expression" or operator(node) != "+":
        return False
    left, right = operands(node)
    return (is_product_of(left, "blockIdx", "blockDim") and is_builtin(right, "threadIdx")) or (
        is_builtin(left, "threadIdx") and is_product_of(right, "blockIdx", "blockDim"))


_INTEGER = re.compile(r"(0[xX][0-9a-fA-F]+|\d+)[uUlL]*")


def integer_literal(node: Node) -> int | None:
    node = strip_parens(node)
    if node.type != "number_literal":
        return None
    match = _INTEGER.fullmatch(text(node))
    return int(match.group(1), 0) if match else None


@dataclass(frozen=True)
class Param:
    name: str
    position: int
    declaration: Node  # parameter_declaration
    base_type: str  # "float" for `const float* __restrict__ x`
    pointer: Node | None  # the pointer_declarator, for a single-level pointer
    const: bool
    restrict: bool
    volatile: bool = False


@dataclass(frozen=True)
class Kernel:
    """An `extern "C" __global__` function: the ones a launch plan can name."""

    name: str
    definition: Node  # function_definition
    declarator: Node  # function_declarator
    body: Node  # compound_statement
    params: tuple[Param, ...]

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)

    def pointer_params(self) -> list[Param]:
        return [p for p in self.params if p.pointer is not None]


# find_kernels of the last few trees: every rewrite of a node asks it of the same parsed
# tree, and each answer walks the whole tree. The tree is kept with its answer, so that
# its id cannot be reused while it is remembered.
_KERNELS: dict[int, tuple[Tree, list[Kernel]]] = {}
_KERNELS_KEPT = 4


def find_kernels(tree: Tree) -> list[Kernel]:
    """The extern "C" kernels defined in the tree (a fresh list; its kernels are shared)."""
    kept = _KERNELS.get(id(tree))
    if kept is not None and kept[0] is tree:
        return list(kept[1])
    kernels = _find_kernels(tree)
    if len(_KERNELS) >= _KERNELS_KEPT:
        _KERNELS.pop(next(iter(_KERNELS)))
    _KERNELS[id(tree)] = (tree, kernels)
    return list(kernels)


def _find_kernels(tree: Tree) -> list[Kernel]:
    kernels = []
    for linkage in (n for n in walk(tree.root_node) if n.type == "linkage_specification"):
        value = linkage.child_by_field_name("value")
        body = linkage.child_by_field_name("body")
        if value is None or body is None or text(value) != '"C"':
            continue
        definitions = [body] if body.type == "function_definition" else body.named_children
        for definition in definitions:
            kernel = _kernel(definition)
            if kernel is not None:
                kernels.append(kernel)
    return kernels


def prototyped(tree: Tree, name: str) -> bool:
    """A separate declaration of the function exists; its signature must keep matching."""
    for declaration in (n for n in walk(tree.root_node) if n.type == "declaration"):
        for declarator in declaration.children_by_field_name("declarator"):
            if declarator.type == "function_declarator" and declared_name(declarator) == name:
                return True
    return False


def _kernel(definition: Node) -> Kernel | None:
    if definition.type != "function_definition":
        return None
    if not any(child.type == "__global__" for child in definition.children):
        return None
    declarator = definition.child_by_field_name("declarator")
    body = definition.child_by_field_name("body")
    if declarator is None or body is None or declarator.type != "function_declarator":
        return None
    name = declarator.child_by_field_name("declarator")
    parameters = declarator.child_by_field_name("parameters")
    if name is None or parameters is None:
        return None
    params = tuple(
        _param(position, node)
        for position, node in enumerate(
            p for p in parameters.named_children if p.type == "parameter_declaration")
    )
    return Kernel(name=text(name), definition=definition, declarator=declarator, body=body, params=params)


def _param(position: int, declaration: Node) -> Param:
    qualifiers = {text(c) for c in declaration.named_children if c.type == "type_qualifier"}
    base = declaration.child_by_field_name("type")
    declarator = declaration.child_by_field_name("declarator")
    pointer, restrict = None, False
    if declarator is not None and declarator.type == "pointer_declarator":
        inner = declarator.child_by_field_name("declarator")
        if inner is not None and inner.type == "identifier":  # one level of pointer only
            pointer = declarator
            restrict = any(text(c) in ("__restrict__", "restrict")
                           for c in declarator.named_children if c.type == "type_qualifier")
    return Param(
        name=declared_name(declarator) if declarator is not None else "",
        position=position, declaration=declaration, base_type=text(base) if base else "",
        pointer=pointer, const="const" in qualifiers, restrict=restrict, volatile="volatile" in qualifiers,
    )


def defined_functions(root: Node) -> set[str]:
    """Names of the functions this file defines (at the top level or inside extern "C")."""
    names = set()
    for node in root.named_children:
        inner = node.child_by_field_name("body") if node.type == "linkage_specification" else None
        candidates = [node] if inner is None else ([inner] if inner.type == "function_definition"
                                                   else list(inner.named_children))
        for definition in (c for c in candidates if c.type == "function_definition"):
            declarator = definition.child_by_field_name("declarator")
            if declarator is not None:
                names.add(declared_name(declarator))
    return names


def declared_name(declarator: Node) -> str:
    """The identifier a (possibly nested) declarator introduces."""
    node: Node | None = declarator
    while node is not None and node.type != "identifier":
        inner = node.child_by_field_name("declarator")
        node = inner if inner is not None else (node.named_children[-1] if node.named_children else None)
    return text(node) if node is not None else ""


def declared_names(node: Node) -> set[str]:
    """Every name declared anywhere inside `node` (locals, loop variables)."""
    names = set()
    for declaration in (n for n in walk(node) if n.type == "declaration"):
        for declarator in declaration.children_by_field_name("declarator"):
            names.add(declared_name(declarator))
    return names


def assigned_identifier(node: Node) -> str | None:
    """The plain variable an assignment or ++/-- changes, or None (memory, or not a write)."""
    if node.type == "assignment_expression":
        target = node.child_by_field_name("left")
    elif node.type == "update_expression":
        target = node.child_by_field_name("argument")
    else:
        return None
    target = strip_parens(target) if target is not None else None
    return text(target) if target is not None and target.type == "identifier" else None


def assigned_identifiers(node: Node) -> set[str]:
    return {name for n in walk(node) if (name := assigned_identifier(n))}


def line_start(source: bytes, offset: int) -> int:
    return source.rfind(b"\n", 0, offset) + 1


def starts_line(source: bytes, node: Node) -> bool:
    return not source[line_start(source, node.start_byte):node.start_byte].strip()


def indent_of(source: bytes, node: Node) -> str:
    start = line_start(source, node.start_byte)
    line = source[start:node.start_byte].decode()
    return line[: len(line) - len(line.lstrip())]


def indent_at(source: bytes, offset: int) -> str:
    """The indentation of the line `offset` is on, if only whitespace precedes it there."""
    line = source[line_start(source, offset):offset].decode()
    return line if not line.strip() else ""


@dataclass(frozen=True)
class Edit:
    start: int
    end: int
    replacement: str


def splice(source: bytes, edits: Iterable[Edit], start: int = 0, end: int | None = None) -> str:
    """`source[start:end]` with the edits made; edits must lie inside and not overlap."""
    end = len(source) if end is None else end
    pieces, cursor = [], start
    for edit in sorted(edits, key=lambda e: (e.start, e.end)):
        if edit.start < cursor or edit.end > end:
            raise RewriteError(f"overlapping or out-of-range edit at byte {edit.start}")
        pieces += [source[cursor:edit.start].decode(), edit.replacement]
        cursor = edit.end
    pieces.append(source[cursor:end].decode())
    return "".join(pieces)


def reblock(source: bytes, first: Node, last: Node, indent: str, edits: Iterable[Edit] = ()) -> str:
    """The statements first..last as text re-indented to `indent`, with `edits` made.

    The first statement may share its line with other code (`if (i < n) { y[i] = 0; }`);
    it is padded to its column so that the lines under it keep their relative indent.
    """
    start = line_start(source, first.start_byte)
    body = splice(source, edits, start, last.end_byte)
    if not starts_line(source, first):
        column = len(source[start:first.start_byte].decode())
        body = " " * column + body[column:]
    return textwrap.indent(textwrap.dedent(body), indent)
