"""online_softmax: the row's maximum and its sum of exponentials in one pass, not two.

A softmax or a log-sum-exp first finds the row's maximum, then reads the row again for
the sum of exp(v - max):

    for (...) { m = fmaxf(m, E); }                 (m starts at -INFINITY)
    float s = 0.0f;
    for (...) { s += expf(E - m); }                (the same loop, the same E)

Keeping a running maximum and rescaling the sum whenever it grows gives both in one read
of the row (Milakov & Gimelshein 2018, "Online normalizer calculation for softmax"):

    v = E;  m' = max(m, v);  s = s * exp(m - m') + exp(v - m');  m = m'

The rows are then read once fewer times: for a row too long for the caches that is one
DRAM pass less. Where block_per_row has already combined each accumulator across the
block after its loop (`m = block_reduce_max_float(m)`, `s = block_reduce_sum_float(s)`),
the pair is combined instead: the block's maximum, each thread's sum rescaled to it, then
the block's sum. A thread (or row) that saw only -inf keeps s = 0 rather than computing
exp(-inf - -inf). The sum is added in another order and through exp(m - m') factors, so it
agrees with the two-pass sum to fp32 rounding (the task's tolerance), as it does in the
softmax expert's lineage (ONLINE_SOFTMAX).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tree_sitter import Node, Tree

from profiling.harness.candidate import Candidate

from ..types import NodeContext
from .base import Rewritten, SiteRewrite
from .syntax import (
    Edit,
    Kernel,
    declared_name,
    find_kernels,
    identifiers,
    indent_of,
    named_statements,
    operands,
    operator,
    splice,
    strip_parens,
    text,
    walk,
)

EXP_FUNCTIONS = ("expf", "__expf")
# Calls a value may make and still be read once instead of twice (no side effects).
PURE_CALLS = frozenset({"expf", "__expf", "logf", "__logf", "fabsf", "fmaxf", "fminf", "sqrtf", "rsqrtf",
                        "__ldg", "__fmul_rn", "__fadd_rn", "tanhf"})
_COMBINE = re.compile(r"block_reduce_(max|sum)_float")
_NAMES = ("online_v", "online_m", "online_all")


@dataclass(frozen=True)
class OnlineSite:
    kernel: Kernel
    max_loop: Node
    sum_loop: Node
    m: str  # the running maximum
    s: str  # the sum of exponentials
    value: str  # E, as written in the maximum's loop
    exp: str  # expf or __expf, as the sum's loop wrote it
    between: tuple[Node, ...]  # statements between the loops (s's declaration, m's combine)
    max_combine: Node | None  # m = block_reduce_max_float(m); between the loops
    sum_combine: Node | None  # s = block_reduce_sum_float(s); right after the sum's loop


def _squashed(node: Node) -> str:
    return re.sub(r"\s+", "", text(node))


def _single(loop: Node) -> Node | None:
    """The loop body's one expression (its statement unwrapped), or None."""
    body = loop.child_by_field_name("body")
    statements = named_statements(body) if body is not None and body.type == "compound_statement" else (
        [body] if body is not None else [])
    if len(statements) != 1 or statements[0].type != "expression_statement" or (
            not statements[0].named_children):
        return None
    return statements[0].named_children[0]


def _header(loop: Node) -> str:
    return "".join(_squashed(loop.child_by_field_name(f)) for f in ("initializer", "condition", "update")
                   if loop.child_by_field_name(f) is not None)


def _running_max(loop: Node) -> tuple[str, Node] | None:
    """(m, E) of `m = fmaxf(m, E)` or `m = fmaxf(E, m)`, E free of m."""
    update = _single(loop)
    if update is None or update.type != "assignment_expression" or operator(update) != "=":
        return None
    target, call = update.child_by_field_name("left"), strip_parens(update.child_by_field_name("right"))
    if target is None or target.type != "identifier" or call.type != "call_expression" or (
            text(call.child_by_field_name("function")) != "fmaxf"):
        return None
    args = call.child_by_field_name("arguments").named_children
    m = text(target)
    if len(args) != 2:
        return None
    for mine, other in ((args[0], args[1]), (args[1], args[0])):
        if text(strip_parens(mine)) == m and m not in {text(n) for n in identifiers(other)}:
            return m, other
    return None


def _sum_of_exp(loop: Node, m: str) -> tuple[str, str, Node] | None:
    """(s, exp, E) of `s += exp(E - m)` or `s = s + exp(E - m)`."""
    update = _single(loop)
    if update is None or update.type != "assignment_expression":
        return None
    target = update.child_by_field_name("left")
    if target is None or target.type != "identifier":
        return None
    s, term = text(target), strip_parens(update.child_by_field_name("right"))
    if operator(update) == "=":
        if term.type != "binary_expression" or operator(term) != "+" or text(operands(term)[0]) != s:
            return None
        term = strip_parens(operands(term)[1])
    elif operator(update) != "+=":
        return None
    if term.type != "call_expression" or text(term.child_by_field_name("function")) not in EXP_FUNCTIONS:
        return None
    args = term.child_by_field_name("arguments").named_children
    if len(args) != 1:
        return None
    difference = strip_parens(args[0])
    if difference.type != "binary_expression" or operator(difference) != "-":
        return None
    value, subtracted = operands(difference)
    if text(strip_parens(subtracted)) != m or s in {text(n) for n in identifiers(value)}:
        return None
    return s, text(term.child_by_field_name("function")), value


def _impure(value: Node) -> str | None:
    """Why evaluating E once instead of twice could change something, or None."""
    for node in walk(value):
        if node.type in ("assignment_expression", "update_expression"):
            return f"assigns ({text(node)})"
        if node.type == "call_expression" and text(node.child_by_field_name("function")) not in PURE_CALLS:
            return f"calls {text(node.child_by_field_name('function'))}"
    return None


def _initialised(statements: list[Node], name: str, values: tuple[str, ...]) -> Node | None:
    """The declaration of `name` with one of `values` as its initial value, among statements."""
    for statement in statements:
        if statement.type != "declaration":
            continue
        for declarator in statement.children_by_field_name("declarator"):
            value = declarator.child_by_field_name("value") if declarator.type == "init_declarator" else None
            if declared_name(declarator) == name and value is not None and _squashed(value) in values:
                return statement
    return None


def _combine(statement: Node, name: str, op: str) -> bool:
    """`name = block_reduce_<op>_float(name);`"""
    if statement.type != "expression_statement" or not statement.named_children:
        return False
    update = statement.named_children[0]
    if update.type != "assignment_expression" or operator(update) != "=" or (
            text(update.child_by_field_name("left")) != name):
        return False
    call = strip_parens(update.child_by_field_name("right"))
    match = _COMBINE.fullmatch(text(call.child_by_field_name("function"))) if call.type == "call_expression" \
        else None
    args = call.child_by_field_name("arguments").named_children if match else []
    return bool(match) and match.group(1) == op and len(args) == 1 and text(args[0]) == name


def online_site(kernel: Kernel) -> OnlineSite | str:
    statements = named_statements(kernel.body)
    for index, first in enumerate(statements):
        if first.type != "for_statement" or (found := _running_max(first)) is None:
            continue
        m, value = found
        if _initialised(statements[:index], m, ("-INFINITY", "-INFINITY", "-HUGE_VALF")) is None:
            continue
        later = [i for i in range(index + 1, len(statements)) if statements[i].type == "for_statement"]
        if not later:
            continue
        second = statements[later[0]]
        summed = _sum_of_exp(second, m)
        if summed is None or _header(first) != _header(second):
            return (f"{kernel.name}: the loop after the maximum's (line {second.start_point.row + 1}) "
                    f"is not s += expf(E - {m}) over the same columns")
        s, exp, summed_value = summed
        impure = _impure(value)
        if impure:
            return f"{kernel.name}: the value {text(value)} {impure}; read once, it could differ"
        if _squashed(summed_value) != _squashed(value):
            return f"{kernel.name}: the sum's exponent reads {text(summed_value)}, the maximum {text(value)}"
        between = statements[index + 1:later[0]]
        declaration = _initialised(between, s, ("0.0f", "0.f", "0"))
        combines = [st for st in between if _combine(st, m, "max")]
        if declaration is None or len(between) != 1 + len(combines) or len(combines) > 1:
            return f"{kernel.name}: between the two loops there is more than {s}'s declaration " \
                   f"and {m}'s block maximum"
        after = statements[later[0] + 1] if later[0] + 1 < len(statements) else None
        sum_combine = after if after is not None and _combine(after, s, "sum") else None
        if bool(combines) != bool(sum_combine):
            return f"{kernel.name}: only one of {m} and {s} is combined across the block"
        taken = {text(n) for n in identifiers(kernel.definition)} & set(_NAMES)
        if taken:
            return f"{kernel.name} already uses the name {sorted(taken)[0]}"
        return OnlineSite(kernel, first, second, m, s, text(value), exp, tuple(between),
                          combines[0] if combines else None, sum_combine)
    return f"{kernel.name}: no loop keeps a running maximum (m = fmaxf(m, E)) followed by s += expf(E - m)"


def _render(source: bytes, site: OnlineSite) -> str:
    indent = indent_of(source, site.max_loop)
    inner = indent + "    "
    body = site.max_loop.child_by_field_name("body")
    header = text(site.max_loop)[: body.start_byte - site.max_loop.start_byte].rstrip()
    m, s, exp = site.m, site.s, site.exp
    declaration = next(st for st in site.between if st.type == "declaration")
    lines = [
        text(declaration),
        f"{indent}// online_softmax: the maximum and the sum of exponentials in one pass; the sum is",
        f"{indent}// rescaled whenever the maximum grows (a thread that saw only -inf keeps {s} = 0).",
        f"{indent}{header} {{",
        f"{inner}const float online_v = {site.value};",
        f"{inner}const float online_m = fmaxf({m}, online_v);",
        f"{inner}{s} = (online_m == -INFINITY) ? 0.0f",
        f"{inner}    : {s} * {exp}({m} - online_m) + {exp}(online_v - online_m);",
        f"{inner}{m} = online_m;",
        f"{indent}}}",
    ]
    if site.max_combine is not None:
        block_max = text(site.max_combine.named_children[0].child_by_field_name("right"))
        lines += [
            f"{indent}{{  // the block's pair: its maximum, each thread's sum rescaled to it, their sum",
            f"{inner}const float online_all = {block_max};",
            f"{inner}{s} = ({m} == -INFINITY) ? 0.0f : {s} * {exp}({m} - online_all);",
            f"{inner}{m} = online_all;",
            f"{indent}}}",
            f"{indent}{text(site.sum_combine)}",
        ]
    return "\n".join(lines)


class OnlineSoftmax(SiteRewrite):
    name = "online_softmax"
    title = "The row's maximum and sum of exponentials in one pass (online softmax)"
    families = ("fusion",)

    def find_sites(self, tree: Tree, source: bytes, candidate: Candidate,
                   context: NodeContext) -> tuple[list[OnlineSite], list[str]]:
        sites, reasons = [], []
        for kernel in find_kernels(tree):
            site = online_site(kernel)
            (reasons if isinstance(site, str) else sites).append(site)
        return sites, reasons

    def apply(self, tree: Tree, source: bytes, candidate: Candidate, context: NodeContext) -> Rewritten:
        sites, _ = self.find_sites(tree, source, candidate, context)
        edits = []
        for site in sites:
            last = site.sum_combine if site.sum_combine is not None else site.sum_loop
            edits.append(Edit(site.max_loop.start_byte, last.end_byte, _render(source, site)))
        kernels = ", ".join(site.kernel.name for site in sites)
        pairs = ", ".join(f"{site.m} and {site.s}" for site in sites)
        rationale = (
            f"{kernels}: {pairs} come from one pass over the row instead of two: a running maximum, "
            "and the sum of exponentials rescaled by exp(old max - new max) whenever it grows (online "
            "softmax, Milakov & Gimelshein 2018). The row is read once fewer times. "
            + ("Across the block the pair is combined as a pair: the block's maximum, each thread's sum "
               "rescaled to it, then their sum. " if any(s.max_combine is not None for s in sites) else "")
            + "The sum agrees with the two-pass one to fp32 rounding, which the task's tolerance admits."
        )
        return Rewritten(splice(source, edits), None, rationale)

