"""Reading KernelBench modules as tasks: their sizes, tensors and small sizes (L0).

For each module the importer plans runs of the module itself (probe.py, in one child
process for a batch of modules): at its own sizes on torch's meta device (shapes, no
memory), at two other settings of its size constants (also meta) to tell which constant
each dimension follows, and at three settings of small odd and prime sizes on the CPU,
of which those that run, give finite outputs and give them again under another seed
are the task's L0 sizes. Constants of at most SMALL (a kernel size, a stride, a
dimension index, three colour channels) keep their values: they are the problem's
semantics, not its size.

Every tensor dimension is then written in the constants (`batch_size`, `dim1 * dim2`,
`2 * n`, `n - 1`, or a number) by fitting it across the runs that succeeded. What
cannot be a task says why: no Model, a module that does not run, randomness inside
forward, a dimension no constant explains, a dtype the harness does not hold.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .. import sandbox
from ..spec import DTYPES
from . import constants

SMALL = 16
# Small settings tried in turn: distinct odd primes (so that a mix-up of two sizes shows),
# then one value for all (for problems whose sizes must agree: a loss whose two inputs
# broadcast only when their lengths are equal).
L0_VALUES = ((3, 5, 7, 11, 13, 17, 19, 23, 29, 31), (17, 19, 23, 29, 31, 37, 41, 43, 47, 53),
             (33, 37, 41, 43, 47, 53, 59, 61, 67, 71), (7,), (33,),
             (8, 16, 24, 40, 48, 56, 72, 80, 88, 104), (32,))  # multiples: channels split in groups
FIT_PRIMES = (101, 103, 107, 109, 113, 127, 131, 137, 139, 149, 151, 157)
L0_WANTED = 3
CHILD_S_PER_RUN = 10.0  # a whole batch's time limit, per planned run (each run also has its own)


@dataclass
class Tensor:
    name: str
    dtype: str
    shape: list[str]  # each dimension in the size constants, or a number
    range: list[float] | None = None  # the least and greatest values get_inputs drew (at L0)
    # integer inputs drawn by torch.randint: [low, high) in the size constants
    bounds: list[str] | None = None


@dataclass
class Problem:
    name: str
    sizes: dict[str, int] = field(default_factory=dict)  # L1: the module's own constants
    l0_sizes: list[dict[str, int]] = field(default_factory=list)
    inputs: list[Tensor] = field(default_factory=list)
    outputs: list[Tensor] = field(default_factory=list)
    scalars: list[dict] = field(default_factory=list)  # non-tensor inputs of forward
    init: list[dict] = field(default_factory=list)  # get_init_inputs(), described
    parameters: int = 0
    weights: list[Tensor] = field(default_factory=list)  # the module's parameters, by their names
    flops: list[dict] = field(default_factory=list)  # {"sizes", "flops"} where FlopCounterMode ran
    notes: list[str] = field(default_factory=list)
    refused: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def plan_runs(name: str, source: str) -> tuple[dict[str, int], list[dict]]:
    """(the module's constants, the runs to ask the child for)."""
    values = constants.size_constants(source)
    varied = [c for c, v in values.items() if v > SMALL]
    runs = [{"problem": name, "label": "L1", "device": "meta", "values": values}]
    for label, scale in (("fit1", 1), ("fit2", 2)):
        fit = {**values, **{c: scale * values[c] + FIT_PRIMES[i % len(FIT_PRIMES)]
                            for i, c in enumerate(varied)}}
        runs.append({"problem": name, "label": label, "device": "meta", "values": fit})
    for index, small in enumerate(L0_VALUES):
        l0 = {**values, **{c: small[i % len(small)] for i, c in enumerate(varied)}}
        runs.append({"problem": name, "label": f"L0-{index}", "device": "cpu", "values": l0})
    for run in runs:
        run["source"] = constants.with_values(source, run["values"])
    return values, runs


def probe(runs: list[dict], workdir: Path) -> dict[tuple[str, str], dict]:
    """Each run's answer from one sandboxed child, keyed by (problem, label)."""
    request = workdir / "request.json"
    request.write_text(json.dumps({"runs": [{k: r[k] for k in ("problem", "label", "device", "source")}
                                            for r in runs]}))
    root = str(Path(__file__).resolve().parents[3])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    result = sandbox.run_isolated(
        [sys.executable, "-m", "profiling.harness.torchtask.probe", str(request)],
        time_limit_s=max(60.0, CHILD_S_PER_RUN * len(runs)), log_path=workdir / "probe.log", env=env)
    answers = {(m["problem"], m["label"]): m for m in result.messages if m.get("type") == "run"}
    for run in runs:
        if (run["problem"], run["label"]) not in answers:
            why = "timed out" if result.timed_out else (result.log_tail.strip().splitlines() or ["died"])[-1]
            answers[(run["problem"], run["label"])] = {"ok": False,
                                                       "error": f"the probe did not answer: {why}"}
    return answers


def read_problem(name: str, source: str, runs: list[dict], answers: dict) -> Problem:
    problem = Problem(name=name)
    try:
        defined = constants.defines(source)
    except constants.ModuleError as error:
        problem.refused = f"the module does not parse: {error}"
        return problem
    missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if n not in defined]
    if missing:
        problem.refused = f"the module defines no {', '.join(missing)} (KernelBench's format needs all three)"
        return problem
    problem.sizes = runs[0]["values"]
    done = [(run, answers[(name, run["label"])]) for run in runs]
    ok = [(run, found) for run, found in done if found.get("ok")]
    if not ok:
        problem.refused = f"the module does not run: {done[0][1].get('error') or done[-1][1].get('error')}"
        return problem
    if any(found.get("deterministic") is False for _, found in ok):
        problem.refused = ("forward is random (two calls on the same inputs differ): no reference to "
                           "check against")
        return problem
    l1 = answers[(name, "L1")]
    if not l1.get("ok") and "meta" not in (l1.get("error") or ""):
        problem.refused = f"the module does not run at its own sizes: {l1.get('error')}"
        return problem
    if not l1.get("ok"):  # an operation the meta device does not have (.item(), data-dependent shapes)
        problem.notes.append(f"at its own sizes on the meta device: {l1.get('error')}; shapes fitted from "
                             "the other runs")
    small = [(run, found) for run, found in ok if run["device"] == "cpu"]
    problem.l0_sizes = [run["values"] for run, found in small if found.get("finite", True)][:L0_WANTED]
    if not problem.l0_sizes:
        why = next((f.get("error") for r, f in done if r["device"] == "cpu" and not f.get("ok")),
                   "not finite")
        problem.refused = f"no small sizes run: {why}"
        return problem
    if not any(c > SMALL for c in problem.sizes.values()):
        problem.notes.append("no size constant above 16: L0 is the problem's own sizes")
    reference = ok[0][1]
    problem.init, problem.parameters = reference["init"], reference["parameters"]
    try:
        problem.inputs = _tensors("x", [run for run, _ in ok], [f["inputs"] for _, f in ok], small)
        problem.outputs = _tensors("out", [run for run, _ in ok], [f["outputs"] for _, f in ok], [])
        weights = [f.get("weights", []) for _, f in ok]
        problem.weights = _tensors("w", [run for run, _ in ok], weights, [], key="weights",
                                   names=[w["name"] for w in weights[0]])
    except ValueError as error:
        problem.refused = str(error)
        return problem
    problem.scalars = [v for v in reference["inputs"] if v["kind"] != "tensor"]
    problem.flops = [{"sizes": run["values"], "flops": found["flops"]}
                     for run, found in ok if "flops" in found]
    return problem


def _tensors(prefix: str, runs: list[dict], seen: list[list[dict]], small, *, key: str = "inputs",
             names: list[str] | None = None) -> list[Tensor]:
    counts = {len(items) for items in seen}
    if len(counts) != 1:
        raise ValueError(f"the number of {prefix} tensors changes with the sizes")
    out = []
    tensors = [i for i, item in enumerate(seen[0]) if item["kind"] == "tensor"]
    for position, index in enumerate(tensors):
        items = [items[index] for items in seen]
        dtype = items[0]["dtype"]
        if dtype not in DTYPES:
            raise ValueError(f"{prefix}{position} is {dtype}, which the harness does not hold "
                             f"({', '.join(DTYPES)})")
        ranks = {len(i["shape"]) for i in items}
        if len(ranks) != 1:
            raise ValueError(f"{prefix}{position}'s rank changes with the sizes")
        points = list(zip(runs, items, strict=True))
        shape = [fit_dimension([(run["values"], i["shape"][axis]) for run, i in points])
                 for axis in range(ranks.pop())]
        if None in shape:
            axis = shape.index(None)
            raise ValueError(f"{prefix}{position}'s dimension {axis} follows no size constant "
                             f"({[i['shape'][axis] for i in items]} at {[r['values'] for r in runs]})")
        ranges = [f[1][key][index].get("range") for f in small if f[1][key][index].get("range")]
        value_range = [min(r[0] for r in ranges), max(r[1] for r in ranges)] if ranges else None
        name = (names[index] if names else
                f"{prefix}{position}" if len(tensors) > 1 or prefix == "x" else prefix)
        out.append(Tensor(name, dtype, shape, value_range, _bounds(points)))
    return out


def _bounds(points: list[tuple[dict, dict]]) -> list[str] | None:
    """[low, high) of an integer input that torch.randint drew in every run, each fitted to
    the size constants (`[0, num_classes]`), or None."""
    if not all(item.get("bounds") for _, item in points):
        return None
    fitted = [fit_dimension([(run["values"], item["bounds"][end]) for run, item in points]) for end in (0, 1)]
    return None if None in fitted else fitted


def fit_dimension(points: list[tuple[dict[str, int], int]]) -> str | None:
    """A dimension as an expression of the constants, consistent at every point. One that
    is the same at every point is that number: only constants of at most SMALL could
    explain it, and they never vary (a kernel size of 3 is not `in_channels`)."""
    names = list(points[0][0])
    if len({dim for _, dim in points}) == 1:
        return str(points[0][1])

    def holds(expression) -> bool:
        return all(expression(values) == dim for values, dim in points)

    candidates = [(c, lambda v, c=c: v[c]) for c in names]
    candidates += [(f"{a} * {b}", lambda v, a=a, b=b: v[a] * v[b]) for a in names for b in names if a < b]
    values0, dim0 = points[0]
    for c in names:
        if values0[c] and dim0 % values0[c] == 0 and dim0 // values0[c] > 1:
            k = dim0 // values0[c]
            candidates.append((f"{k} * {c}", lambda v, c=c, k=k: k * v[c]))
        if values0[c] and dim0 > 0 and values0[c] // dim0 > 1:
            k = values0[c] // dim0
            candidates.append((f"{c} // {k}", lambda v, c=c, k=k: v[c] // k))
        if abs(dim0 - values0[c]) <= SMALL:
            k = dim0 - values0[c]
            candidates.append((f"{c} {'+' if k >= 0 else '-'} {abs(k)}", lambda v, c=c, k=k: v[c] + k))
    fixed = [(c, f) for c, f in candidates if holds(f)]
    if fixed:
        return fixed[0][0]
    return _affine(points, names)


def _affine(points: list[tuple[dict[str, int], int]], names: list[str]) -> str | None:
    """(p * c + q) // r for one constant c and small p, r: a window's output length
    ((length + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1 with the window's
    constants fixed) or a transposed convolution's ((length - 1) * stride + ...). Only
    over at least three distinct values of c, so that two points cannot fake a line."""
    for c in names:
        if len({values[c] for values, _ in points}) < 3:
            continue
        c0, d0 = points[0][0][c], points[0][1]
        for r in range(1, 9):
            for p in range(1, 9):
                for q in range(r * d0 - p * c0, r * d0 - p * c0 + r):
                    if all((p * values[c] + q) // r == dim for values, dim in points):
                        term = c if p == 1 else f"{p} * {c}"
                        shifted = term if q == 0 else f"{term} {'+' if q > 0 else '-'} {abs(q)}"
                        return shifted if r == 1 else f"({shifted}) // {r}"
    return None


def import_files(paths: list[Path], workdir: Path | None = None) -> list[Problem]:
    planned, runs = [], []
    for path in paths:
        source = path.read_text()
        try:
            _, own = plan_runs(path.stem, source)
        except constants.ModuleError:
            own = []
        planned.append((path.stem, source, own))
        runs += own
    with tempfile.TemporaryDirectory(prefix="optiml-torchtask-") as scratch:
        answers = probe(runs, Path(workdir or scratch)) if runs else {}
    return [read_problem(name, source, own, answers) for name, source, own in planned]
