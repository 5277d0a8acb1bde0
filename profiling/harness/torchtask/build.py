"""A task from a KernelBench module: the importer's reading, then the module run at L0.

    results = build_tasks([Path("19_ReLU.py"), ...])   # a TorchTask or a NotATask each

1. The importer (importer.py, one sandboxed child for the batch) reads sizes, tensors,
   parameters, FLOPs and small sizes, or says why the module is not a task.
2. `describe` names what a kernel gets (task.py's docstring) and refuses dtypes the gate
   cannot draw or refresh; the task's tensors at its own sizes must fit the GPU memory
   budget.
3. `check_at_l0` runs the module in the host's reference child (child.py) at every L0
   size: on get_inputs()'s own draw in float64 and in float32, which must agree within
   the tolerance (else float64 changed what the module computes, or it is ill-conditioned
   even at small sizes: refused, saying where); once more with its buffers changed (a
   forward that reads them is refused: a kernel is given parameters, not buffers); and
   through the Task's own reference and allowance on the gate's distributions, keeping
   those on which the outputs stay finite (normal is required: the timed runs refresh
   float inputs from it). A module that cannot run in float64 runs in float32, said so.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .. import expr
from ..definition import IDENTIFIER
from ..inputs import make_inputs
from . import rule, vendor
from .child import ModuleError, shared
from .importer import Problem, import_files
from .task import NotATask, TorchTask, to_task

# The task's tensors at its own sizes may take at most this much: the gate's worker holds
# them once (F), the reference child on the GPU a float64 copy (2F) and a float32 run (F);
# ~4F = 69 GB within an H100's 80 GB.
GPU_MEMORY_BUDGET_BYTES = 16 << 30
CHECK_REQUEST_S = 60.0  # one L0 run of the module (small sizes), the child's start included
CHECK_SEED = 3203  # the L0 checks' inputs: fixed, so a refusal can be replayed
INT32 = (-(2**31), 2**31 - 1)


def build_tasks(paths: list[Path], *, memory_budget_bytes: int = GPU_MEMORY_BUDGET_BYTES
                ) -> list[TorchTask | NotATask]:
    problems = import_files(paths)
    results: list[TorchTask | NotATask] = []
    for path, problem in zip(paths, problems, strict=True):
        try:
            results.append(build_task(problem, path.read_text(), memory_budget_bytes=memory_budget_bytes))
        except NotATask as refusal:
            results.append(refusal)
    return results


def build_task(problem: Problem, source: str, *, memory_budget_bytes: int = GPU_MEMORY_BUDGET_BYTES
               ) -> TorchTask:
    if problem.refused:
        raise NotATask(problem.name, problem.refused)
    d = describe(problem, source)
    footprint = to_task(d).footprint_bytes(d.sizes)
    if footprint > memory_budget_bytes:
        raise NotATask(d.name, f"its tensors take {footprint / 2**30:.2f} GiB at its own sizes, over the GPU "
                               f"memory budget of {memory_budget_bytes / 2**30:.2f} GiB (the gate's buffers, "
                               "and the reference's float64 copy and float32 run beside them)")
    check_at_l0(d)
    return d


def describe(problem: Problem, source: str) -> TorchTask:
    """The task's description from the importer's reading, before anything runs."""
    name, notes = problem.name, list(problem.notes)
    inputs = [_input(name, t, problem.sizes, notes) for t in problem.inputs]
    outputs = [{"name": t.name, "dtype": t.dtype, "shape": t.shape, "rank0": not t.shape}
               for t in problem.outputs]
    taken = {t["name"] for t in inputs + outputs} | set(problem.sizes)
    weights = []
    for index, w in enumerate(problem.weights):
        if w.dtype != "float32":
            raise NotATask(name, f"the parameter {w.name} is {w.dtype}: the gate draws and refreshes float "
                                 "tensors as float32 only")
        weights.append({"name": _kernel_name(w.name, index, taken), "parameter": w.name, "dtype": w.dtype,
                        "shape": w.shape})
    for t in inputs + outputs:
        if t.get("rank0"):
            notes.append(f"{t['name']} is a 0-d tensor in the module; the kernel's is of shape (1,)")
    return TorchTask(name=name, source=source, sizes=dict(problem.sizes),
                     l0_sizes=[dict(s) for s in problem.l0_sizes], inputs=inputs, weights=weights,
                     outputs=outputs, scalars=problem.scalars, init=problem.init, flops=problem.flops,
                     vendor=vendor.calls(name, problem.sizes), notes=notes)


def _input(name: str, t, sizes: dict, notes: list[str]) -> dict:
    found = {"name": t.name, "dtype": t.dtype, "module_dtype": t.dtype, "shape": t.shape,
             "rank0": not t.shape, "own_range": t.range}
    if t.dtype.startswith("float"):
        if t.dtype != "float32":
            raise NotATask(name, f"the input {t.name} is {t.dtype}: the gate draws and refreshes float "
                                 "inputs as float32 only")
        return found
    bounds = t.bounds
    if bounds is None and t.range is not None:
        bounds = [str(int(t.range[0])), str(int(t.range[1]) + 1)]
        notes.append(f"{t.name}: not drawn by torch.randint in get_inputs(); drawn in [{bounds[0]}, "
                     f"{bounds[1]}), the values get_inputs() gave at the small sizes")
    if bounds is None:
        raise NotATask(name, f"the integer input {t.name} has no known range (get_inputs() drew no values "
                             "at the small sizes)")
    low, high = (expr.evaluate_int(b, sizes) for b in bounds)
    if low < INT32[0] or high - 1 > INT32[1]:
        raise NotATask(name, f"the input {t.name} takes values in [{low}, {high}), beyond int32: the gate "
                             "refreshes integer inputs as int32 only")
    if t.dtype == "int64":
        notes.append(f"{t.name}: int64 in the module, int32 for the kernel (values in [{bounds[0]}, "
                     f"{bounds[1]}); the gate refreshes int32; the reference casts them back)")
    return {**found, "dtype": "int32", "bounds": bounds}


def _kernel_name(parameter: str, index: int, taken: set[str]) -> str:
    """`conv.weight` -> `conv_weight`; `w_` before one that clashes or is not an identifier."""
    base = parameter.replace(".", "_")
    for name in (base, f"w_{base}", *(f"w{index}_{k}" for k in range(len(taken) + 1))):
        if IDENTIFIER.fullmatch(name) and name not in taken:
            taken.add(name)
            return name
    raise AssertionError("unreachable: one of len(taken) + 1 names is free")


def check_at_l0(d: TorchTask) -> None:
    """Run the module at every L0 size (see the module's docstring); refuses with NotATask,
    else fills in d.reference_dtype, d.distributions, d.cross_check and d.notes."""
    task, host = to_task(d), shared()

    def run(sizes: dict, compute: str, seed: int, **options) -> list[np.ndarray]:
        return host.run(d.source, sizes, [], compute=compute, own_seed=seed, time_limit_s=CHECK_REQUEST_S,
                        **options)

    for index, sizes in enumerate(d.l0_sizes):
        seed = CHECK_SEED + index
        try:
            wide = run(sizes, d.reference_dtype, seed)
        except ModuleError as error:
            if d.reference_dtype != "float64" or index:
                why = f"at L0 {sizes} the module fails in {d.reference_dtype}: {error}"
                raise NotATask(d.name, why) from None
            d.notes.append(f"the module does not run in float64 ({error}); its reference is float32")
            d.reference_dtype = "float32"
            wide = run(sizes, "float32", seed)
        narrow = run(sizes, "float32", seed)
        _cross_check(d, sizes, wide, narrow)
        if index == 0:
            changed = run(sizes, d.reference_dtype, seed, perturb_buffers=True)
            if not all(np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
                       for a, b in zip(wide, changed, strict=True)):
                raise NotATask(d.name, "forward reads the module's buffers (running statistics in eval "
                                       "mode?): a kernel is given the parameters, not the buffers")
        for distribution in list(d.distributions):
            _check_distribution(d, task, sizes, seed, distribution)


def _cross_check(d: TorchTask, sizes: dict, wide: list[np.ndarray], narrow: list[np.ndarray]) -> None:
    if len(wide) != len(d.outputs):
        raise NotATask(d.name, f"at L0 {sizes} forward gives {len(wide)} outputs, {len(d.outputs)} elsewhere")
    worst = []
    for o, a, b in zip(d.outputs, wide, narrow, strict=True):
        if not np.issubdtype(a.dtype, np.floating):
            continue
        why = rule.disagreement(o["name"], o["dtype"], a, b)
        if why is not None:
            raise NotATask(d.name, f"at L0 {sizes}, on get_inputs()'s own draw, the module in "
                                   f"{d.reference_dtype} and in float32 disagree beyond the tolerance: {why}")
        worst.append(f"{o['name']} {rule.worst_error(a, b):.2g}")
    d.cross_check.append(f"L0 {sizes}: {d.reference_dtype} and float32 agree on get_inputs()'s own draw "
                         f"(max |ref32 - ref|: {', '.join(worst) or 'integer outputs, equal'})")


def _check_distribution(d: TorchTask, task, sizes: dict, seed: int, distribution: str) -> None:
    inputs = make_inputs(task, sizes, seed, distribution)
    try:
        reference = task.reference(inputs, sizes)
        task.allowance(inputs, reference, sizes)
    except (ModuleError, ValueError) as error:
        why = f"at L0 {sizes} on {distribution} inputs the reference fails: {error}"
        raise NotATask(d.name, why) from None
    finite = all(np.isfinite(v).all() for v in reference.values() if np.issubdtype(v.dtype, np.floating))
    if finite:
        return
    if distribution == "normal":
        raise NotATask(d.name, f"at L0 {sizes} on normal inputs the module gives NaN or infinity (a log or "
                               "sqrt of a negative number?): the gate's timed runs refresh float inputs "
                               "from a normal distribution")
    d.distributions.remove(distribution)
    d.notes.append(f"no {distribution} inputs: at L0 {sizes} the module gives NaN or infinity on them")
