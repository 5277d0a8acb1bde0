"""Expanding an expert's flag-carrying macros, so a plain state reads as plain CUDA.

An expert often says an optimization once, in a macro with one definition per branch:

    #if OPT_RESTRICT
    #define SOFTMAX_IN const float* __restrict__
    #else
    #define SOFTMAX_IN const float*
    #endif

After partial evaluation (unifdef.py) one definition is left, and a step's diff is a change
to a `#define`, far from the kernel signature it acts on: neither a reader nor
anti-unification (antiunify.py) sees `const float* x` become `const float* __restrict__ x`.
So the macros the expert defines more than once (one per branch: the flag-carrying ones)
are expanded where they are used, in code and in other macros' bodies, and their
definitions dropped. Object-like and function-like macros alike; everything else (macros
defined once, the tunables passed with -D) stays as written. Comments and string literals
are left alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)(\(([^)]*)\))?[ \t]*(.*?)[ \t]*$")
# What the scanner steps over whole: comments, string and character literals.
_SKIP = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.DOTALL)
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
MAX_PASSES = 16  # macros inside macros: a chain deeper than this is an expert's bug


class MacroError(ValueError):
    """A flag-carrying macro that cannot be expanded (a call without its arguments)."""


@dataclass(frozen=True)
class Macro:
    name: str
    params: tuple[str, ...] | None  # None: object-like
    body: str


def flag_carrying(original: str) -> set[str]:
    """The macros `original` defines more than once (once per branch of a conditional)."""
    seen: dict[str, int] = {}
    for line in original.splitlines():
        match = _DEFINE.match(line)
        if match:
            seen[match.group(1)] = seen.get(match.group(1), 0) + 1
    return {name for name, count in seen.items() if count > 1}


def expand(plain: str, names: set[str]) -> str:
    """`plain` with the macros in `names` expanded and their definitions removed."""
    macros: dict[str, Macro] = {}
    kept: list[str] = []
    for line in plain.splitlines(keepends=True):
        match = _DEFINE.match(line.rstrip("\n"))
        if match and match.group(1) in names:
            params = tuple(p.strip() for p in match.group(3).split(",") if p.strip()) \
                if match.group(2) is not None else None
            body = _SKIP.sub(lambda m: m.group(0) if not m.group(0).startswith("/") else "",
                             match.group(4)).strip()
            macros[match.group(1)] = Macro(match.group(1), params, body)
            continue
        kept.append(line)
    text = "".join(kept)
    for _ in range(MAX_PASSES):
        expanded = _expand_once(text, macros)
        if expanded == text:
            return text
        text = expanded
    raise MacroError(f"macros still expanding after {MAX_PASSES} passes: {sorted(macros)}")


def _expand_once(text: str, macros: dict[str, Macro]) -> str:
    out: list[str] = []
    at = 0
    while at < len(text):
        skipped = _SKIP.match(text, at)
        if skipped:
            out.append(skipped.group(0))
            at = skipped.end()
            continue
        word = _IDENTIFIER.match(text, at)
        if word is None:
            out.append(text[at])
            at += 1
            continue
        name, at = word.group(0), word.end()
        macro = macros.get(name)
        if macro is None:
            out.append(name)
        elif macro.params is None:
            out.append(macro.body)
        else:
            args, at = _arguments(text, at, name)
            out.append(_substitute(macro, args))
    return "".join(out)


def _arguments(text: str, at: int, name: str) -> tuple[list[str], int]:
    """The call's arguments after `name` (at the `(`), and where the call ends."""
    start = at
    while start < len(text) and text[start] in " \t":
        start += 1
    if start >= len(text) or text[start] != "(":
        raise MacroError(f"{name} is a function-like macro used without arguments")
    depth, args, current, i = 0, [], [], start
    while i < len(text):
        char = text[i]
        if char == "(":
            depth += 1
            if depth > 1:
                current.append(char)
        elif char == ")":
            depth -= 1
            if depth == 0:
                args.append("".join(current).strip())
                return [a for a in args if a or len(args) > 1], i + 1
            current.append(char)
        elif char == "," and depth == 1:
            args.append("".join(current).strip())
            current = []
        else:
            current.append(char)
        i += 1
    raise MacroError(f"{name}(...: no closing parenthesis")


def _substitute(macro: Macro, args: list[str]) -> str:
    params = macro.params or ()
    if len(args) != len(params):
        raise MacroError(f"{macro.name} takes {len(params)} arguments, given {len(args)}")
    values = dict(zip(params, args, strict=True))
    return _IDENTIFIER.sub(lambda m: values.get(m.group(0), m.group(0)), macro.body)
