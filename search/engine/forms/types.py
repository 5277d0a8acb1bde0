"""What a kernel computes, apart from how it is scheduled: family forms with holes.

A form is plain data. Its holes keep the kernel's own math as CUDA text (the statements
one element or one row runs, the reductions with their operators and identities), and
its sizes as the kernel's own parameters, so a skeleton can emit the same math under
another schedule without understanding it. A lift that cannot be proved is a `Refusal`
that says why, never a guess.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MAP = "elementwise_map"
ROWS = "row_map_reduce"
FULL_REDUCE = "full_reduction"
CONTRACTION = "batched_contraction"
WINDOW = "window_reduction"
PERMUTATION = "permutation"
SCAN = "row_scan"
# The families the architecture names that no lift recognises yet; a refusal names one
# only when the kernel was recognised as it and refused for a stated reason.
FAMILIES = (MAP, ROWS, FULL_REDUCE, "arg_reduce", "column_reduction", PERMUTATION, CONTRACTION, WINDOW,
            SCAN)

# Reduction operators: identity per type, and whether fp32 combination may reorder them
# (sum and product reorder with rounding error inside the task's tolerance; max/min are exact).
IDENTITIES = {
    ("sum", "float"): "0.0f", ("sum", "double"): "0.0", ("sum", "int"): "0",
    ("max", "float"): "-INFINITY", ("min", "float"): "INFINITY",
    ("prod", "float"): "1.0f", ("prod", "double"): "1.0",
}
EXACT_UNDER_REORDER = {"sum": False, "prod": False, "max": True, "min": True}


@dataclass(frozen=True)
class Refusal:
    """No form: the kernel does not fit a family (or not provably); `reason` says where."""

    reason: str
    family: str | None = None  # the family it looked like, when it looked like one

    def to_dict(self) -> dict[str, Any]:
        return {"refused": self.reason, "family": self.family}


@dataclass(frozen=True)
class Axis:
    """One dimension of the threads' index space: the kernel's variable and its bound."""

    name: str  # the kernel's own index variable (`idx`, `row`, `col`)
    ctype: str  # its declared type
    bound: str  # CUDA expression over the kernel's parameters and uniform locals


# Arg-reductions: (value, index) pairs; `>` keeps the first index of the maximum, `>=`
# the last (the loop visits indices in increasing order), `<` and `<=` the same for the
# minimum. The sentinel index is one no element has, and loses every tie.
ARG_OPS = {">": ("argmax", "first"), ">=": ("argmax", "last"), "<": ("argmin", "first"),
           "<=": ("argmin", "last")}
SENTINELS = {("first", "int"): "2147483647", ("first", "long long"): "9223372036854775807LL",
             ("first", "long"): "9223372036854775807L", ("last", "int"): "-1",
             ("last", "long long"): "-1LL", ("last", "long"): "-1L"}


@dataclass(frozen=True)
class Reduction:
    """An accumulator of a row loop: `acc` combined with `op` over the loop's iterations;
    for an arg-reduction ("argmax"/"argmin"), `index` is the accumulator of the position,
    set to the loop's counter together with the value, and `compare` the test written
    (`>`, `>=`, `<`, `<=`), which decides the tie rule (ARG_OPS)."""

    name: str
    op: str  # "sum", "max", "min", "argmax" or "argmin"
    ctype: str
    index: str = ""
    index_ctype: str = ""
    compare: str = ""

    @property
    def identity(self) -> str:
        if self.op in ("argmax", "argmin"):
            return IDENTITIES[("max" if self.op == "argmax" else "min", self.ctype)]
        return IDENTITIES[(self.op, self.ctype)]

    @property
    def sentinel(self) -> str:
        return SENTINELS[(ARG_OPS[self.compare][1], self.index_ctype)]


@dataclass(frozen=True)
class Uniform:
    """Statements between a row's loops: every thread of the row runs them alike, except
    that a statement that writes memory (`mean[row] = s / N;`) is written by one."""

    text: str
    writes: bool


@dataclass(frozen=True)
class LoopHole:
    """A loop over the row, flattened: `variables` nest outermost first, each 0..bound-1
    (a single loop may start elsewhere: `start`, arithmetic on names and numbers)."""

    variables: tuple[Axis, ...]
    body: str  # the statements of one iteration, the kernel's own text
    reductions: tuple[Reduction, ...]
    writes_memory: bool
    start: str = "0"


@dataclass(frozen=True)
class Form:
    """A kernel lifted to its family.

    - elementwise map: `space` is the element index space (one axis, or rows and columns
      of a 2-D grid, slowest first); `body` what one element runs.
    - row map-reduce: `space` is the row axis (or the axes of a 2-D/3-D grid, slowest
      first, flattened into rows by the skeletons); `steps` alternate uniform statements
      (text, every thread of a row runs them alike) and `LoopHole`s over the row.
    - contraction: `coordinates` are (batch..., rows, columns) of the outputs (the space's
      axes or the digits of a flat index); `factors`, `reduction`, `accumulator`,
      `epilogue` as in contraction.py, `body` the work of an output before its loop.
    - full reduction: `space` is the element axis, `body` computes one element's term,
      `total` is the term's expression and `into` the output it is added to.
    """

    family: str
    kernel: str  # the kernel's name (kept: the plan names it)
    signature: str  # `extern "C" __global__ void name(params)`, the kernel's own
    params: tuple[str, ...]
    prelude: str  # uniform statements before the index space (sizes worked out)
    space: tuple[Axis, ...]
    body: str = ""
    steps: tuple[Uniform | LoopHole, ...] = ()
    total: str = ""
    into: str = ""
    finish: str = "optiml_sum"  # full reduction: what is added to `into` from a block's sum
    reads: tuple[str, ...] = ()  # pointer parameters read
    writes: tuple[str, ...] = ()  # pointer parameters written
    direct: bool = False  # map: every access is p[index] of the one axis (vectorisable)
    # contraction: the two factors (one of row and k, one of k and column), the reduction
    # axis, the accumulator, and the epilogue after the loop (`body`: the work before it)
    factors: tuple[str, ...] = ()
    reduction: Axis | None = None
    setups: tuple[str, ...] = ()  # per factor: the locals its load recomputes (a nest's digits)
    accumulator: str = ""
    epilogue: str = ""
    # contraction: the output's coordinates (batch..., row, column), each with its extent;
    # the statements declaring decomposed index variables from them (radix.py); and
    # (bound, divisor) pairs that must divide at every size
    coordinates: tuple[Axis, ...] = ()
    merged: tuple[tuple[str, tuple[Axis, ...]], ...] = ()  # a tile index: the coordinates it holds
    rebuild: str = ""
    covers: tuple[tuple[str, str], ...] = ()
    helpers: str = ""  # __device__ functions the body calls, kept as written
    # plan arguments of parameters the lift added (planes.py: a grid plane's extent)
    extra_args: tuple[str, ...] = ()
    # the kernel's plan arguments where the lift rewrote them (two_pass.py: the partials'
    # buffer is the output); empty: the plan's last launch's
    launch_args: tuple[str, ...] = ()
    # permutation (permutes.py): the coordinates the reads and the write walk, the value
    # written (`value`, into `into`) and where, in coordinates and parameters alone
    along: tuple[str, str] = ()
    value: str = ""
    written_at: str = ""
    # scan (scans.py): `steps` as a row's, with one loop whose one reduction is the running
    # value; `total` its term, `body` the statements the term needs, `reverse` a loop from
    # the row's end
    reverse: bool = False
    notes: tuple[str, ...] = field(default=())

    def holes(self) -> dict[str, Any]:
        """The math, for a person: what each element or row computes."""
        if self.family == ROWS:
            loops = [s for s in self.steps if isinstance(s, LoopHole)]
            return {"reductions": [f"{r.name}: {r.op} ({r.ctype}, identity {r.identity})"
                                   + (f", its index in {r.index} ({ARG_OPS[r.compare][1]} on ties)"
                                      if r.index else "")
                                   for loop in loops for r in loop.reductions],
                    "loops": len(loops), "rows": " * ".join(a.bound for a in self.space)}
        if self.family == SCAN:
            loop = next(s for s in self.steps if isinstance(s, LoopHole))
            r = loop.reductions[0]
            return {"running": f"{r.name}: {r.op} ({r.ctype}, identity {r.identity})", "term": self.total,
                    "order": "from the row's end" if self.reverse else "from the row's start",
                    "length": loop.variables[0].bound, "rows": " * ".join(a.bound for a in self.space)}
        if self.family == CONTRACTION:
            over = self.reduction.bound if self.reduction else ""
            return {"product": " * ".join(self.factors), "over": over,
                    "into": self.accumulator, "epilogue": self.epilogue.strip(),
                    "outputs": [f"{c.name} < {c.bound}" for c in self.coordinates]}
        if self.family == FULL_REDUCE:
            return {"term": self.total, "into": self.into, "elements": self.space[0].bound}
        if self.family == PERMUTATION:
            return {"value": self.value, "into": f"{self.into}[{self.written_at}]",
                    "reads_along": self.along[0], "writes_along": self.along[1],
                    "coordinates": [f"{c.name} < {c.bound}" for c in self.coordinates]}
        if self.family == WINDOW:
            return {"output": self.body.strip(), "rows": self.coordinates[0].bound,
                    "columns": self.coordinates[1].bound, "planes": list(self.setups)}
        return {"element": self.body.strip(), "space": [a.bound for a in self.space]}

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, "kernel": self.kernel, "holes": self.holes(),
                "space": [a.__dict__ for a in self.space], "reads": list(self.reads),
                "writes": list(self.writes), "notes": list(self.notes)}
