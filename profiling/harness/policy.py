"""What untrusted source and compiler options may contain, checked before nvcc runs.

The gate loads a cubin and launches the kernels a plan names on its own stream; host code
in the source never runs. Two doors remain, and these checks close them:
- the compiler itself: `#include "/etc/passwd"` would echo a file into the error log, and
  options such as `-I`, `-o` or `--keep` reach the file system;
- device-side launches (dynamic parallelism): work started from a kernel on another
  stream, or fire-and-forget, would escape the timing events. They need `-rdc=true` and
  cudadevrt, which the option allow-list refuses, and the source check names them.
"""

from __future__ import annotations

import re

# Headers from the CUDA toolkit and the C++ standard library are fine; a path is not.
_INCLUDE = re.compile(r"^\s*#\s*include\s*(.*)$", re.MULTILINE)
_SYSTEM_HEADER = re.compile(r"<[A-Za-z0-9_][A-Za-z0-9_./+-]*>")
_FORBIDDEN_DIRECTIVES = re.compile(r"^\s*#\s*(embed|include_next|import|line)\b", re.MULTILINE)
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


class PolicyViolation(ValueError):
    def __init__(self, guard: str, message: str):
        super().__init__(message)
        self.guard = guard


def check_source(source: str) -> None:
    if len(source.encode()) > MAX_SOURCE_BYTES:
        raise PolicyViolation("source_policy", f"source is larger than {MAX_SOURCE_BYTES} bytes")
    if "\x00" in source:
        raise PolicyViolation("source_policy", "source contains a NUL byte")
    for match in _INCLUDE.finditer(source):
        target = match.group(1).split("//")[0].strip()
        if not _SYSTEM_HEADER.fullmatch(target) or ".." in target:
            line = source.count("\n", 0, match.start()) + 1
            raise PolicyViolation(
                "source_policy",
                f"line {line}: only toolkit headers like <cuda_fp16.h> may be included, not {target}",
            )
    directive = _FORBIDDEN_DIRECTIVES.search(source)
    if directive:
        line = source.count("\n", 0, directive.start()) + 1
        raise PolicyViolation("source_policy", f"line {line}: #{directive.group(1)} is not allowed")
    code = _strip_comments(source)
    for token, why in _FOREIGN_WORK.items():
        index = code.find(token)
        if index >= 0:
            line = code.count("\n", 0, index) + 1
            raise PolicyViolation("source_policy", f"line {line}: {token}: {why}")


def check_compile_options(options: tuple[str, ...] | list[str]) -> None:
    for option in options:
        if not any(p.fullmatch(option) for p in _ALLOWED_OPTIONS):
            raise PolicyViolation(
                "compile_policy",
                f"compiler option {option!r} is not allowed (allowed: -O0..3, --use_fast_math, "
                "-ftz/-prec-div/-prec-sqrt/-fmad=, --maxrregcount=N, -lineinfo, -DNAME=VALUE, "
                "-std=c++17, --extra-device-vectorization)",
            )


def _strip_comments(source: str) -> str:
    """Blank out comments but keep line numbers, so a launch in a comment is no violation."""
    def blank(match: re.Match) -> str:
        return re.sub(r"[^\n]", " ", match.group(0))

    return re.sub(r"//[^\n]*|/\*.*?\*/", blank, source, flags=re.DOTALL)
