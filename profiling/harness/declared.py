"""Declared tasks: a task defined by JSON data, so that a person can add one without Python.

    {"name": "double-relu", "description": "y = 2 max(x, 0)",
     "sizes": {"n": 1048576},
     "inputs": [{"name": "x", "dtype": "float32", "shape": ["n"]}],
     "outputs": [{"name": "y", "dtype": "float32", "shape": ["n"]}],
     "reference": {"y": "np.maximum(x, 0) * 2"},
     "tolerances": {"float32": {"atol": 0, "rtol": 0}},      optional, per dtype
     "l0_sizes": [{"n": 1}, {"n": 1031}],                      optional: generated
     "distributions": ["normal", "heavy_tailed"],              optional
     "flops": "n", "bytes": "8 * n"}                           optional

Shapes, flops and bytes are expressions over the sizes (expr.py); a reference is one
refexpr.py expression per output, computed in float64 and cast to the output's dtype.
An int32 input needs "range": [lo, hi], expressions for the half-open range its values
are drawn from. The name is a slug; the task is called "user-<slug>" so that it can
never shadow a suite task (the registry reserves the prefix), and one declared in the
app "user-<slug>.<owner's user id>" (owned_name), so that each owner's names are their
own. Bytes default to the inputs read once and the outputs written once; flops to 0, so
that a guess can never make a correct kernel look impossibly fast.

A declared task has no naive kernel: `naive_source` is empty and `naive_plan` is a
starting plan for the user's own kernel. Every refusal is a DefinitionError whose
message starts with the field it is about ("inputs[1].shape: ...").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from . import expr
from .definition import (  # noqa: F401 (the names callers use, from one place)
    DECLARED_DTYPES,
    IDENTIFIER,
    L0_MAX_ELEMENTS,
    MAX_DESCRIPTION,
    MAX_DIMS,
    MAX_INPUTS,
    MAX_L0,
    MAX_OUTPUTS,
    MAX_SIZE,
    MAX_SIZES,
    NAME_PATTERN,
    NAME_PREFIX,
    SLUG,
    SLUG_RULE,
    DeclaredTensor,
    DefinitionError,
    Parsed,
    Parser,
    is_declared_name,
    owned_name,
    slug_of,
    task_name,
)
from .jsonfile import write_json_atomically
from .refexpr import Expression, ExpressionRefused
from .spec import Arrays, Sizes, Task, TensorSpec


class ReferenceFailed(ValueError):
    """The reference gave an output that cannot be its output: a wrong shape, or values an
    int32 output cannot hold."""

    def __init__(self, output: str, message: str) -> None:
        super().__init__(f"reference.{output}: {message}")
        self.output, self.reason = output, message


def declare(data: Any) -> tuple[dict, Task]:
    """Validate a definition fully, its reference run at every small size: (canonical
    definition with the generated small sizes filled in, Task)."""
    parsed = Parser(data).parse()
    task = _build(parsed)
    _dry_run(task)
    return parsed.definition, task


def task_from_definition(data: Any) -> Task:
    """The Task of a stored definition; checked again, but its reference is not run."""
    return _build(Parser(data).parse())


def load_file(path: Path) -> Task:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise DefinitionError("definition", f"cannot read {path}: {error}") from None
    task = task_from_definition(data)
    if Path(path).stem != task.name:
        raise DefinitionError("name", f"{path} defines {task.name!r}; the file must be {task.name}.json")
    return task


def write_definition(definition: dict, directory: str | Path) -> Path:
    """Write `<name>.json` into `directory` atomically. Writing the same definition again
    is harmless; a different one under an existing name is refused, because measurements
    are stored under the task's name."""
    parsed = Parser(definition).parse()
    canonical, name = parsed.definition, parsed.definition["name"]
    path = Path(directory) / f"{name}.json"
    if path.exists():
        try:
            same = json.loads(path.read_text()) == canonical
        except (OSError, json.JSONDecodeError):
            same = False
        if not same:
            raise DefinitionError("name", f"a different task named {name!r} is already in {directory}")
        return path
    write_json_atomically(path, canonical)
    return path


class _Reference:
    """The task's reference: each output's expression in float64, cast to its dtype."""

    def __init__(self, expressions: dict[str, Expression], outputs: tuple[TensorSpec, ...]) -> None:
        self.expressions, self.outputs = expressions, outputs

    def __call__(self, inputs: Arrays, sizes: Sizes) -> Arrays:
        results = {}
        for spec in self.outputs:
            value = self.expressions[spec.name].evaluate(inputs, sizes)
            shape = spec.resolve_shape(sizes)
            if value.shape != shape:
                raise ReferenceFailed(spec.name, f"gives shape {value.shape}, the output is {shape}")
            results[spec.name] = _cast(value, spec)
        return results


def _cast(value: np.ndarray, spec: TensorSpec) -> np.ndarray:
    if spec.dtype != "int32":
        return value.astype(spec.numpy_dtype())
    info = np.iinfo(np.int32)
    if not (
        np.isfinite(value).all()
        and (value == np.rint(value)).all()
        and (value >= info.min).all()
        and (value <= info.max).all()
    ):
        raise ReferenceFailed(
            spec.name, "gives values that are not whole numbers within int32, which an int32 output needs"
        )
    return value.astype(np.int32)


def _build(parsed: Parsed) -> Task:
    inputs = tuple(t.spec() for t in parsed.inputs)
    outputs = tuple(t.spec() for t in parsed.outputs)
    flops, moved = parsed.flops, parsed.bytes
    specs = inputs + outputs
    return Task(
        name=parsed.definition["name"],
        description=parsed.definition["description"],
        sizes=dict(parsed.sizes),
        l0_sizes=tuple(dict(s) for s in parsed.definition["l0_sizes"]),
        inputs=inputs,
        outputs=outputs,
        reference=_Reference(dict(parsed.references), outputs),
        flops=lambda s: float(expr.evaluate(flops, s)),
        bytes=(lambda s: float(expr.evaluate(moved, s)))
        if moved is not None
        else (lambda s: float(sum(t.nbytes(s) for t in specs))),
        naive_source="",
        naive_plan=_starting_plan(parsed.definition["name"], parsed.inputs, parsed.outputs, parsed.sizes),
        tolerances=parsed.tolerances,
        distributions=tuple(parsed.definition["distributions"]),
    )


def _starting_plan(name: str, inputs: list[DeclaredTensor], outputs: list[DeclaredTensor],
                   sizes: dict) -> dict:
    """One launch, a thread per element of the first output, every tensor and size passed."""
    elements = " * ".join(
        str(d) if IDENTIFIER.fullmatch(str(d)) or isinstance(d, int) else f"({d})" for d in outputs[0].shape
    )
    return {
        "launches": [
            {
                "kernel": _kernel_name(name),
                "grid": [f"cdiv({elements}, BLOCK)"],
                "block": ["BLOCK"],
                "shared_bytes": 0,
                "args": [t.name for t in (*inputs, *outputs)] + list(sizes),
            }
        ],
        "scratch": [],
        "tunables": {"BLOCK": 256},
    }


def _kernel_name(name: str) -> str:
    kernel = slug_of(name).replace("-", "_")
    return f"kernel_{kernel}" if kernel[0].isdigit() else kernel


def _dry_run(task: Task) -> None:
    """The reference at every small size and distribution: it runs, and gives numbers."""
    for index, sizes in enumerate(task.l0_sizes):
        for distribution in task.distributions:
            rng = np.random.default_rng(index)
            inputs = {t.name: t.make(rng, sizes, distribution) for t in task.inputs}
            try:
                outputs = task.reference(inputs, sizes)
            except ExpressionRefused as error:
                raise DefinitionError("reference", f"at l0_sizes {sizes}: {error}") from None
            except ReferenceFailed as error:
                raise DefinitionError(
                    f"reference.{error.output}",
                    f"at sizes {sizes} with {distribution} inputs it {error.reason}",
                ) from None
            for name, values in outputs.items():
                if not np.isfinite(values).all():
                    raise DefinitionError(
                        f"reference.{name}",
                        f"gives NaN or infinity at sizes {sizes} with "
                        f"{distribution} inputs (a log or sqrt of a negative number, a "
                        "division by zero, an overflow?)",
                    )
