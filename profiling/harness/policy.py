"""What untrusted source and compiler options may contain, and what it may make nvcc read.

The gate loads a cubin and launches the kernels a plan names on its own stream; host code
in the source never runs. Three doors remain, and these checks close them:
- files: `#include "/etc/passwd"` would echo a file into the error log. Which files the
  preprocessor read is taken from the preprocessor itself (compile.py runs it first, on
  its own): every one must lie in the toolkit's or the system's include folders
  (`check_dependencies`). No spelling of a directive is guessed at here;
- text the compiler reads twice: nvcc preprocesses with gcc, then cicc preprocesses that
  output again, so a macro that expands to `# include "f"` would include f in the second
  pass, unseen by the first. `check_preprocessed` allows no directive in that text but
  gcc's line markers and pragmas that read no file;
- device-side launches (dynamic parallelism): work started from a kernel on another
  stream, or fire-and-forget, would escape the timing events. They need `-rdc=true` and
  cudadevrt, which the option allow-list refuses, and the source checks name them.
Directives are found as the preprocessor finds them: after trigraphs (some -std modes),
line splices (also with spaces before the newline, as gcc allows) and comments, at the
start of a logical line; every such reading is checked, so none of them hides one.
"""

from __future__ import annotations

import codecs
import os
import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

SOURCE_NAME = "kernel.cu"
# #embed reads a file into the program (gcc 15); #line and GNU line markers make
# diagnostics name other files and lines, which would break "errors keep your lines".
_FORBIDDEN_IN_SOURCE = {"embed": "reads a file into the program",
                        "line": "renames the source in diagnostics"}
# Pragmas that make a compiler open a file: gcc's dependency and PCH pragmas, EDG's
# include aliases and precompiled-header stops.
_FILE_PRAGMA = re.compile(r"\s*(?:GCC\s+)?(?:dependency|pch_preprocess)\b|\s*(?:include_alias|hdrstop)\b")
_FOREIGN_WORK = {
    "<<<": "a kernel launch inside the source (device-side launches escape the gate's timing)",
    "cudaStreamCreate": "creates a stream (work on another stream escapes the timing)",
    "cudaStreamFireAndForget": "fire-and-forget launch (escapes the timing)",
    "cudaStreamTailLaunch": "tail launch (escapes the timing)",
    "cudaLaunchDevice": "device-side launch (escapes the timing)",
    "cudaGraphLaunch": "graph launch from a kernel (escapes the timing)",
    "cudaGetParameterBuffer": "device-side launch machinery (escapes the timing)",
}

_ALLOWED_OPTIONS = [
    re.compile(p)
    for p in (
        r"-O[0-3]",
        r"--?use_fast_math",
        r"--?(ftz|prec-div|prec-sqrt|fmad)=(true|false)",
        r"--?maxrregcount=\d{1,3}",
        r"-lineinfo|--generate-line-info",
        r"--extra-device-vectorization",
        r"-std=c\+\+(14|17|20)",
        r"-D[A-Za-z_][A-Za-z0-9_]*(=[A-Za-z0-9_.+-]{1,32})?",
        r"-Xptxas=-O[0-3]|--ptxas-options=-O[0-3]",
        r"--restrict",
        r"--default-stream=per-thread",
    )
]

MAX_SOURCE_BYTES = 512 * 1024  # a kernel file, not a code base; keeps compile time bounded
ONLY_HEADERS = "only toolkit and system headers like <cuda_fp16.h> may be included"


class PolicyViolation(ValueError):
    def __init__(self, guard: str, message: str):
        super().__init__(message)
        self.guard = guard


def check_source(source: str) -> None:
    if len(source.encode()) > MAX_SOURCE_BYTES:
        raise PolicyViolation("source_policy", f"source is larger than {MAX_SOURCE_BYTES} bytes")
    if "\x00" in source:
        raise PolicyViolation("source_policy", "source contains a NUL byte")
    for directive in scan_directives(source):
        if directive.name.isdigit():
            raise _violation(directive.line, "a GNU line marker (# <number>) is not allowed")
        if directive.name in _FORBIDDEN_IN_SOURCE:
            raise _violation(directive.line, f"#{directive.name} is not allowed "
                                             f"({_FORBIDDEN_IN_SOURCE[directive.name]})")
        if directive.name == "pragma" and _FILE_PRAGMA.match(directive.rest):
            raise _violation(directive.line, f"#pragma{directive.rest[:40]} is not allowed "
                                             "(it makes the compiler open a file)")
    code = _strip_comments(source)
    for token, why in _FOREIGN_WORK.items():
        index = code.find(token)
        if index >= 0:
            raise _violation(code.count("\n", 0, index) + 1, f"{token}: {why}")


def check_compile_options(options: tuple[str, ...] | list[str]) -> None:
    for option in options:
        if not any(p.fullmatch(option) for p in _ALLOWED_OPTIONS):
            raise PolicyViolation(
                "compile_policy",
                f"compiler option {option!r} is not allowed (allowed: -O0..3, --use_fast_math, "
                "-ftz/-prec-div/-prec-sqrt/-fmad=, --maxrregcount=N, -lineinfo, -DNAME=VALUE, "
                "-std=c++17, --extra-device-vectorization)",
            )


def check_dependencies(paths: Iterable[str], build_dir: Path, roots: Sequence[str],
                       source: str) -> None:
    """Every file the preprocessor read is the candidate's kernel.cu or lies in one of
    `roots`, both as written (no `..` or /proc/self/... detour) and once links resolve.
    A relative name it found nowhere (listed by -MG) may not reach outside either, from
    any folder it could be looked up in."""
    lexical_roots = [os.path.normpath(r) for r in roots] + [os.path.realpath(r) for r in roots]
    real_roots = [os.path.realpath(r) for r in roots]
    own = os.path.normpath(build_dir / SOURCE_NAME)
    for path in paths:
        lexical = os.path.normpath(os.path.join(build_dir, path))
        real = os.path.realpath(lexical)
        if lexical == own and real == os.path.realpath(own):
            continue
        if _inside(lexical, lexical_roots) and _inside(real, real_roots):
            continue
        if not os.path.isabs(path) and not os.path.lexists(lexical) and _stays_inside(
                path, build_dir, lexical_roots):
            continue  # a header found nowhere: the preprocessor's own error says so
        shown = path if len(path) <= 200 else path[:200] + "..."
        raise _violation(_include_line(source, path),
                         f"the source includes {shown!r}, which is outside the toolkit's and "
                         f"the system's include folders: {ONLY_HEADERS}")


def _stays_inside(name: str, build_dir: Path, roots: Sequence[str]) -> bool:
    """Whether a relative include name, looked up from kernel.cu's folder or any include
    folder, stays in that folder's tree (no `..` out of it)."""
    if not _inside(os.path.normpath(os.path.join(build_dir, name)), [os.path.normpath(build_dir)]):
        return False
    return all(_inside(os.path.normpath(os.path.join(root, name)), roots) for root in roots)


def check_preprocessed(text: str) -> None:
    """The preprocessed text cicc will read: no directive but line markers and pragmas
    that open no file, no _Pragma left to run, no device-side launch in kernel.cu's part."""
    for directive in scan_directives(text):
        if directive.name.isdigit() or (directive.name == "" and not directive.rest.strip()):
            continue
        if directive.name != "pragma":
            raise _violation(origin(text, _line_start(text, directive.line)),
                             f"#{directive.name or directive.rest[:20]} would run when nvcc "
                             "reads the preprocessed source again (a macro that expands to a "
                             "directive, or a trigraph the first pass left as text)")
        if _FILE_PRAGMA.match(directive.rest):
            raise _violation(origin(text, _line_start(text, directive.line)),
                             "a #pragma that makes the compiler open a file is not allowed")
    for variant in _variants(text):
        for match in re.finditer(r"\b_Pragma\s*\(", variant.text):
            operand = _PRAGMA_OPERAND.match(variant.text, match.end())
            if operand is None or _FILE_PRAGMA.match(_destringize(operand.group(1))):
                raise _violation(origin(text, match.start()), "a _Pragma that the preprocessor "
                                 "left for the compiler to run is not allowed")
    for line, code in lines_of(text, SOURCE_NAME):
        for token, why in _FOREIGN_WORK.items():
            if token in code:
                raise _violation(line, f"{token} (after macro expansion): {why}")


@dataclass(frozen=True)
class Directive:
    line: int  # physical line of the text where the logical line starts
    name: str  # "include", "pragma", digits for a line marker, "" when none
    rest: str  # the logical line after the name


def scan_directives(text: str) -> list[Directive]:
    """Every line that some reading of the text (trigraphs on or off; splices strict or
    with trailing spaces) makes a directive: a superset of what any of them runs."""
    found: dict[tuple[int, str, str], Directive] = {}
    for variant in _variants(text):
        newlines, counted = 0, 0  # counted as the matches come, in order: no per-line table
        for match in _CANDIDATE.finditer(variant.text):
            start = match.start()
            newlines += variant.text.count("\n", counted, start)
            counted = start
            if match.group(1):  # "# 12 ..." with nothing to skip: gcc's line markers, mostly
                name, rest = match.group(1), ""
            else:
                hash_at = variant.skip_blank(start)
                if variant.text.startswith("#", hash_at):
                    after = hash_at + 1
                elif variant.text.startswith("%:", hash_at):
                    after = hash_at + 2
                else:
                    continue
                named = _NAME.match(variant.text, variant.skip_blank(after))
                name, rest = _decode_ucn(named.group(0)), variant.rest_of_line(named.end())
            line = newlines + 1 + bisect_right(variant.splices, start)
            found.setdefault((line, name, rest[:200]), Directive(line, name, rest))
    return sorted(found.values(), key=lambda d: d.line)


# A logical line whose first character could begin a directive or a comment; a plain
# "# <digits>" (a line marker) is told apart at once, the rest is read step by step.
_CANDIDATE = re.compile(r"^[ \t\f\v]*(?:#[ \t]*(\d+)(?![\w\\/])|[#%/])", re.MULTILINE)
_NAME = re.compile(r"(?:[A-Za-z_0-9]|\\u[0-9A-Fa-f]{4}|\\U[0-9A-Fa-f]{8})*")
_PRAGMA_OPERAND = re.compile(r'\s*(?:L|u8|u|U)?"((?:[^"\\\n]|\\.)*)"\s*\)')
_TRIGRAPHS = {"=": "#", "/": "\\", "'": "^", "(": "[", ")": "]", "!": "|", "<": "{", ">": "}", "-": "~"}


class _Variant:
    """One reading of the text after translation phases 1-2, with what maps it back."""

    def __init__(self, text: str, splices: list[int]) -> None:
        self.text = text
        self.splices = splices  # where in `text` a newline was spliced away
        self.closes = [m.start() for m in re.finditer(r"\*/", text)]

    def skip_blank(self, index: int) -> int:
        """Past blanks and comments (a comment is a blank, even across lines): linear in
        the comments skipped, so a flood of unclosed `/*` costs no quadratic time."""
        text = self.text
        while index < len(text):
            if text[index] in " \t\f\v":
                index += 1
            elif text.startswith("/*", index):
                close = bisect_left(self.closes, index + 2)
                if close == len(self.closes):
                    return len(text)  # unterminated: nothing after it is a directive
                index = self.closes[close] + 2
            else:
                break
        return index

    def rest_of_line(self, index: int) -> str:
        """The logical line from `index` on, each comment a space (a block comment may
        carry the line past a newline, as it does for the preprocessor)."""
        text, parts = self.text, []
        while True:
            newline = text.find("\n", index)
            end = newline if newline >= 0 else len(text)
            opener = text.find("/*", index, end)
            line_comment = text.find("//", index, end)
            if opener < 0 or 0 <= line_comment < opener:
                parts.append(text[index:line_comment if line_comment >= 0 else end])
                return "".join(parts)
            parts.append(text[index:opener] + " ")
            close = bisect_left(self.closes, opener + 2)
            if close == len(self.closes):
                return "".join(parts)
            index = self.closes[close] + 2


def _variants(text: str) -> Iterator[_Variant]:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    for trigraphs in (False, True):
        phase1 = re.sub(r"\?\?([=/'()!<>-])", lambda m: _TRIGRAPHS[m.group(1)], text) if trigraphs else text
        if trigraphs and phase1 == text:
            continue
        lax = re.search(r"\\[ \t\f\v]+\n", phase1) is not None  # else both readings agree
        for splice in (r"\\\n", r"\\[ \t\f\v]*\n")[: 2 if lax else 1]:
            pieces, splices, length, last = [], [], 0, 0
            for match in re.finditer(splice, phase1):
                pieces.append(phase1[last:match.start()])
                length += match.start() - last
                splices.append(length)
                last = match.end()
            pieces.append(phase1[last:])
            yield _Variant("".join(pieces), splices)


_MARKER = re.compile(r'^# (\d+) "((?:[^"\\\n]|\\.)*)"', re.MULTILINE)


def marker_files(text: str) -> list[str]:
    """The files gcc's line markers in preprocessed text name, in order, without repeats."""
    names = (_unescape(m.group(2)) for m in _MARKER.finditer(text))
    return list(dict.fromkeys(n for n in names if n not in ("<built-in>", "<command-line>")))


def lines_of(text: str, name: str) -> Iterator[tuple[int, str]]:
    """(line in `name`, text) for each line of preprocessed text that comes from `name`."""
    current, line = None, 0
    for raw in text.split("\n"):
        if marker := _MARKER.match(raw):
            current, line = _unescape(marker.group(2)), int(marker.group(1))
            continue
        if current == name:
            yield line, raw
        line += 1


def origin(text: str, offset: int) -> int | None:
    """The kernel.cu line that preprocessed text at `offset` comes from, if it does."""
    before = text[:offset]
    markers = list(_MARKER.finditer(before))
    if not markers or _unescape(markers[-1].group(2)) != SOURCE_NAME:
        return None
    return int(markers[-1].group(1)) + before.count("\n", markers[-1].end()) - 1


def header_lines(output: str) -> list[str]:
    """The files gcc -H announces (". path", "!" and "x" for PCH), as it stacks each one."""
    return list(dict.fromkeys(m.group(1) for m in re.finditer(r"^(?:\.+|[!x]) (.+)$", output, re.MULTILINE)))


def make_dependencies(rule: str, target: str) -> list[str]:
    """The prerequisites of gcc's `-MD -MT target` make rule, unescaped as gcc escapes them."""
    body = rule.replace("\\\n", " ")
    if not body.startswith(target + ":"):
        return []
    body, names, current, i = body[len(target) + 1:], [], [], 0
    while i < len(body):
        char = body[i]
        if char == "\\":
            run = len(re.match(r"\\+", body[i:i + 4096]).group(0))
            following = body[i + run] if i + run < len(body) else ""
            if following in (" ", "\t"):  # 2n+1 backslashes: n of them, then a literal blank
                current.append("\\" * (run // 2) + (following if run % 2 else ""))
                if not run % 2:
                    names.append("".join(current))
                    current = []
                i += run + 1
                continue
            current.append("\\" * (run - 1) if following == "#" else "\\" * run)
            i += run
            continue
        if char == "$" and body[i + 1:i + 2] == "$":
            current.append("$")
            i += 2
            continue
        if char.isspace():
            if current:
                names.append("".join(current))
            current = []
        else:
            current.append(char)
        i += 1
    if current:
        names.append("".join(current))
    return [n for n in names if n]


def _line_start(text: str, line: int) -> int:
    index = 0
    for _ in range(line - 1):
        index = text.index("\n", index) + 1
    return index


def _violation(line: int | None, message: str) -> PolicyViolation:
    return PolicyViolation("source_policy", f"line {line}: {message}" if line else message)


def _include_line(source: str, path: str) -> int | None:
    """The kernel.cu line whose directive names `path`, when one does so verbatim."""
    for directive in scan_directives(source):
        if directive.name in ("include", "include_next", "import") and path in directive.rest:
            return directive.line
    return None


def _inside(path: str, roots: Sequence[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def _unescape(name: str) -> str:
    return codecs.escape_decode(name.encode("utf-8", "surrogateescape"))[0].decode("utf-8", "surrogateescape")


def _destringize(literal: str) -> str:
    return literal.replace('\\"', '"').replace("\\\\", "\\")


def _decode_ucn(name: str) -> str:
    return re.sub(r"\\u([0-9A-Fa-f]{4})|\\U([0-9A-Fa-f]{8})",
                  lambda m: chr(int(m.group(1) or m.group(2), 16)), name)


def _strip_comments(source: str) -> str:
    """Blank out comments but keep line numbers, so a launch in a comment is no violation."""
    def blank(match: re.Match) -> str:
        return re.sub(r"[^\n]", " ", match.group(0))

    # An unclosed /* runs to the end, in one match: retrying it at every /* is quadratic.
    return re.sub(r"//[^\n]*|/\*.*?(?:\*/|\Z)", blank, source, flags=re.DOTALL)
