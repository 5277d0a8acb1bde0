"""Partial evaluation of an expert's `OPT_*` conditionals, as Debian's unifdef does.

A lineage shows each step as plain CUDA: both sides of a transition with the flags
evaluated away, so that what a reader (or part 2's anti-unification) sees is the code a
person would have written, not a maze of `#if`. Only conditionals whose expressions
use nothing but `OPT_*` flags, integers, `defined(...)`, `! && || == != < > <= >=` and
parentheses are resolved; any other conditional (`#if __CUDA_ARCH__ >= 900`, include
guards) is kept as it is, with the flags inside it still resolved. A chain that mixes a
resolvable `#if` with an unresolvable `#elif` is an error that says where.

    resolve(source, {"OPT_VEC4": 1, "OPT_UNROLL": 0})  # -> source without OPT_ blocks
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

_DIRECTIVE = re.compile(r"^\s*#\s*(if|ifdef|ifndef|elif|else|endif)\b(.*)$")
_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_]\w*)|(&&|\|\||==|!=|<=|>=|[!()<>]))")


class UnifdefError(ValueError):
    """A conditional this pass cannot resolve safely; the message gives the line."""


@dataclass
class _Group:
    resolved: bool  # does this #if chain depend only on the flags?
    parent_active: bool
    taken: bool = False  # a branch of a resolved chain was already chosen
    active: bool = True
    line: int = 0
    kept: list[str] = field(default_factory=list)


def resolve(source: str, flags: dict[str, int]) -> str:
    """`source` with every conditional over `flags` replaced by the branch they choose."""
    out: list[str] = []
    stack: list[_Group] = []
    lines = _logical_lines(source)
    for number, line in lines:
        active = not stack or stack[-1].active
        match = _DIRECTIVE.match(line)
        if match is None:
            if active:
                out.append(line)
            continue
        kind, rest = match.group(1), _strip_comment(match.group(2))
        if kind in ("if", "ifdef", "ifndef"):
            value = _evaluate(kind, rest, flags)
            group = _Group(resolved=value is not None, parent_active=active, line=number)
            if value is None:
                group.active = active
                if active:
                    out.append(line)
            else:
                group.taken, group.active = bool(value), bool(value) and active
            stack.append(group)
        elif not stack:
            raise UnifdefError(f"line {number}: #{kind} without #if")
        elif kind == "elif":
            group = stack[-1]
            value = _evaluate("if", rest, flags)
            if group.resolved != (value is not None):
                raise UnifdefError(f"line {number}: this #elif and the #if of line {group.line} "
                                   "mix OPT_ flags with other conditions; split them")
            if value is None:
                if group.parent_active:
                    out.append(line)
            else:
                group.active = group.parent_active and not group.taken and bool(value)
                group.taken = group.taken or bool(value)
        elif kind == "else":
            group = stack[-1]
            if group.resolved:
                group.active = group.parent_active and not group.taken
                group.taken = True
            elif group.parent_active:
                out.append(line)
        else:  # endif
            group = stack.pop()
            if not group.resolved and group.parent_active:
                out.append(line)
    if stack:
        raise UnifdefError(f"line {stack[-1].line}: #if without #endif")
    return "\n".join(out) + ("\n" if source.endswith("\n") else "")


def flags_used(source: str) -> set[str]:
    """Every OPT_ name the source's directives mention."""
    names: set[str] = set()
    for _, line in _logical_lines(source):
        if _DIRECTIVE.match(line):
            names |= set(re.findall(r"\bOPT_\w+", line))
    return names


def _logical_lines(source: str) -> list[tuple[int, str]]:
    """Lines with directive continuations (backslash-newline) joined; numbers from 1."""
    physical = source.split("\n")
    if source.endswith("\n"):
        physical.pop()
    lines: list[tuple[int, str]] = []
    index = 0
    while index < len(physical):
        start, line = index + 1, physical[index]
        while _DIRECTIVE.match(line) and line.endswith("\\") and index + 1 < len(physical):
            index += 1
            line = line[:-1] + physical[index]
        lines.append((start, line))
        index += 1
    return lines


def _strip_comment(text: str) -> str:
    return re.sub(r"/\*.*?\*/", " ", text.split("//")[0]).strip()


def _evaluate(kind: str, text: str, flags: dict[str, int]) -> int | None:
    """The condition's value under `flags`, or None when it needs anything else."""
    if kind in ("ifdef", "ifndef"):
        name = text.strip()
        if name not in flags:
            return None
        return int(kind == "ifdef")  # a flag is always defined (to 0 or 1)
    python: list[str] = []
    position = 0
    tokens = []
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            return None if text[position:].strip() else _finish(python)
        tokens.append(match)
        position = match.end()
    skip_defined = False
    for match in tokens:
        number, name, op = match.groups()
        if number is not None:
            python.append(number)
        elif name == "defined":
            skip_defined = True
            continue
        elif name is not None:
            if name not in flags:
                return None
            python.append("1" if skip_defined else str(int(flags[name])))
        else:
            python.append({"&&": " and ", "||": " or ", "!": " not "}.get(op, op))
        skip_defined = skip_defined and op == "("
    return _finish(python)


_ALLOWED = (ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.Compare,
            ast.Eq, ast.NotEq, ast.Lt, ast.Gt, ast.LtE, ast.GtE, ast.Constant)


def _finish(python: list[str]) -> int | None:
    text = "".join(python).strip()
    if not text:
        return None
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        return None
    if not all(isinstance(node, _ALLOWED) for node in ast.walk(tree)):
        return None
    return int(bool(eval(compile(tree, "<condition>", "eval"), {"__builtins__": {}})))  # noqa: S307 (only the nodes above)
