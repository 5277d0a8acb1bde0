"""Reference expressions: a small numpy subset, parsed with `ast` and evaluated by walking.

A declared task's reference is typed by a user in the browser and runs on our hosts, so
it is never given to eval or exec. An expression may use the task's inputs and sizes,
numbers, + - * / // % **, unary -, comparisons (giving 1.0 or 0.0), subscripts with
whole-number indices and slices (indices are arithmetic on sizes), and calls of
`np.<function>` for the functions in FUNCTIONS; `np.pi` and `np.e` are the only other
attributes. Everything is computed in float64.

Work is bounded before it is done: every intermediate's shape is worked out first and
refused above MAX_ELEMENTS, and a matmul above MAX_MATMUL_MACS. The same walk without
data (`shape_of`) checks a definition at its full size without computing anything.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

import numpy as np

from . import expr, numerals

MAX_LENGTH = 1000  # characters: a formula, not a program
MAX_NODES = 300
MAX_DEPTH = 30
# relu's L1 tensor, the largest in the suite (2**28 fp32 values): 2 GiB per float64
# intermediate on the host that computes the reference.
MAX_ELEMENTS = 2**28
# sgemm's 4096**3 multiply-adds, a few seconds of float64 BLAS on one host.
MAX_MATMUL_MACS = 2**36


class ExpressionRefused(ValueError):
    """An expression that is not allowed or cannot be evaluated; the message says why."""


class TooLarge(ExpressionRefused):
    """An intermediate or a matmul above the limits the caller set."""


@dataclass(frozen=True)
class Limits:
    elements: int = MAX_ELEMENTS
    matmul_macs: int = MAX_MATMUL_MACS


@dataclass(frozen=True)
class Abstract:
    """A value known only by its shape: what `shape_of` computes with."""

    shape: tuple[int, ...]


Value = np.ndarray | Abstract


@dataclass(frozen=True)
class Function:
    kind: str  # map | broadcast | reduce | argreduce | matmul | reshape | transpose
    arity: int
    numpy: Callable
    keywords: frozenset[str] = frozenset()


_AXIS = frozenset({"axis", "keepdims"})
# fmt: off
_MAPS = {"abs": np.abs, "exp": np.exp, "expm1": np.expm1, "log": np.log, "log1p": np.log1p,
         "sqrt": np.sqrt, "square": np.square, "tanh": np.tanh, "sin": np.sin, "cos": np.cos,
         "floor": np.floor, "ceil": np.ceil, "sign": np.sign}
FUNCTIONS: dict[str, Function] = {
    **{name: Function("map", 1, fn) for name, fn in _MAPS.items()},
    "maximum": Function("broadcast", 2, np.maximum), "minimum": Function("broadcast", 2, np.minimum),
    "where": Function("broadcast", 3, np.where), "clip": Function("broadcast", 3, np.clip),
    **{name: Function("reduce", 1, fn, _AXIS)
       for name, fn in {"sum": np.sum, "max": np.max, "min": np.min, "mean": np.mean}.items()},
    "argmax": Function("argreduce", 1, np.argmax, _AXIS),
    "argmin": Function("argreduce", 1, np.argmin, _AXIS),
    "matmul": Function("matmul", 2, np.matmul), "reshape": Function("reshape", 2, np.reshape),
    "transpose": Function("transpose", 1, np.transpose),
}
CONSTANTS = {"pi": math.pi, "e": math.e}

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
_COMPARE = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
            ast.Eq: operator.eq, ast.NotEq: operator.ne}
_INDEX_OPS = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)
# What a refused construct is called in a message, for the ones people try.
_WORDS = {
    ast.Lambda: "lambda", ast.ListComp: "comprehensions", ast.SetComp: "comprehensions",
    ast.DictComp: "comprehensions", ast.GeneratorExp: "comprehensions",
    ast.IfExp: "'a if c else b' (use np.where)", ast.BoolOp: "and/or (use * or np.where)",
    ast.NamedExpr: ":=", ast.Starred: "*-unpacking", ast.JoinedStr: "f-strings", ast.List: "lists",
    ast.Dict: "dicts", ast.Set: "sets", ast.Await: "await", ast.Yield: "yield", ast.YieldFrom: "yield",
}
# fmt: on


class Expression:
    """One parsed and checked reference expression over `arrays` and `sizes` (names)."""

    def __init__(self, source: str, *, arrays: Collection[str], sizes: Collection[str]) -> None:
        if not isinstance(source, str) or not source.strip():
            raise ExpressionRefused("expected an expression, e.g. np.maximum(x, 0)")
        if len(source) > MAX_LENGTH:
            raise ExpressionRefused(f"longer than {MAX_LENGTH} characters")
        problem = numerals.expression_text_problem(source)
        if problem:
            raise ExpressionRefused(problem)
        try:
            tree = ast.parse(source, mode="eval")
        except SyntaxError as error:
            raise ExpressionRefused(f"cannot parse it: {numerals.syntax_words(error)}") from None
        except (RecursionError, MemoryError):
            raise ExpressionRefused("nested too deeply") from None
        problem = numerals.literal_problem(tree, source)
        if problem:
            raise ExpressionRefused(problem)
        nodes = sum(1 for _ in ast.walk(tree))
        if nodes > MAX_NODES:
            raise ExpressionRefused(f"{nodes} syntax nodes, more than {MAX_NODES}")
        self.source = source
        self.arrays, self.sizes = frozenset(arrays), frozenset(sizes)
        _Checker(self.arrays, self.sizes).check(tree.body, 1)
        self._body = tree.body

    def evaluate(
        self, arrays: Mapping[str, np.ndarray], sizes: Mapping[str, int], limits: Limits = Limits()
    ) -> np.ndarray:
        """The value in float64; inputs are converted (copied), never modified."""
        names: dict[str, Value] = {k: np.asarray(arrays[k], dtype=np.float64) for k in self.arrays}
        names.update({k: np.asarray(float(v)) for k, v in sizes.items()})
        with np.errstate(all="ignore"):  # NaN and inf are the caller's to judge
            return _Walker(names, sizes, limits, abstract=False).value(self._body)

    def shape_of(
        self, shapes: Mapping[str, tuple[int, ...]], sizes: Mapping[str, int], limits: Limits = Limits()
    ) -> tuple[int, ...]:
        """The result's shape, computing nothing: checks the work limits at any size."""
        names: dict[str, Value] = {k: Abstract(tuple(shapes[k])) for k in self.arrays}
        names.update({k: Abstract(()) for k in sizes})
        return _Walker(names, sizes, limits, abstract=True).value(self._body).shape


class _Checker:
    """Refuses, before anything runs, every construct the walker does not allow."""

    def __init__(self, arrays: frozenset[str], sizes: frozenset[str]) -> None:
        self.arrays, self.sizes = arrays, sizes

    def check(self, node: ast.AST, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise ExpressionRefused(f"nested more than {MAX_DEPTH} deep")
        if isinstance(node, ast.Constant):
            _number(node)
        elif isinstance(node, ast.Name):
            self._name(node.id)
        elif isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            self.check(node.left, depth + 1)
            self.check(node.right, depth + 1)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            self.check(node.operand, depth + 1)
        elif isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
            for part in (node.left, *node.comparators):
                self.check(part, depth + 1)
        elif isinstance(node, ast.Call):
            self._call(node, depth)
        elif isinstance(node, ast.Attribute):
            if _np_attribute(node) not in CONSTANTS:
                name = _np_attribute(node)
                if name in FUNCTIONS:
                    raise ExpressionRefused(f"np.{name} must be called: np.{name}(...)")
                raise ExpressionRefused(
                    f"attribute {ast.unparse(node)!r} is not allowed: only "
                    "np.<function> (see the list) and np.pi, np.e"
                )
        elif isinstance(node, ast.Subscript):
            self.check(node.value, depth + 1)
            for item in _index_items(node.slice):
                self._index(item)
        else:
            raise ExpressionRefused(f"{_word(node)} is not allowed")

    def _name(self, name: str) -> None:
        if name == "np":
            raise ExpressionRefused("np alone is not a value: use np.<function>(...)")
        if name not in self.arrays and name not in self.sizes:
            known = ", ".join(sorted(self.arrays | self.sizes)) or "none"
            raise ExpressionRefused(f"unknown name {name!r} (known: {known})")

    def _call(self, node: ast.Call, depth: int) -> None:
        name = _np_attribute(node.func)
        if name not in FUNCTIONS:
            what = ast.unparse(node.func)
            raise ExpressionRefused(
                f"calling {what!r} is not allowed; allowed: {', '.join('np.' + f for f in sorted(FUNCTIONS))}"
            )
        function = FUNCTIONS[name]
        if len(node.args) != function.arity or any(isinstance(a, ast.Starred) for a in node.args):
            raise ExpressionRefused(f"np.{name} takes {function.arity} argument(s)")
        for keyword in node.keywords:
            if keyword.arg not in function.keywords:
                allowed = ", ".join(sorted(function.keywords)) or "none"
                raise ExpressionRefused(
                    f"np.{name} does not take {keyword.arg or '**'}= (allowed: {allowed})"
                )
            if keyword.arg == "keepdims":
                if not (isinstance(keyword.value, ast.Constant) and isinstance(keyword.value.value, bool)):
                    raise ExpressionRefused("keepdims must be True or False")
            else:
                self._axis(keyword.value)
        self.check(node.args[0], depth + 1)
        if function.kind == "reshape":
            for item in node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]:
                self._whole(item)
        else:
            for argument in node.args[1:]:
                self.check(argument, depth + 1)

    def _axis(self, node: ast.AST) -> None:
        if isinstance(node, ast.Constant) and node.value is None:
            return
        for item in node.elts if isinstance(node, ast.Tuple) else [node]:
            self._whole(item)

    def _index(self, node: ast.AST) -> None:
        if isinstance(node, ast.Slice):
            for part in (node.lower, node.upper, node.step):
                if part is not None:
                    self._whole(part)
        elif not (isinstance(node, ast.Constant) and (node.value is None or node.value is Ellipsis)):
            self._whole(node)

    def _whole(self, node: ast.AST) -> None:
        """Indices, axes and reshape dimensions: whole-number arithmetic on sizes."""
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, int)
            and not isinstance(node.value, bool)
        ):
            return
        if isinstance(node, ast.Name) and node.id in self.sizes:
            return
        if isinstance(node, ast.BinOp) and isinstance(node.op, _INDEX_OPS):
            self._whole(node.left)
            self._whole(node.right)
            return
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            self._whole(node.operand)
            return
        raise ExpressionRefused(
            f"{ast.unparse(node)!r} is not a whole number: indices, axes and "
            "shapes are whole numbers and sizes with + - * // %"
        )


class _Walker:
    """Evaluates a checked tree on arrays, or on Abstract shapes for `shape_of`."""

    def __init__(
        self, names: Mapping[str, Value], sizes: Mapping[str, int], limits: Limits, *, abstract: bool
    ) -> None:
        self.names, self.sizes = names, {k: int(v) for k, v in sizes.items()}
        self.limits, self.abstract = limits, abstract

    def value(self, node: ast.AST) -> Value:
        if isinstance(node, ast.Constant):
            return self._make((), lambda: np.asarray(float(node.value)))
        if isinstance(node, ast.Name):
            return self.names[node.id]
        if isinstance(node, ast.Attribute):
            return self._make((), lambda: np.asarray(CONSTANTS[node.attr]))
        if isinstance(node, ast.BinOp):
            return self._broadcast(_BINARY[type(node.op)], [self.value(node.left), self.value(node.right)])
        if isinstance(node, ast.UnaryOp):
            operand = self.value(node.operand)
            if isinstance(node.op, ast.UAdd):
                return operand
            return self._make(operand.shape, lambda: np.negative(operand))
        if isinstance(node, ast.Compare):
            return self._compare(node)
        if isinstance(node, ast.Subscript):
            return self._subscript(node)
        if isinstance(node, ast.Call):
            return self._call(node)
        raise ExpressionRefused(f"{_word(node)} is not allowed")  # the checker let it through

    def _make(self, shape: tuple[int, ...], compute: Callable[[], np.ndarray]) -> Value:
        elements = math.prod(shape)
        if elements > self.limits.elements:
            raise TooLarge(
                f"an intermediate of shape {shape} has {elements} elements, more than {self.limits.elements}"
            )
        if self.abstract:
            return Abstract(shape)
        result = np.asarray(compute(), dtype=np.float64)
        if result.shape != shape:  # our shape rule and numpy disagree: say so, loudly
            raise ExpressionRefused(f"internal: expected shape {shape}, numpy gave {result.shape}")
        return result

    def _broadcast(self, fn: Callable, values: list[Value]) -> Value:
        try:
            shape = np.broadcast_shapes(*(v.shape for v in values))
        except ValueError:
            raise ExpressionRefused(
                "shapes " + " and ".join(str(v.shape) for v in values) + " do not broadcast together"
            ) from None
        return self._make(shape, lambda: fn(*values))

    def _compare(self, node: ast.Compare) -> Value:
        left, result = self.value(node.left), None
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = self.value(right_node)
            pair = self._broadcast(_COMPARE[type(op)], [left, right])
            result = pair if result is None else self._broadcast(np.multiply, [result, pair])
            left = right
        return result

    def _whole(self, node: ast.AST) -> int:
        try:
            return expr.evaluate_int(ast.unparse(node), self.sizes)
        except expr.ExpressionError as error:
            raise ExpressionRefused(str(error)) from None

    def _index(self, node: ast.AST):
        if isinstance(node, ast.Slice):
            parts = [None if p is None else self._whole(p) for p in (node.lower, node.upper, node.step)]
            if parts[2] == 0:
                raise ExpressionRefused("a slice step may not be zero")
            return slice(*parts)
        if isinstance(node, ast.Constant) and (node.value is None or node.value is Ellipsis):
            return node.value
        return self._whole(node)

    def _subscript(self, node: ast.Subscript) -> Value:
        base = self.value(node.value)
        index = tuple(self._index(item) for item in _index_items(node.slice))
        # A view of nothing (stride 0) gives numpy's own answer for the result's shape.
        empty = np.lib.stride_tricks.as_strided(np.zeros(1), shape=base.shape, strides=(0,) * len(base.shape))
        try:
            shape = empty[index].shape
        except (IndexError, OverflowError, ValueError, TypeError) as error:
            raise ExpressionRefused(
                f"index {ast.unparse(node.slice)!r} on shape {base.shape}: {error}"
            ) from None
        return self._make(shape, lambda: base[index])

    def _call(self, node: ast.Call) -> Value:
        name = _np_attribute(node.func)
        function = FUNCTIONS[name]
        keywords = {k.arg: k.value for k in node.keywords}
        first = self.value(node.args[0])
        if function.kind == "map":
            return self._make(first.shape, lambda: function.numpy(first))
        if function.kind == "broadcast":
            return self._broadcast(function.numpy, [first, *(self.value(a) for a in node.args[1:])])
        if function.kind in ("reduce", "argreduce"):
            return self._reduce(name, function, first, keywords)
        if function.kind == "matmul":
            second = self.value(node.args[1])
            shape = _matmul_shape(first.shape, second.shape, self.limits.matmul_macs)
            return self._make(shape, lambda: np.matmul(first, second))
        if function.kind == "reshape":
            dims = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
            shape = _reshape_shape(first.shape, [self._whole(d) for d in dims])
            return self._make(shape, lambda: np.reshape(first, shape))
        return self._make(first.shape[::-1], lambda: np.transpose(first))

    def _reduce(self, name: str, function: Function, operand: Value, keywords: dict) -> Value:
        keepdims = bool(keywords["keepdims"].value) if "keepdims" in keywords else False
        axis_node = keywords.get("axis")
        axes: tuple[int, ...] | None = None
        if axis_node is not None and not (isinstance(axis_node, ast.Constant) and axis_node.value is None):
            items = axis_node.elts if isinstance(axis_node, ast.Tuple) else [axis_node]
            if function.kind == "argreduce" and isinstance(axis_node, ast.Tuple):
                raise ExpressionRefused(f"np.{name} takes one axis, not a tuple")
            axes = _normal_axes([self._whole(i) for i in items], len(operand.shape))
        reduced = range(len(operand.shape)) if axes is None else axes
        if any(operand.shape[a] == 0 for a in reduced) and name in ("max", "min", "argmax", "argmin"):
            raise ExpressionRefused(f"np.{name} over an empty axis")
        shape = tuple(
            1 if i in reduced else n for i, n in enumerate(operand.shape) if keepdims or i not in reduced
        )
        axis = None if axes is None else (axes[0] if function.kind == "argreduce" else axes)
        return self._make(shape, lambda: function.numpy(operand, axis=axis, keepdims=keepdims))


def _number(node: ast.Constant) -> None:
    value = node.value
    if isinstance(value, bool) or not isinstance(value, int | float):
        what = "strings" if isinstance(value, str | bytes) else repr(value)
        raise ExpressionRefused(f"{what} not allowed here: only numbers")
    if abs(value) > 1e300:  # also keeps Python's unbounded ints out of float64
        raise ExpressionRefused(f"the number {str(value)[:12]}... is too large")


def _np_attribute(node: ast.AST) -> str | None:
    """`name` for a node that is exactly np.<name>; None for anything else."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "np":
        return node.attr
    return None


def _index_items(node: ast.AST) -> list[ast.AST]:
    return list(node.elts) if isinstance(node, ast.Tuple) else [node]


def _word(node: ast.AST) -> str:
    """What the node is, in words, or quoted from the expression: never the name of
    Python's syntax class ("BinOp syntax" was what `x @ x` got)."""
    if type(node) in _WORDS:
        return _WORDS[type(node)]
    text = ast.unparse(node)
    return repr(text if len(text) <= 60 else f"{text[:60]}...")


def _normal_axes(axes: list[int], ndim: int) -> tuple[int, ...]:
    normal = []
    for axis in axes:
        if not -ndim <= axis < ndim:
            raise ExpressionRefused(f"axis {axis} is out of range for {ndim} dimension(s)")
        normal.append(axis % ndim)
    if len(set(normal)) != len(normal):
        raise ExpressionRefused(f"axis {tuple(axes)} repeats an axis")
    return tuple(sorted(normal))


def _matmul_shape(a: tuple[int, ...], b: tuple[int, ...], most_macs: int) -> tuple[int, ...]:
    if not a or not b:
        raise ExpressionRefused("np.matmul needs arrays of at least one dimension, not numbers")
    left, right = (a if len(a) > 1 else (1, *a)), (b if len(b) > 1 else (*b, 1))
    if left[-1] != right[-2]:
        raise ExpressionRefused(f"np.matmul of shapes {a} and {b}: inner dimensions differ")
    try:
        batch = np.broadcast_shapes(left[:-2], right[:-2])
    except ValueError:
        raise ExpressionRefused(f"np.matmul of shapes {a} and {b}: batch shapes do not broadcast") from None
    macs = math.prod(batch) * left[-2] * left[-1] * right[-1]
    if macs > most_macs:
        raise TooLarge(f"np.matmul of shapes {a} and {b} is {macs} multiply-adds, more than {most_macs}")
    return (*batch, *(left[-2:-1] if len(a) > 1 else ()), *(right[-1:] if len(b) > 1 else ()))


def _reshape_shape(shape: tuple[int, ...], dims: list[int]) -> tuple[int, ...]:
    total = math.prod(shape)
    if dims.count(-1) > 1 or any(d < -1 for d in dims):
        raise ExpressionRefused(f"np.reshape to {tuple(dims)}: at most one -1 and no other negatives")
    known = math.prod(d for d in dims if d != -1)
    if -1 in dims:
        if known == 0 or total % known:
            raise ExpressionRefused(f"cannot reshape {shape} into {tuple(dims)}")
        dims = [total // known if d == -1 else d for d in dims]
    if math.prod(dims) != total:
        raise ExpressionRefused(f"cannot reshape {shape} ({total} elements) into {tuple(dims)}")
    return tuple(dims)
