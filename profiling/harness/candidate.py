"""The candidate format: CUDA source + launch plan + compile options + tunables.

    {
      "source": "extern \"C\" __global__ void relu(...) {...}",
      "launches": [
        {"kernel": "relu", "grid": ["cdiv(n, BLOCK)"], "block": ["BLOCK"],
         "shared_bytes": 0, "args": ["x", "y", "n"]}
      ],
      "scratch": [{"name": "partial", "dtype": "float32", "count": "cdiv(n, BLOCK)"}],
      "compile_options": ["-O3"],
      "tunables": {"BLOCK": 256}
    }

Launches run in order on one stream. `grid`, `block` and `shared_bytes` are
expressions over the task's sizes and the tunables. An argument names a tensor (input,
output or scratch: passed as a device pointer), or is an expression over sizes and
tunables (passed as a 32-bit int), or is typed explicitly: "i64:<expr>", "f32:<number>".
Tunables are also defined for the compiler as -DNAME=value. Kernels must be
`extern "C"` so the plan can name them.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from . import expr
from .spec import DTYPES


class CandidateError(ValueError):
    """A malformed candidate or plan; the message says which field and why."""


@dataclass(frozen=True)
class Launch:
    kernel: str
    grid: tuple[str | int, ...]
    block: tuple[str | int, ...]
    args: tuple[str | int | float, ...]
    shared_bytes: str | int = 0


@dataclass(frozen=True)
class Scratch:
    name: str
    dtype: str
    count: str | int


@dataclass(frozen=True)
class Candidate:
    source: str
    launches: tuple[Launch, ...]
    scratch: tuple[Scratch, ...] = ()
    compile_options: tuple[str, ...] = ()
    tunables: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "launches": [
                {**asdict(launch), "grid": list(launch.grid), "block": list(launch.block),
                 "args": list(launch.args)}
                for launch in self.launches
            ],
            "scratch": [asdict(s) for s in self.scratch],
            "compile_options": list(self.compile_options),
            "tunables": dict(self.tunables),
        }

    def plan_dict(self) -> dict[str, Any]:
        plan = self.to_dict()
        del plan["source"]
        return plan

    def content_hash(self) -> str:
        """Same kernel, same plan, same options => same hash, whatever the JSON layout."""
        canonical = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Candidate:
        if not isinstance(data, dict):
            raise CandidateError("a candidate must be a JSON object")
        unknown = set(data) - {"source", "launches", "scratch", "compile_options", "tunables"}
        if unknown:
            raise CandidateError(f"unknown candidate fields: {', '.join(sorted(unknown))}")
        source = data.get("source")
        if not isinstance(source, str) or not source.strip():
            raise CandidateError("'source' must be non-empty CUDA source text")
        launches = data.get("launches")
        if not isinstance(launches, list) or not launches:
            raise CandidateError("'launches' must be a non-empty list")
        tunables = data.get("tunables", {}) or {}
        if not isinstance(tunables, dict):
            raise CandidateError("'tunables' must be an object of NAME: integer")
        for name, value in tunables.items():
            if not _IDENTIFIER.fullmatch(str(name)) or isinstance(value, bool) or not isinstance(
                value, int
            ):
                raise CandidateError(f"tunable {name!r} must be an identifier with an integer value")
        options = data.get("compile_options", []) or []
        if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
            raise CandidateError("'compile_options' must be a list of strings")
        if not isinstance(data.get("scratch") or [], list):
            raise CandidateError("'scratch' must be a list of buffers")
        return cls(
            source=source,
            launches=tuple(_parse_launch(i, item) for i, item in enumerate(launches)),
            scratch=tuple(_parse_scratch(i, item) for i, item in enumerate(data.get("scratch") or [])),
            compile_options=tuple(options),
            tunables={str(k): int(v) for k, v in tunables.items()},
        )

    @classmethod
    def from_source_and_plan(cls, source: str, plan: dict[str, Any]) -> Candidate:
        if "source" in plan:
            raise CandidateError("the plan must not carry 'source'; it comes from the .cu file")
        return cls.from_dict({**plan, "source": source})


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _dims(where: str, value: Any) -> tuple[str | int, ...]:
    if isinstance(value, str | int) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list) or not 1 <= len(value) <= 3:
        raise CandidateError(f"{where} must be 1 to 3 expressions")
    for dim in value:
        if isinstance(dim, bool) or not isinstance(dim, str | int):
            raise CandidateError(f"{where} holds {dim!r}, not an expression")
        _readable(where, dim)
    return tuple(value)


def _readable(where: str, expression: str | int | float) -> None:
    """Syntax errors and numbers written otherwise than numerals.py says now, with the
    field's name, not at launch."""
    try:
        expr.names_in(expression)
    except expr.ExpressionError as error:
        raise CandidateError(f"{where}: {error}") from None


def _parse_launch(index: int, item: Any) -> Launch:
    where = f"launches[{index}]"
    if not isinstance(item, dict):
        raise CandidateError(f"{where} must be an object")
    unknown = set(item) - {"kernel", "grid", "block", "args", "shared_bytes"}
    if unknown:
        raise CandidateError(f"{where} has unknown fields: {', '.join(sorted(unknown))}")
    kernel = item.get("kernel")
    if not isinstance(kernel, str) or not _IDENTIFIER.fullmatch(kernel):
        raise CandidateError(f"{where}.kernel must name an extern \"C\" kernel")
    args = item.get("args", [])
    if not isinstance(args, list):
        raise CandidateError(f"{where}.args must be a list")
    for arg in args:
        if isinstance(arg, bool) or not isinstance(arg, str | int | float):
            raise CandidateError(f"{where}.args holds {arg!r}: use a name, an expression or a number")
    shared = item.get("shared_bytes", 0)
    if isinstance(shared, bool) or not isinstance(shared, str | int):
        raise CandidateError(f"{where}.shared_bytes must be an expression")
    _readable(f"{where}.shared_bytes", shared)
    return Launch(
        kernel=kernel,
        grid=_dims(f"{where}.grid", item.get("grid")),
        block=_dims(f"{where}.block", item.get("block")),
        args=tuple(args),
        shared_bytes=shared,
    )


def _parse_scratch(index: int, item: Any) -> Scratch:
    where = f"scratch[{index}]"
    if not isinstance(item, dict) or set(item) != {"name", "dtype", "count"}:
        raise CandidateError(f"{where} must be an object with name, dtype and count")
    if not _IDENTIFIER.fullmatch(str(item["name"])):
        raise CandidateError(f"{where}.name must be an identifier")
    if item["dtype"] not in DTYPES:
        raise CandidateError(f"{where}.dtype must be one of {', '.join(DTYPES)}")
    return Scratch(name=item["name"], dtype=item["dtype"], count=item["count"])
