"""A KernelBench module as a gate Task: the description (plain JSON data) and the Task.

`build.py` makes a `TorchTask` (running the module, in children); `to_task` turns one
into a spec.Task without running anything, so a task directory can hold it and every
gate process can load it (`save` writes `<name>.torchtask` and a two-line `<name>.py`
that the registry imports: `TASK = load(...)`).

What a kernel is given: the module's forward inputs (`x0`, `x1`, ... as get_inputs()
returns them, in order) and then **its parameters, as inputs named after them**
(`conv.weight` -> `conv_weight`), and it writes the forward's outputs (`out`, or `out0`,
`out1`, ...). The reference loads the parameters into the module (functional_call), so a
kernel and the reference compute the same function of the same numbers; the gate draws
them fresh for every seed like any input. Buffers (running statistics) stay the
module's own: a module whose forward reads them is refused at build time.

Inputs: float32 from the gate's generator (normal, heavy-tailed: those on which the
module's outputs stay finite; the timed runs refresh them from a normal distribution);
integer inputs within the bounds torch.randint drew them from in get_inputs()
(`[0, num_classes)`), given to the kernel as int32 when the module's are int64 (the
gate's refresh draws int32; the reference casts them back). A 0-d tensor is a (1,) one.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .. import expr
from ..declared import _starting_plan  # the plan a task without a naive kernel starts from
from ..spec import Sizes, Task, TensorSpec
from . import rule

FORMAT = 1
SUFFIX = ".torchtask"  # not .json: the registry reads *.json in a task directory as declared tasks


class NotATask(ValueError):
    """What cannot be a task, and why, in a sentence for a person (never a traceback)."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"{name}: not a task: {reason}")
        self.name, self.reason = name, reason


@dataclass
class TorchTask:
    name: str
    source: str
    sizes: dict[str, int]
    l0_sizes: list[dict[str, int]]
    inputs: list[dict]  # {name, dtype, module_dtype, shape, bounds?, own_range?, rank0?}
    weights: list[dict]  # {name, parameter, dtype, shape}
    outputs: list[dict]  # {name, dtype, shape, rank0?}
    scalars: list[dict] = field(default_factory=list)  # forward's non-tensor arguments
    init: list[dict] = field(default_factory=list)  # get_init_inputs(), described
    reference_dtype: str = "float64"
    distributions: list[str] = field(default_factory=lambda: ["normal", "heavy_tailed"])
    flops: list[dict] = field(default_factory=list)  # {sizes, flops}: FlopCounterMode's counts
    vendor: list[dict] = field(default_factory=list)  # vendor.calls(): what to time on a GPU
    cross_check: list[str] = field(default_factory=list)  # the L0 float64/float32 agreement
    notes: list[str] = field(default_factory=list)
    format: int = FORMAT

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> TorchTask:
        if data.get("format") != FORMAT:
            raise NotATask(str(data.get("name")), f"a task description of format {data.get('format')!r}, "
                                                  f"this harness reads {FORMAT}")
        return cls(**data)


def _shape(dims: list) -> tuple:
    return tuple(int(d) if isinstance(d, int) or str(d).isdigit() else str(d) for d in dims) or (1,)


class IntegerDraw:
    """An integer input's generator: uniform in [low, high), expressions over the sizes."""

    # What the GPU's integer refresh draws in the input's refresh range (`int:low:high`),
    # so the gate may draw its L1 values there (draws.integer_bounds).
    draws_like_refresh = True

    def __init__(self, low: str, high: str) -> None:
        self.low, self.high = low, high

    def __call__(self, rng: np.random.Generator, shape: tuple, distribution: str, sizes: Sizes) -> np.ndarray:
        low, high = expr.evaluate_int(self.low, sizes), expr.evaluate_int(self.high, sizes)
        return rng.integers(low, max(high, low + 1), size=shape, dtype=np.int64)


class FlopTable:
    """FLOPs where FlopCounterMode counted them (the task's own sizes); 0 elsewhere, so
    that the physics floor there is the bytes alone: lower, never wrong."""

    def __init__(self, rows: list[dict]) -> None:
        self.rows = {tuple(sorted(r["sizes"].items())): float(r["flops"]) for r in rows}

    def __call__(self, sizes: Sizes) -> float:
        return self.rows.get(tuple(sorted(dict(sizes).items())), 0.0)


def _is_torch(value) -> bool:
    return type(value).__module__.startswith("torch")


class ModuleReference:
    """Task.reference and Task.allowance: the module itself, in the reference dtype (and
    in float32 for the allowance's rounding term). Given numpy arrays (the worker, the
    task builder) it runs in the host's reference child (child.py); given torch tensors
    (gpuref's child on a GPU host, a process of its own) it runs right there, on their
    device."""

    def __init__(self, description: TorchTask) -> None:
        self.d = description
        self._runner = None

    def __call__(self, inputs: dict, sizes: Sizes) -> dict:
        return self.outputs(inputs, sizes, self.d.reference_dtype)

    def allowance(self, inputs: dict, expected: dict, sizes: Sizes) -> dict:
        low = self.outputs(inputs, sizes, "float32")
        return {o["name"]: rule.allowed(o["dtype"], expected[o["name"]], low[o["name"]])
                for o in self.d.outputs}

    def outputs(self, inputs: dict, sizes: Sizes, compute: str) -> dict:
        tensors = [inputs[t["name"]].reshape(()) if t.get("rank0") else inputs[t["name"]]
                   for t in self.d.inputs]
        weights = {w["parameter"]: inputs[w["name"]] for w in self.d.weights} if self.d.weights else None
        module_dtypes = [t["module_dtype"] for t in self.d.inputs]
        shapes = {o["name"]: tuple(expr.evaluate_int(d, sizes) for d in _shape(o["shape"]))
                  for o in self.d.outputs}
        values = [*tensors, *(weights or {}).values()]
        if values and _is_torch(values[0]):
            return self._in_process(tensors, weights, module_dtypes, sizes, compute, shapes)
        from .child import shared

        arrays = None if weights is None else {k: np.asarray(v) for k, v in weights.items()}
        found = shared().run(self.d.source, dict(sizes), [np.asarray(t) for t in tensors], compute=compute,
                             weights=arrays, module_dtypes=module_dtypes,
                             output_dtypes=[o["dtype"] for o in self.d.outputs])
        self._check_count(found)
        return {o["name"]: found[i].reshape(shapes[o["name"]]) for i, o in enumerate(self.d.outputs)}

    def _in_process(self, tensors, weights, module_dtypes, sizes, compute, shapes) -> dict:
        import torch

        from .runner import ModuleRunner

        if self._runner is None:
            self._runner = ModuleRunner(self.d.source)
        device = (tensors or list(weights.values()))[0].device
        found = self._runner.run(dict(sizes), tensors, weights, compute=getattr(torch, compute),
                                 device=device, module_dtypes=module_dtypes)
        self._check_count(found)
        return {o["name"]: found[i].to(getattr(torch, o["dtype"])).reshape(shapes[o["name"]])
                for i, o in enumerate(self.d.outputs)}

    def _check_count(self, found: list) -> None:
        if len(found) != len(self.d.outputs):
            raise ValueError(f"forward gave {len(found)} outputs, the task has {len(self.d.outputs)}")


def tensor_specs(d: TorchTask) -> tuple[tuple[TensorSpec, ...], tuple[TensorSpec, ...]]:
    """(inputs, the forward's inputs then the parameters; outputs) as the gate holds them."""
    inputs = []
    for t in d.inputs:
        if t["dtype"].startswith("int"):
            low, high = t["bounds"]
            inputs.append(TensorSpec(t["name"], t["dtype"], _shape(t["shape"]),
                                     generate=IntegerDraw(low, high), refresh=f"int:{low}:{high}"))
        else:
            inputs.append(TensorSpec(t["name"], t["dtype"], _shape(t["shape"])))
    inputs += [TensorSpec(w["name"], w["dtype"], _shape(w["shape"])) for w in d.weights]
    outputs = tuple(TensorSpec(o["name"], o["dtype"], _shape(o["shape"])) for o in d.outputs)
    return tuple(inputs), outputs


def to_task(d: TorchTask) -> Task:
    inputs, outputs = tensor_specs(d)
    specs = inputs + outputs
    reference = ModuleReference(d)
    return Task(
        name=d.name,
        description=f"the PyTorch module {d.name} (KernelBench's format): its forward, with its parameters "
                    f"as inputs; reference: the module in {d.reference_dtype}",
        sizes=dict(d.sizes),
        l0_sizes=tuple(dict(s) for s in d.l0_sizes),
        inputs=inputs,
        outputs=outputs,
        reference=reference,
        flops=FlopTable(d.flops),
        bytes=lambda s: float(sum(t.nbytes(s) for t in specs)),  # each tensor read or written once
        naive_source="",
        naive_plan=_starting_plan(d.name, list(inputs), list(outputs), d.sizes),
        tolerances={dtype: rule.tolerance(dtype) for dtype in rule.TOLERANCES},
        distributions=tuple(d.distributions),
        allowance=reference.allowance,
        allowance_why=f"the rule ({rule.describe()['float32']})",
        reference_on_gpu=True,
        l1_in_reference_child=True,  # the module's float64 forward on the host costs minutes at L1
        vendor=None,  # vendor.calls(): timed on a GPU host by bench/torchtask_vendor.py, not yet here
    )


def save(d: TorchTask, folder: Path) -> Path:
    """Write the description and the registry's stub into `folder` (a task directory on
    OPTIML_TASK_PATH); returns the stub's path."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{d.name}{SUFFIX}").write_text(json.dumps(d.to_dict(), indent=1))
    stub = folder / f"{d.name}.py"
    stub.write_text(f'"""The PyTorch module {d.name} as a task (python -m profiling.harness.torchtask task).'
                    '"""\n\nfrom pathlib import Path\n\nfrom profiling.harness.torchtask.task import load\n\n'
                    f'TASK = load(Path(__file__).with_suffix("{SUFFIX}"))\n')
    return stub


def load(path: Path | str) -> Task:
    """The Task a saved description holds; nothing runs until the gate asks for a reference."""
    return to_task(TorchTask.from_dict(json.loads(Path(path).read_text())))
