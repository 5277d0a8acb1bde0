"""What a task is: sizes, tensors, input generators, a reference, tolerances, roofline.

A task is plain data plus a few functions. The harness never needs to know a task's
name: adding one means writing a module under `profiling/harness/tasks/` (or a
directory named by OPTIML_TASK_PATH) that defines `TASK = Task(...)`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from . import expr

Sizes = Mapping[str, int]
Arrays = dict[str, np.ndarray]

DTYPES = {
    "float32": np.float32,
    "float16": np.float16,
    "float64": np.float64,
    "int32": np.int32,
    "int64": np.int64,
}
DISTRIBUTIONS = ("normal", "heavy_tailed", "uniform")


@dataclass(frozen=True)
class Tolerance:
    """Elementwise |out - ref| <= atol + rtol * |ref|, as numpy.isclose."""

    atol: float
    rtol: float


# fp32 results of reductions differ from a float64 reference by rounding that grows
# with the reduction length; these defaults admit that and reject fp16 accumulation.
DEFAULT_TOLERANCES = {
    "float32": Tolerance(atol=1e-4, rtol=1e-4),
    "float16": Tolerance(atol=1e-2, rtol=1e-2),
    "int32": Tolerance(atol=0, rtol=0),
    "int64": Tolerance(atol=0, rtol=0),
}


def generate_float(
    rng: np.random.Generator, shape: tuple[int, ...], distribution: str, dtype: type
) -> np.ndarray:
    """Default float generator: standard normal, Student-t (3 dof, scaled) or uniform."""
    if distribution == "normal":
        return rng.standard_normal(shape, dtype=np.float32).astype(dtype, copy=False)
    if distribution == "heavy_tailed":
        # Student-t with 3 degrees of freedom times 4: rare values past +-40 test that a
        # kernel subtracts the maximum before exponentiating and does not overflow.
        # t = Z / sqrt(V / 3) with V ~ chi2(3) = 2 Gamma(1.5); drawn in fp32 because
        # numpy's standard_t works in float64 and is ~10x slower at 2**28 elements.
        z = rng.standard_normal(shape, dtype=np.float32)
        v = rng.standard_gamma(1.5, size=shape, dtype=np.float32)
        v *= np.float32(2.0 / 3.0)
        np.sqrt(v, out=v)
        np.maximum(v, np.float32(1e-12), out=v)
        z /= v
        z *= np.float32(4.0)
        return z.astype(dtype, copy=False)
    if distribution == "uniform":
        return rng.uniform(-1.0, 1.0, size=shape).astype(dtype)
    raise ValueError(f"unknown distribution {distribution!r}; known: {DISTRIBUTIONS}")


@dataclass(frozen=True)
class TensorSpec:
    """One kernel argument that lives in device memory.

    `shape` holds expressions over the task's sizes. For inputs, `generate` makes the
    values (default: `generate_float`); `refresh` says how the GPU may re-randomise the
    tensor between timed runs: "normal", or "int:<lo expr>:<hi expr>" for integers in
    [lo, hi).
    """

    name: str
    dtype: str
    shape: tuple[str | int, ...]
    generate: Callable[[np.random.Generator, tuple[int, ...], str, Sizes], np.ndarray] | None = (
        None
    )
    refresh: str = "normal"

    def resolve_shape(self, sizes: Sizes) -> tuple[int, ...]:
        return tuple(expr.evaluate_int(dim, sizes) for dim in self.shape)

    def numpy_dtype(self) -> np.dtype:
        return np.dtype(DTYPES[self.dtype])

    def nbytes(self, sizes: Sizes) -> int:
        return int(np.prod(self.resolve_shape(sizes), dtype=np.int64)) * self.numpy_dtype().itemsize

    def make(self, rng: np.random.Generator, sizes: Sizes, distribution: str) -> np.ndarray:
        shape = self.resolve_shape(sizes)
        if self.generate is not None:
            values = self.generate(rng, shape, distribution, sizes)
        else:
            values = generate_float(rng, shape, distribution, DTYPES[self.dtype])
        values = np.ascontiguousarray(values, dtype=DTYPES[self.dtype])
        if values.shape != shape:
            raise ValueError(f"generator for {self.name} made {values.shape}, expected {shape}")
        return values


@dataclass(frozen=True)
class Mismatch:
    """Why an output does not match its reference, in numbers a person can check."""

    output: str
    message: str
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0
    bad_elements: int = 0
    first_bad_index: tuple[int, ...] | None = None


@dataclass(frozen=True)
class VendorReference:
    """The time a user gets without us (torch/cuBLAS/cuDNN on the H200), for speedups."""

    time_ms: float
    what: str


@dataclass(frozen=True)
class Task:
    name: str
    description: str
    sizes: dict[str, int]  # L1: the full size that is timed
    l0_sizes: tuple[dict[str, int], ...]  # small, odd and prime sizes, edge cases
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    reference: Callable[[Arrays, Sizes], Arrays]
    flops: Callable[[Sizes], float]
    bytes: Callable[[Sizes], float]  # compulsory DRAM traffic: inputs read once, outputs written once
    naive_source: str  # a first attempt as someone would write it
    naive_plan: dict  # its launch plan (see candidate.py)
    tolerances: dict[str, Tolerance] = field(default_factory=lambda: dict(DEFAULT_TOLERANCES))
    distributions: tuple[str, ...] = ("normal", "heavy_tailed")
    # Optional custom comparison for outputs that are not elementwise-unique (top-k
    # indices under ties, say). Returns None when the outputs are acceptable.
    compare: Callable[[Arrays, Arrays, Arrays, Sizes], Mismatch | None] | None = None
    # Or, for outputs checked elementwise against an error bound that depends on the data:
    # how far each element of each output may be from the reference (name -> array or
    # number), from the inputs and the reference alone, never from what a candidate wrote.
    # So it is worked out once per seed, kept beside the reference in the input cache
    # (inputs.py: Expected.allowed), and not again for every candidate of a search
    # (self_attention's costs more than its reference). `allowance_why` says how, in the
    # mismatch's message. A task has `compare` or `allowance`, not both.
    allowance: Callable[[Arrays, Arrays, Sizes], dict[str, np.ndarray | float]] | None = None
    allowance_why: str = ""
    # The reference (and the allowance) are written against the array API, so that the
    # gate may compute them with torch on the GPU, in a process of their own, for the
    # timed runs' spot checks; cross-checked against the host first (gpuref.py).
    reference_on_gpu: bool = False
    # And its L1 checks are judged in that process (a torchtask: the module is the same
    # torch code on the host and the GPU, and its float64 forward on the host costs
    # minutes at KernelBench's sizes): the child draws the L1 inputs itself from the
    # worker's seeds and compares the candidate's outputs with its reference there, so
    # no input and no reference crosses between the processes; it decides only once its
    # references agreed with the host's at every L0 shape (gpuref.py, drawn.py).
    l1_in_reference_child: bool = False
    vendor: VendorReference | None = None
    # The naive kernel's median on the H200 at `sizes` (bench/results/2026-11-29-h200-
    # suite.json): the scale of one launch, so the gate can stop a candidate that takes
    # many times longer in seconds instead of at its whole time limit (worker.py).
    naive_ms: float | None = None
    # The fastest arithmetic a correct kernel may use, for the physics floor:
    # "fp32" allows TF32 tensor cores only if the tolerance would accept them.
    math: str = "fp32"

    def __post_init__(self) -> None:
        if self.compare is not None and self.allowance is not None:
            raise ValueError(f"task {self.name}: give compare or allowance, not both")
        if self.l1_in_reference_child and not (self.reference_on_gpu and self.allowance is not None):
            raise ValueError(f"task {self.name}: L1 checks judged in the reference child need a reference "
                             "on the GPU and an allowance (what the child compares with)")

    def tolerance_for(self, dtype: str) -> Tolerance:
        return self.tolerances.get(dtype, DEFAULT_TOLERANCES[dtype])

    def comparison(self) -> Callable[[Arrays, Arrays, Arrays, Sizes], Mismatch | None] | None:
        """The custom comparison the gate runs (None: the elementwise tolerance): `compare`,
        or each output against the allowance, the one kept with the reference when it was
        (`expected.allowed`), else worked out now."""
        if self.allowance is None:
            return self.compare
        return partial(_within_allowance, self)

    def all_tensors(self) -> tuple[TensorSpec, ...]:
        return self.inputs + self.outputs

    def footprint_bytes(self, sizes: Sizes) -> int:
        return sum(t.nbytes(sizes) for t in self.all_tensors())


def _within_allowance(task: Task, outputs: Arrays, expected: Arrays, inputs: Arrays,
                      sizes: Sizes) -> Mismatch | None:
    from .tasks._common import check_within  # the tasks' helpers import this module

    allowed = getattr(expected, "allowed", None)
    if allowed is None:
        allowed = task.allowance(inputs, expected, sizes)  # type: ignore[misc]
    for t in task.outputs:
        wrong = check_within(t.name, outputs[t.name], expected[t.name], allowed[t.name], task.allowance_why)
        if wrong is not None:
            return wrong
    return None
