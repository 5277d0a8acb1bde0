"""Reading a declared task's JSON definition (see declared.py for the format): every
field checked, each refusal a DefinitionError that starts with the field it is about;
shapes, the reference's shape and its work checked at the full size and at every small
size; small sizes generated when none are given.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import expr
from .refexpr import MAX_ELEMENTS, Expression, ExpressionRefused, Limits, TooLarge
from .spec import DEFAULT_TOLERANCES, DISTRIBUTIONS, Sizes, TensorSpec, Tolerance

FORMAT = 1
NAME_PREFIX = "user-"
SLUG = re.compile(r"[a-z0-9][a-z0-9-]{0,47}")
# A task declared in the app is named for its owner too, `user-<slug>.<owner's user id>`,
# so that no one learns whether another user declared a slug: each owner's names are
# their own (issue 34, part 7). Files on the task path may go without it.
OWNER = re.compile(r"\.([0-9]{1,19})")
SLUG_RULE = ("a slug: lowercase letters, digits and '-', at most 48, e.g. double-relu "
             "(the task is called user-<slug>.<your user number>)")
IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,31}")
RESERVED = {"np", "cdiv", "min", "max", "ceil", "floor"}  # names expressions already use
# A size's or a tensor's name as a JSON Schema pattern (the API's schema documents it):
# an IDENTIFIER that is not RESERVED, as _identifier checks.
NAME_PATTERN = rf"^(?!(?:{'|'.join(sorted(RESERVED))})$){IDENTIFIER.pattern}$"
DECLARED_DTYPES = ("float32", "int32")  # those the GPU can re-randomise between timed runs
FIELDS = {
    "format",
    "name",
    "description",
    "sizes",
    "l0_sizes",
    "inputs",
    "outputs",
    "reference",
    "tolerances",
    "distributions",
    "flops",
    "bytes",
}
MAX_SIZES, MAX_INPUTS, MAX_OUTPUTS, MAX_DIMS, MAX_L0 = 8, 8, 4, 6, 8
MAX_SIZE = 2**31 - 1  # sizes reach kernels as 32-bit ints
MAX_DESCRIPTION = 500
# Each small (L0) size has its reference computed when a task is declared (in a web
# request) and on every check: 8 MiB per float64 tensor, 32 MiB per intermediate.
L0_MAX_ELEMENTS = 2**20
L0_LIMITS = Limits(elements=2**22, matmul_macs=2**30)
# 1 and primes: odd sizes catch kernels that assume multiples of a block or a vector width.
L0_LADDER = (1, 3, 7, 17, 31, 131, 257, 1031, 4099, 65537)


class DefinitionError(ValueError):
    """A task definition that is refused; `field` is the top-level key it is about."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.field = re.split(r"[.\[]", path, maxsplit=1)[0]


class _TooLarge(DefinitionError):
    """Too many elements at these sizes: smaller sizes may do."""


def task_name(slug: str) -> str:
    return slug if slug.startswith(NAME_PREFIX) else NAME_PREFIX + slug


def owned_name(slug: Any, owner: int) -> str:
    """The name of `owner`'s task `slug` (with or without the prefix): user-<slug>.<owner>.
    Anything but a slug is refused, another owner's number included."""
    if not isinstance(slug, str) or not SLUG.fullmatch(slug.removeprefix(NAME_PREFIX)):
        raise DefinitionError("name", SLUG_RULE)
    return f"{task_name(slug)}.{owner}"


def slug_of(name: str) -> str:
    """The slug of a declared task's name, without its prefix or its owner."""
    slug = name.removeprefix(NAME_PREFIX)
    owner = re.search(rf"{OWNER.pattern}$", slug)
    return slug[: owner.start()] if owner else slug


def is_declared_name(name: str) -> bool:
    return name.startswith(NAME_PREFIX)


@dataclass(frozen=True)
class DeclaredTensor:
    path: str
    name: str
    dtype: str
    shape: tuple[str | int, ...]
    range: tuple[str | int, str | int] | None = None

    def canonical(self) -> dict:
        data = {"name": self.name, "dtype": self.dtype, "shape": list(self.shape)}
        return data | ({"range": list(self.range)} if self.range else {})

    def spec(self) -> TensorSpec:
        if self.range is None:
            return TensorSpec(self.name, self.dtype, self.shape)
        lo, hi = self.range
        return TensorSpec(
            self.name, self.dtype, self.shape, generate=_integers(lo, hi), refresh=f"int:{lo}:{hi}"
        )


def _integers(lo: str | int, hi: str | int):
    def generate(
        rng: np.random.Generator, shape: tuple[int, ...], distribution: str, sizes: Sizes
    ) -> np.ndarray:
        return rng.integers(
            expr.evaluate_int(lo, sizes), expr.evaluate_int(hi, sizes), size=shape, dtype=np.int32
        )

    return generate


@dataclass(frozen=True)
class Parsed:
    """A checked definition: its canonical JSON (small sizes filled in) and its parts."""

    definition: dict
    sizes: dict[str, int]
    inputs: list[DeclaredTensor]
    outputs: list[DeclaredTensor]
    references: dict[str, Expression]
    flops: str | int
    bytes: str | int | None
    tolerances: dict[str, Tolerance]


class Parser:
    """Reads a definition: `parse()` checks every field and returns the parts, or raises
    DefinitionError naming the field at fault."""

    def __init__(self, data: Any) -> None:
        if not isinstance(data, Mapping):
            raise DefinitionError("definition", "a task definition is a JSON object")
        unknown = sorted(set(data) - FIELDS)
        if unknown:
            raise DefinitionError(
                unknown[0], f"unknown field; known: {', '.join(sorted(FIELDS - {'format'}))}"
            )
        if data.get("format", FORMAT) != FORMAT:
            raise DefinitionError("format", f"this harness reads format {FORMAT}")
        self.data = data

    def parse(self) -> Parsed:
        data = self.data
        name = self._name(data.get("name"))
        description = _text(data.get("description", ""), "description", MAX_DESCRIPTION)
        self.sizes = self._sizes(data.get("sizes"))
        self.inputs = self._tensors(data.get("inputs"), "inputs", MAX_INPUTS)
        self.outputs = self._tensors(data.get("outputs"), "outputs", MAX_OUTPUTS)
        self._unique_names()
        self.references = self._references(data.get("reference"))
        self.flops = _formula(data.get("flops", 0), "flops", self.sizes)
        self.bytes = (
            _formula(data.get("bytes"), "bytes", self.sizes) if data.get("bytes") is not None else None
        )
        distributions = self._distributions(data.get("distributions", ["normal", "heavy_tailed"]))
        tolerances = self._tolerances(data.get("tolerances", {}))
        self._check_at(self.sizes, "sizes", MAX_ELEMENTS)
        l0_sizes = self._l0_sizes(data.get("l0_sizes"))
        definition = {
            "format": FORMAT,
            "name": name,
            "description": description,
            "sizes": self.sizes,
            "l0_sizes": l0_sizes,
            "inputs": [t.canonical() for t in self.inputs],
            "outputs": [t.canonical() for t in self.outputs],
            "reference": {o.name: self.references[o.name].source for o in self.outputs},
            "tolerances": {k: {"atol": t.atol, "rtol": t.rtol} for k, t in tolerances.items()},
            "distributions": list(distributions),
            "flops": self.flops,
        }
        definition |= {"bytes": self.bytes} if self.bytes is not None else {}
        return Parsed(
            definition,
            self.sizes,
            self.inputs,
            self.outputs,
            self.references,
            self.flops,
            self.bytes,
            tolerances,
        )

    # -- fields --------------------------------------------------------------------------
    def _name(self, value: Any) -> str:
        if not isinstance(value, str) or not SLUG.fullmatch(slug_of(task_name(value))):
            raise DefinitionError("name", SLUG_RULE)
        return task_name(value)

    def _sizes(self, value: Any) -> dict[str, int]:
        if not isinstance(value, Mapping) or not value:
            raise DefinitionError("sizes", 'an object of size names and whole numbers, e.g. {"n": 1048576}')
        if len(value) > MAX_SIZES:
            raise DefinitionError("sizes", f"at most {MAX_SIZES} sizes")
        for name, size in value.items():
            _identifier(name, f"sizes.{name}")
            if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= MAX_SIZE:
                raise DefinitionError(f"sizes.{name}", f"a whole number from 1 to {MAX_SIZE}, not {size!r}")
        return dict(value)

    def _tensors(self, value: Any, field: str, most: int) -> list[DeclaredTensor]:
        if not isinstance(value, list) or not 1 <= len(value) <= most:
            raise DefinitionError(field, f"a list of 1 to {most} tensors")
        return [self._tensor(item, f"{field}[{i}]", field == "inputs") for i, item in enumerate(value)]

    def _tensor(self, item: Any, path: str, is_input: bool) -> DeclaredTensor:
        if not isinstance(item, Mapping):
            raise DefinitionError(path, "an object with name, dtype and shape")
        unknown = sorted(set(item) - {"name", "dtype", "shape", *(["range"] if is_input else [])})
        if unknown:
            raise DefinitionError(f"{path}.{unknown[0]}", "unknown field")
        name = _identifier(item.get("name"), f"{path}.name")
        dtype = item.get("dtype", "float32")
        if dtype not in DECLARED_DTYPES:
            raise DefinitionError(f"{path}.dtype", f"one of {', '.join(DECLARED_DTYPES)}, not {dtype!r}")
        shape = item.get("shape")
        if not isinstance(shape, list) or not 1 <= len(shape) <= MAX_DIMS:
            raise DefinitionError(f"{path}.shape", f'a list of 1 to {MAX_DIMS} dimensions, e.g. ["M", "N"]')
        shape = tuple(_formula(dim, f"{path}.shape", self.sizes) for dim in shape)
        bounds = item.get("range")
        if dtype == "int32" and is_input:
            if not isinstance(bounds, list) or len(bounds) != 2:
                raise DefinitionError(
                    f"{path}.range", "an int32 input needs [lo, hi]: values are drawn from lo to hi - 1"
                )
            bounds = tuple(_formula(b, f"{path}.range", self.sizes) for b in bounds)
        elif bounds is not None:
            raise DefinitionError(f"{path}.range", "only int32 inputs take a range")
        return DeclaredTensor(path, name, dtype, shape, bounds)

    def _unique_names(self) -> None:
        seen = set(self.sizes)
        for tensor in (*self.inputs, *self.outputs):
            if tensor.name in seen:
                raise DefinitionError(
                    f"{tensor.path}.name", f"{tensor.name!r} is already a size or tensor name"
                )
            seen.add(tensor.name)

    def _references(self, value: Any) -> dict[str, Expression]:
        names = [o.name for o in self.outputs]
        if not isinstance(value, Mapping) or set(value) != set(names):
            raise DefinitionError(
                "reference", f"one expression per output: {{{', '.join(map(repr, names))}: ...}}"
            )
        references = {}
        for name in names:
            try:
                references[name] = Expression(
                    value[name], arrays=[t.name for t in self.inputs], sizes=self.sizes
                )
            except ExpressionRefused as error:
                raise DefinitionError(f"reference.{name}", str(error)) from None
        return references

    def _distributions(self, value: Any) -> tuple[str, ...]:
        if not isinstance(value, list) or not value or any(d not in DISTRIBUTIONS for d in value):
            raise DefinitionError("distributions", f"a non-empty list of {', '.join(DISTRIBUTIONS)}")
        return tuple(dict.fromkeys(value))

    def _tolerances(self, value: Any) -> dict[str, Tolerance]:
        if not isinstance(value, Mapping):
            raise DefinitionError("tolerances", 'an object: {"float32": {"atol": 1e-5, "rtol": 1e-5}}')
        tolerances = {d: DEFAULT_TOLERANCES[d] for d in sorted({t.dtype for t in self.outputs})}
        for dtype, given in value.items():
            if dtype not in DECLARED_DTYPES:
                raise DefinitionError(
                    f"tolerances.{dtype}", f"tolerances are for {', '.join(DECLARED_DTYPES)}"
                )
            if not isinstance(given, Mapping) or set(given) - {"atol", "rtol"}:
                raise DefinitionError(f"tolerances.{dtype}", "an object with atol and rtol")
            default = DEFAULT_TOLERANCES[dtype]
            atol = _tolerance(given.get("atol", default.atol), f"tolerances.{dtype}.atol")
            rtol = _tolerance(given.get("rtol", default.rtol), f"tolerances.{dtype}.rtol")
            tolerances[dtype] = Tolerance(atol=atol, rtol=rtol)
        return tolerances

    def _l0_sizes(self, value: Any) -> list[dict[str, int]]:
        if value is None or value == []:
            return self._generated_l0()
        if not isinstance(value, list) or len(value) > MAX_L0:
            raise DefinitionError("l0_sizes", f"a list of at most {MAX_L0} objects, each giving every size")
        for index, sizes in enumerate(value):
            path = f"l0_sizes[{index}]"
            if not isinstance(sizes, Mapping) or set(sizes) != set(self.sizes):
                raise DefinitionError(path, f"give exactly the sizes {', '.join(self.sizes)}")
            for name, size in sizes.items():
                if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= MAX_SIZE:
                    raise DefinitionError(f"{path}.{name}", f"a whole number from 1 to {MAX_SIZE}")
            self._check_at(dict(sizes), path, L0_MAX_ELEMENTS)
        return [dict(sizes) for sizes in value]

    def _generated_l0(self) -> list[dict[str, int]]:
        names, full = list(self.sizes), self.sizes
        wanted = [
            {n: 1 for n in names},
            {n: 17 for n in names},
            {n: 131 for n in names},
            {n: 3 for n in names} | {names[-1]: L0_LADDER[-1]},
            {n: 7 for n in names} | {names[0]: L0_LADDER[-1]},
        ]
        found: list[dict[str, int]] = []
        for sizes in wanted:
            # The ladder value at or below the full size, so that every small size stays odd.
            sizes = self._shrunk(
                {n: max(s for s in L0_LADDER if s <= min(v, full[n])) for n, v in sizes.items()}
            )
            if sizes is not None and sizes not in found:
                found.append(sizes)
        if not found:
            raise DefinitionError("l0_sizes", "no small sizes give valid shapes here: please give l0_sizes")
        return found

    def _shrunk(self, sizes: dict[str, int]) -> dict[str, int] | None:
        """`sizes`, the largest stepped down the ladder until every tensor is small."""
        while True:
            try:
                self._check_at(sizes, "l0_sizes", L0_MAX_ELEMENTS)
                return sizes
            except _TooLarge:
                largest = max(sizes, key=sizes.get)
                if sizes[largest] == 1:
                    return None
            except DefinitionError:
                return None
                sizes = sizes | {largest: max(s for s in L0_LADDER if s < sizes[largest])}

    def _check_at(self, sizes: dict[str, int], where: str, limit: int) -> None:
        """Shapes, the reference's shape and work, flops and bytes, all at these sizes."""
        at = f"at {where} {sizes}"
        limits = Limits() if limit == MAX_ELEMENTS else L0_LIMITS
        shapes = {}
        for tensor in (*self.inputs, *self.outputs):
            shape = tuple(_whole(dim, sizes, f"{tensor.path}.shape", at) for dim in tensor.shape)
            if min(shape) < 1:
                raise DefinitionError(
                    f"{tensor.path}.shape", f"{at} it is {shape}: every dimension needs >= 1"
                )
            if math.prod(shape) > limit:
                shown = tuple(d if d < 10**12 else f"about 10**{len(str(d)) - 1}" for d in shape)
                raise _TooLarge(f"{tensor.path}.shape", f"{at} it is {shown}: at most {limit} elements")
            shapes[tensor.name] = shape
            if tensor.range is not None:
                lo, hi = (_whole(b, sizes, f"{tensor.path}.range", at) for b in tensor.range)
                if not -(2**31) <= lo < hi <= 2**31 - 1:
                    raise DefinitionError(
                        f"{tensor.path}.range", f"{at} it is [{lo}, {hi}): needs lo < hi, both within int32"
                    )
        for output in self.outputs:
            try:
                shape = self.references[output.name].shape_of(shapes, sizes, limits)
            except TooLarge as error:
                raise _TooLarge(f"reference.{output.name}", f"{at}: {error}") from None
            except ExpressionRefused as error:
                raise DefinitionError(f"reference.{output.name}", f"{at}: {error}") from None
            if shape != shapes[output.name]:
                raise DefinitionError(
                    f"reference.{output.name}",
                    f"{at} it gives shape {shape}, but {output.name} is {shapes[output.name]}",
                )
        for field, formula in (("flops", self.flops), ("bytes", self.bytes)):
            if formula is not None:
                try:
                    value = float(expr.evaluate(formula, sizes))
                except (expr.ExpressionError, OverflowError) as error:
                    raise DefinitionError(field, f"{at}: {error}") from None
                if not math.isfinite(value) or value < 0:
                    raise DefinitionError(field, f"{at} it is {value}: needs a finite number >= 0")


def _identifier(value: Any, path: str) -> str:
    if not isinstance(value, str) or not IDENTIFIER.fullmatch(value) or value in RESERVED:
        raise DefinitionError(
            path,
            f"a name like x or row_sum (a letter, then letters, digits or _; "
            f"not {', '.join(sorted(RESERVED))}), not {value!r}",
        )
    return value


def _formula(value: Any, path: str, sizes: Mapping[str, int]) -> str | int:
    """A whole number, or an expression over the sizes that parses."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if not isinstance(value, str) or not value.strip() or len(value) > 400:
        raise DefinitionError(path, f"a number or an expression over the sizes, not {value!r}")
    try:
        unknown = expr.names_in(value) - set(sizes)
    except expr.ExpressionError as error:
        raise DefinitionError(path, str(error)) from None
    if unknown:
        raise DefinitionError(
            path, f"unknown name {sorted(unknown)[0]!r} in {value!r} (sizes: {', '.join(sizes)})"
        )
    return value.strip()


def _whole(formula: str | int, sizes: Mapping[str, int], path: str, at: str) -> int:
    try:
        return expr.evaluate_int(formula, sizes)
    except expr.ExpressionError as error:
        raise DefinitionError(path, f"{at}: {error}") from None


def _text(value: Any, path: str, most: int) -> str:
    if not isinstance(value, str) or len(value) > most or "\n" in value.strip():
        raise DefinitionError(path, f"one line of text, at most {most} characters")
    return value.strip()


def _tolerance(value: Any, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise DefinitionError(path, f"a finite number >= 0, not {value!r}")
    return float(value)
