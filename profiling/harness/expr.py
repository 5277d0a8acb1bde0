"""Safe arithmetic over named integers, for launch plans and tensor shapes.

Plans come from users, so they are parsed with `ast` and only arithmetic on names and
numbers is allowed: no attribute access, no calls but a fixed few, no subscripts.
"""

from __future__ import annotations

import ast
import functools
import math
import operator
from collections.abc import Mapping

from . import numerals

Number = int | float


class ExpressionError(ValueError):
    """An expression that cannot be parsed or evaluated; the message says why."""


_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos}


def _cdiv(a: Number, b: Number) -> Number:
    return -(-a // b)


# name -> (function, fewest arguments, most arguments): a call with another count is an
# ExpressionError that says so, never a TypeError from inside the function.
_FUNCTIONS = {"cdiv": (_cdiv, 2, 2), "min": (min, 2, 16), "max": (max, 2, 16),
              "ceil": (math.ceil, 1, 1), "floor": (math.floor, 1, 1)}
_MAX_LENGTH = 400  # characters; a plan expression is a short formula, not a program
_MAX_POWER_BITS = 4096  # a power's result in bits; sizes and grids need under 64


def evaluate(expression: str | Number, names: Mapping[str, Number]) -> Number:
    """Evaluate `expression` with `names` bound; numbers pass through unchanged."""
    if isinstance(expression, bool):
        raise ExpressionError(f"{expression!r} is a boolean, not a number")
    if isinstance(expression, int | float):
        return expression
    if not isinstance(expression, str) or not expression.strip():
        raise ExpressionError(f"expected a number or an expression, got {expression!r}")
    tree = _parse(expression)
    try:
        value = _eval(tree.body, names, expression)
    except ExpressionError:
        raise
    except (ArithmeticError, ValueError, TypeError, RecursionError) as error:
        # Whatever arithmetic on user numbers can raise (a float that overflows, the
        # floor of an infinity, a too-deep expression) is the expression's fault; said in
        # words, not in Python's ("cannot convert float infinity to integer").
        raise ExpressionError(f"{expression!r} cannot be evaluated: {_in_words(error)}") from None
    if not isinstance(value, int | float):  # (-8) ** 0.5 is a complex number
        raise ExpressionError(f"{expression!r} is not a real number")
    if isinstance(value, float) and not math.isfinite(value):
        raise ExpressionError(f"{expression!r} = {value}, which is not a finite number")
    return value


def evaluate_int(expression: str | Number, names: Mapping[str, Number]) -> int:
    value = evaluate(expression, names)
    if isinstance(value, float):
        if not value.is_integer():
            raise ExpressionError(f"{expression!r} = {value}, which is not a whole number")
        value = int(value)
    return value


def names_in(expression: str | Number) -> frozenset[str]:
    """The free names an expression uses (empty for a number). Remembered per expression:
    a search checks the same few launch expressions in thousands of candidates."""
    if not isinstance(expression, str):
        return frozenset()
    return _names_in(expression)


@functools.lru_cache(maxsize=4096)
def _names_in(expression: str) -> frozenset[str]:
    return frozenset(
        node.id
        for node in ast.walk(_parse(expression))
        if isinstance(node, ast.Name) and node.id not in _FUNCTIONS
    )


def _parse(expression: str) -> ast.Expression:
    """The one way an expression's text becomes a tree, for evaluating, naming and
    folding alike (so the API's check of a plan and the gate's launch read it the same):
    written as numerals.py says numbers and expressions are, then parsed."""
    if len(expression) > _MAX_LENGTH:  # before parsing: 5,000 terms exhaust the parser's stack
        raise ExpressionError(f"expression longer than {_MAX_LENGTH} characters")
    problem = numerals.expression_text_problem(expression)
    if problem:
        raise ExpressionError(f"{expression!r}: {problem}")
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as error:
        raise ExpressionError(f"cannot parse {expression!r}: {numerals.syntax_words(error)}") from None
    except RecursionError:
        raise ExpressionError("the expression nests too deeply") from None
    problem = numerals.literal_problem(tree, expression)
    if problem:
        raise ExpressionError(problem)
    return tree


def _eval(node: ast.AST, names: Mapping[str, Number], source: str) -> Number:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        if isinstance(node.value, bool):
            raise ExpressionError(f"booleans are not allowed in {source!r}")
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in names:
            known = ", ".join(sorted(names)) or "none"
            raise ExpressionError(f"unknown name {node.id!r} in {source!r} (known: {known})")
        return names[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left, names, source), _eval(node.right, names, source)
        if isinstance(node.op, ast.Pow) and abs(right) > 64:
            raise ExpressionError(f"exponent {right} too large in {source!r}")
        if (isinstance(node.op, ast.Pow) and isinstance(left, int)
                and left.bit_length() * abs(right) > _MAX_POWER_BITS):
            # ((2**64)**64)**64... keeps each exponent small but grows without bound.
            raise ExpressionError(f"{left}**{right} is too large in {source!r}")
        try:
            return _BINARY[type(node.op)](left, right)
        except ZeroDivisionError:
            raise ExpressionError(f"division by zero in {source!r}") from None
        except OverflowError:
            raise ExpressionError(f"a number overflows in {source!r}") from None
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand, names, source))
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCTIONS
        and not node.keywords
    ):
        function, fewest, most = _FUNCTIONS[node.func.id]
        if not fewest <= len(node.args) <= most:
            wanted = str(fewest) if fewest == most else f"{fewest} to {most}"
            raise ExpressionError(f"{node.func.id}() takes {wanted} arguments, not "
                                  f"{len(node.args)}, in {source!r}")
        args = [_eval(arg, names, source) for arg in node.args]
        try:
            return function(*args)
        except ZeroDivisionError:
            raise ExpressionError(f"division by zero in {node.func.id}() in {source!r}") from None
    raise _unsupported(node, source)


def _unsupported(node: ast.AST, source: str) -> ExpressionError:
    """What an expression may not hold, quoted from it (never Python's dump of its tree:
    "Attribute(value=Name(id='n', ctx=Load()), attr='__class__'...")."""
    part = ast.get_source_segment(source, node) or source
    return ExpressionError(f"{part!r} is not allowed in {source!r}: only numbers, names, + - * / // % ** "
                           f"and {', '.join(f'{name}()' for name in _FUNCTIONS)}")


def _in_words(error: Exception) -> str:
    if isinstance(error, OverflowError):
        return "a number in it overflows"
    if isinstance(error, ZeroDivisionError):
        return "it divides by zero"
    if isinstance(error, RecursionError):
        return "it nests too deeply"
    return "its arithmetic is undefined (an infinity, or a number where none can be)"


def fold(expression: str | Number, names: Mapping[str, Number]) -> str | Number:
    """`expression` with `names` put in and what that makes constant worked out: a number
    when nothing free is left, else the simpler expression as text. Products with 0 or 1
    and sums with 0 go away, so `OPT_X * M + (1 - OPT_X) * cdiv(M, 128)` folds to
    `cdiv(M, 128)` at OPT_X = 0. The value is unchanged wherever both are defined."""
    if not isinstance(expression, str):
        return evaluate(expression, names)
    folded = _fold(_parse(expression).body, names, expression)
    if isinstance(folded, ast.Constant):
        return folded.value
    return ast.unparse(folded)


def _constant(node: ast.AST) -> Number | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) \
            and not isinstance(node.value, bool):
        return node.value
    return None


def _fold(node: ast.AST, names: Mapping[str, Number], source: str) -> ast.AST:
    if isinstance(node, ast.Name) and node.id in names:
        return ast.Constant(names[node.id])
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _fold(node.left, names, source), _fold(node.right, names, source)
        a, b = _constant(left), _constant(right)
        if a is not None and b is not None:
            return ast.Constant(_eval(ast.BinOp(left, node.op, right), {}, source))
        if isinstance(node.op, ast.Mult) and 0 in (a, b):
            return ast.Constant(0)
        if isinstance(node.op, ast.Mult | ast.FloorDiv) and b == 1:
            return left
        if isinstance(node.op, ast.Mult) and a == 1:
            return right
        if isinstance(node.op, ast.Add | ast.Sub) and b == 0:
            return left
        if isinstance(node.op, ast.Add) and a == 0:
            return right
        return ast.BinOp(left, node.op, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        operand = _fold(node.operand, names, source)
        value = _constant(operand)
        return ast.Constant(_UNARY[type(node.op)](value)) if value is not None else \
            ast.UnaryOp(node.op, operand)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS:
        args = [_fold(arg, names, source) for arg in node.args]
        if all(_constant(arg) is not None for arg in args):
            return ast.Constant(_eval(ast.Call(node.func, args, []), {}, source))
        return ast.Call(node.func, args, [])
    if isinstance(node, ast.Name | ast.Constant):
        return node
    raise _unsupported(node, source)
