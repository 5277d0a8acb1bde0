"""The size constants of a KernelBench module, read from its syntax tree.

A constant is a module-level `name = <integer>` (`batch_size = 16`, `dim = 16384`):
`get_inputs()` reads them when it builds the inputs, so giving them other values gives
the same problem at other sizes. Nothing is executed here.
"""

from __future__ import annotations

import ast


class ModuleError(ValueError):
    """The source is not a module this importer reads; the message says why."""


def parse(source: str) -> ast.Module:
    try:
        return ast.parse(source)
    except SyntaxError as error:
        raise ModuleError(f"line {error.lineno}: {error.msg}") from None


_ARITHMETIC = {ast.Add: int.__add__, ast.Sub: int.__sub__, ast.Mult: int.__mul__,
               ast.FloorDiv: int.__floordiv__, ast.Pow: int.__pow__}


def _integer(node: ast.AST) -> int | None:
    """The value of an integer literal or of arithmetic on literals (`2048 * 2`), else None."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        left, right = _integer(node.left), _integer(node.right)
        if left is None or right is None or (isinstance(node.op, ast.Pow) and right > 64):
            return None
        try:
            return _ARITHMETIC[type(node.op)](left, right)
        except ZeroDivisionError:
            return None
    return None


def _assignments(tree: ast.Module):
    """(name, position in a tuple or None, the value's node) of each top-level integer or
    tuple-of-integers assignment: `dim = 16384`, `N = 2048 * 2`, `shape = (128, 4096)`."""
    for node in tree.body:
        single = isinstance(node, ast.Assign) and len(node.targets) == 1
        if not (single and isinstance(node.targets[0], ast.Name)):
            continue
        name, value = node.targets[0].id, node.value
        if _integer(value) is not None:
            yield name, None, node
        elif isinstance(value, ast.Tuple) and value.elts and all(_integer(e) is not None for e in value.elts):
            for position in range(len(value.elts)):
                yield name, position, node


def _key(name: str, position: int | None) -> str:
    return name if position is None else f"{name}_{position}"


def size_constants(source: str) -> dict[str, int]:
    """{name: value} of the module-level integer assignments, in source order; a tuple's
    elements are `name_0`, `name_1`, ... Constants worked out from other constants
    (`dim2 = dim1 - 1`) are not among them: they follow the others by themselves."""
    found: dict[str, int] = {}
    for name, position, node in _assignments(parse(source)):
        value = node.value if position is None else node.value.elts[position]
        found[_key(name, position)] = _integer(value)
    return found


def with_values(source: str, values: dict[str, int]) -> str:
    """The source with those constants set to `values` (the others as written)."""
    tree = parse(source)
    for name, position, node in list(_assignments(tree)):
        key = _key(name, position)
        if key not in values:
            continue
        if position is None:
            node.value = ast.Constant(int(values[key]))
        else:
            node.value.elts[position] = ast.Constant(int(values[key]))
    return ast.unparse(tree)


def defines(source: str) -> list[str]:
    """Which of Model, get_inputs and get_init_inputs the module defines at its top level."""
    names = set()
    for node in parse(source).body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return [n for n in ("Model", "get_inputs", "get_init_inputs") if n in names]
