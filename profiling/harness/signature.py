"""Each kernel's parameters, read from the PTX nvcc wrote, against what the plan passes.

A launch packs its arguments by the plan's kinds (device.py), not by the kernel's C
types: a `long n` parameter given a plain `n` (a 32-bit int) reads 4 unspecified bytes,
and an `int` given a tensor (an 8-byte pointer) is truncated. Nothing at launch time
notices, so the plan is checked here, once the source is compiled. PTX gives each
parameter's size and whether it is a float (`.param .f32`), but not whether an 8-byte
integer is a pointer or a `long long`: both are `.u64`, and both accept a tensor or an
`i64:` argument.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path

from .candidate import CandidateError, Launch

# What a plan argument is passed as, decided the way device._arg packs it.
POINTER, I64, I32, F32 = "pointer", "i64", "i32", "f32"
_PASSED = {POINTER: "a device pointer (8 bytes)", I64: "an 8-byte integer",
           I32: "a 4-byte integer", F32: "a float"}
_ACCEPTS = {"int8": {POINTER, I64}, "int4": {I32}, "f32": {F32}}

_ENTRY = re.compile(r"\.entry\s+([A-Za-z_$][\w$]*)\s*\(([^)]*)\)")
_TYPE = re.compile(r"\.([usbf])(8|16|32|64)\b")


def argument_kind(arg: str | int | float, buffers: Collection[str]) -> str:
    """POINTER, I64, I32 or F32: how the gate passes `arg` (see device.py's _arg)."""
    if isinstance(arg, float):
        return F32
    if isinstance(arg, str) and arg in buffers:
        return POINTER
    if isinstance(arg, str) and arg.startswith("f32:"):
        return F32
    if isinstance(arg, str) and arg.startswith("i64:"):
        return I64
    return I32


def kernel_params(ptx: Iterable[str]) -> dict[str, list[str]]:
    """Entry name -> its parameters as PTX types ("u64", "u32", "f32", "b8[16]", ...).

    Takes the PTX's lines (a file can be read lazily: only the .entry headers are kept)."""
    params: dict[str, list[str]] = {}
    header: list[str] | None = None
    for line in ptx:
        if header is None and ".entry" not in line:
            continue
        header = [*(header or []), line]
        text = "".join(header)
        if ")" not in text.split(".entry", 1)[1]:
            continue
        if entry := _ENTRY.search(text):
            params[entry.group(1)] = [_param_type(p) for p in entry.group(2).split(",") if p.strip()]
        header = None
    return params


def kernel_params_of_file(path: Path) -> dict[str, list[str]]:
    with path.open(encoding="utf-8", errors="replace") as ptx:
        return kernel_params(ptx)


def check_launches(launches: Sequence[Launch], params: Mapping[str, list[str] | None],
                   buffers: Collection[str]) -> None:
    """Raise CandidateError for the first launch whose arguments do not fit its kernel.
    A kernel whose parameters are unknown (None: compiled before they were recorded) is
    not checked."""
    for index, launch in enumerate(launches):
        taken = params.get(launch.kernel)
        if taken is None:
            continue
        where = f"launches[{index}] ({launch.kernel})"
        if len(launch.args) != len(taken):
            raise CandidateError(
                f"{where} passes {len(launch.args)} arguments, but {launch.kernel} takes "
                f"{len(taken)} ({', '.join(taken) or 'none'}): list one argument per parameter")
        for position, (arg, ptx_type) in enumerate(zip(launch.args, taken, strict=True)):
            kind = argument_kind(arg, buffers)
            if kind not in _ACCEPTS.get(_param_class(ptx_type), set()):
                raise CandidateError(
                    f"{where}: argument {position} ({arg!r}) is passed as {_PASSED[kind]}, but "
                    f"parameter {position} of {launch.kernel} is {_described(ptx_type)} "
                    f"(.param .{ptx_type}): {_fix(arg, kind, ptx_type)}")


def _param_type(declaration: str) -> str:
    match = _TYPE.search(declaration)
    if match is None:
        return declaration.split()[-1] if declaration.split() else "unknown"
    array = re.search(r"\[(\d+)\]\s*$", declaration.strip())
    return match.group(1) + match.group(2) + (f"[{array.group(1)}]" if array else "")


def _param_class(ptx_type: str) -> str:
    if "[" in ptx_type:
        return "aggregate"
    if ptx_type == "f32":
        return "f32"
    if ptx_type[0] in "usb" and ptx_type[1:] in ("64", "32"):
        return "int8" if ptx_type.endswith("64") else "int4"
    return "other"


def _described(ptx_type: str) -> str:
    kind = _param_class(ptx_type)
    if kind == "int8":
        return "an 8-byte integer or pointer"
    if kind == "int4":
        return "a 4-byte integer"
    if kind == "f32":
        return "a float"
    if kind == "aggregate":
        return f"a struct or array of {ptx_type.split('[')[1].rstrip(']')} bytes"
    if ptx_type == "f64":
        return "a double"
    return f"a {int(ptx_type[1:]) // 8}-byte value"


def _fix(arg: str | int | float, kind: str, ptx_type: str) -> str:
    expression = arg[4:] if isinstance(arg, str) and arg[:4] in ("i32:", "i64:", "f32:") else arg
    wanted = _param_class(ptx_type)
    if wanted == "int8":
        return (f"write 'i64:{expression}' for a 64-bit integer, or name a tensor or scratch "
                "buffer for a pointer")
    if wanted == "int4":
        if kind == POINTER:
            return "a tensor is passed as a pointer; give a size expression, or make the parameter a pointer"
        return f"write '{expression}' (a 32-bit int) or 'i32:{expression}'"
    if wanted == "f32":
        return "write 'f32:<number>' (a float argument is a literal number)"
    return ("the plan passes only pointers, 4- and 8-byte integers and floats: make the "
            "parameter a pointer, int, long long or float")
