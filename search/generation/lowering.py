"""A first kernel without an LLM: a traced PyTorch module lowered to a plain CUDA kernel.

    lower(nodes, task) -> FirstKernel | NoKernel

`nodes` is the module's forward as torch.fx traced it (profiling/harness/torchtask/
trace.py, in a sandboxed child); `task` its description (torchtask.task.TorchTask: the
kernel's input names, the output, the sizes). This step lowers what it can read as one
family form and says why not otherwise:

- **elementwise map**: a chain of pointwise operations on tensors of the output's shape
  and on numbers (activations, arithmetic, clamps) becomes one kernel of a thread per
  element, each operation the C expression of torch's definition (`gelu`: the erf form,
  or the tanh form when `approximate='tanh'`), in float.
- **matrix product** (lower_products.py): one product of forward's two tensors, maybe
  transposed, maybe banded after (`triu`, `tril`), a thread per output.
- **reductions along one dimension** (lower_reductions.py): sums, means, extrema, their
  indices, norms, softmax and log-softmax over one dimension, pointwise operations
  before and after, a thread per row.
- **scans** (lower_scans.py): `cumsum` and `cumprod` along one dimension, from either
  end, of pointwise values of the inputs, a thread per row with a running value.
- **normalisations** (lower_norms.py): `LayerNorm` and `InstanceNormNd`, a thread per
  normalised row, two passes for the statistics.
- **convolutions and pooling** (lower_windows.py): `ConvNd` (stride, padding, dilation,
  groups, bias) and max/average `PoolNd`, a thread per output over its window.

The kernel is written as a newcomer would (the search's skills and rewrites make it
fast) and, like every candidate, only the gate says it is right. Pure: no torch here.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from typing import Any

from .lower_norms import NotNorm, lower_norm
from .lower_products import NotProduct, lower_product
from .lower_reductions import NotReduction, lower_reduction
from .lower_scans import NotScan, lower_scan
from .lower_windows import NotWindow, lower_window

BLOCK = 256


@dataclass(frozen=True)
class FirstKernel:
    source: str
    plan: dict[str, Any]
    family: str
    notes: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class NoKernel:
    reason: str


class _Unsupported(ValueError):
    pass


def _f(value: Any) -> str:
    """A float literal of CUDA."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _Unsupported(f"a constant {value!r} that is not a number")
    number = float(value)
    if math.isinf(number):
        return "INFINITY" if number > 0 else "(-INFINITY)"
    if math.isnan(number):
        raise _Unsupported("a NaN constant")
    return f"{number!r}f" if "e" in repr(number) or "." in repr(number) else f"{number!r}.0f"


def _gelu(v: str, approximate: str = "none") -> str:
    if approximate == "tanh":
        return f"(0.5f * {v} * (1.0f + tanhf(0.7978845608028654f * ({v} + 0.044715f * {v} * {v} * {v}))))"
    return f"(0.5f * {v} * (1.0f + erff({v} * 0.7071067811865476f)))"


def _softplus(v: str, beta: Any = 1.0, threshold: Any = 20.0) -> str:
    b, t = _f(beta), _f(threshold)
    return f"(({v}) * {b} > {t} ? ({v}) : log1pf(expf(({v}) * {b})) / {b})"


def _clamp(v: str, low: Any = None, high: Any = None) -> str:
    out = v
    if low is not None:
        out = f"fmaxf({out}, {_f(low)})"
    if high is not None:
        out = f"fminf({out}, {_f(high)})"
    return out


SELU_ALPHA, SELU_SCALE = 1.6732632423543772, 1.0507009873554805

# name -> (C expression of the first operand and the keyword/positional scalars, their names)
_UNARY = {
    "relu": (lambda v: f"fmaxf({v}, 0.0f)", ()),
    "relu6": (lambda v: f"fminf(fmaxf({v}, 0.0f), 6.0f)", ()),
    "sigmoid": (lambda v: f"(1.0f / (1.0f + expf(-({v}))))", ()),
    "tanh": (lambda v: f"tanhf({v})", ()),
    "exp": (lambda v: f"expf({v})", ()),
    "log": (lambda v: f"logf({v})", ()),
    "abs": (lambda v: f"fabsf({v})", ()),
    "neg": (lambda v: f"(-({v}))", ()),
    "sqrt": (lambda v: f"sqrtf({v})", ()),
    "rsqrt": (lambda v: f"rsqrtf({v})", ()),
    "erf": (lambda v: f"erff({v})", ()),
    "sin": (lambda v: f"sinf({v})", ()),
    "cos": (lambda v: f"cosf({v})", ()),
    "reciprocal": (lambda v: f"(1.0f / ({v}))", ()),
    "square": (lambda v: f"(({v}) * ({v}))", ()),
    "softsign": (lambda v: f"(({v}) / (1.0f + fabsf({v})))", ()),
    "silu": (lambda v: f"(({v}) / (1.0f + expf(-({v}))))", ()),
    "mish": (lambda v: f"(({v}) * tanhf({_softplus(v)}))", ()),
    "hardsigmoid": (lambda v: f"fminf(fmaxf(({v}) / 6.0f + 0.5f, 0.0f), 1.0f)", ()),
    "hardswish": (lambda v: f"(({v}) * fminf(fmaxf(({v}) + 3.0f, 0.0f), 6.0f) / 6.0f)", ()),
    "selu": (lambda v: f"({_f(SELU_SCALE)} * (({v}) > 0.0f ? ({v}) : {_f(SELU_ALPHA)} * (expf({v}) - 1.0f)))",
             ()),
    "gelu": (_gelu, ("approximate",)),
    "leaky_relu": (lambda v, s=0.01: f"(({v}) > 0.0f ? ({v}) : ({v}) * {_f(s)})", ("negative_slope",)),
    "elu": (lambda v, a=1.0: f"(({v}) > 0.0f ? ({v}) : {_f(a)} * (expf({v}) - 1.0f))", ("alpha",)),
    "hardtanh": (lambda v, lo=-1.0, hi=1.0: _clamp(v, lo, hi), ("min_val", "max_val")),
    "softplus": (_softplus, ("beta", "threshold")),
    "clamp": (_clamp, ("min", "max")),
    "clip": (_clamp, ("min", "max")),
}
# torch.nn modules by class: the function they apply and the attributes that are its scalars
_MODULES = {"ReLU": "relu", "ReLU6": "relu6", "Sigmoid": "sigmoid", "Tanh": "tanh", "GELU": "gelu",
            "LeakyReLU": "leaky_relu", "ELU": "elu", "SELU": "selu", "Hardsigmoid": "hardsigmoid",
            "Hardswish": "hardswish", "Hardtanh": "hardtanh", "Softplus": "softplus", "Softsign": "softsign",
            "SiLU": "silu", "Mish": "mish", "Identity": "identity"}
_BINARY = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "div": "/", "iadd": "+", "isub": "-",
           "imul": "*", "itruediv": "/"}
_ALIASES = {"relu_": "relu", "sigmoid_": "sigmoid", "tanh_": "tanh", "negative": "neg", "absolute": "abs",
            "swish": "silu", "multiply": "mul", "subtract": "sub", "divide": "div", "true_divide": "div",
            "clamp_min": "clamp_min", "clamp_max": "clamp_max"}


def lower(nodes: list[dict], task) -> FirstKernel | NoKernel:
    """The module's first kernel, or why there is none."""
    found = _lower(nodes, task)
    if isinstance(found, NoKernel):
        return found
    return replace(found, plan=with_widths(found.source, found.plan))


_WIDE = re.compile(r"\b(?:long\s+long|int64_t|uint64_t|size_t)\b")


def with_widths(source: str, plan: dict[str, Any]) -> dict[str, Any]:
    """The plan with each argument of a 64-bit integer parameter marked `i64:` (the gate
    passes a plain size as 4 bytes, and refuses a launch whose parameter is wider)."""
    launches = []
    for launch in plan["launches"]:
        match = re.search(rf"__global__\s+void\s+{re.escape(launch['kernel'])}\s*\(([^)]*)\)", source)
        params = [p.strip() for p in match.group(1).split(",")] if match else []
        args = [f"i64:{arg}" if i < len(params) and "*" not in params[i] and _WIDE.search(params[i])
                and not str(arg).startswith("i64:") else arg for i, arg in enumerate(launch["args"])]
        launches.append({**launch, "args": args})
    return {**plan, "launches": launches}


def _lower(nodes: list[dict], task) -> FirstKernel | NoKernel:
    try:
        return _elementwise(nodes, task)
    except _Unsupported as error:
        pointwise = str(error)
    try:
        source, plan, what = lower_product(nodes, task, _kernel_name(task.name))
        return FirstKernel(source, plan, "batched_contraction", (f"lowered from torch.fx: {what}",))
    except NotProduct as error:
        product = str(error)
    try:
        source, plan, what = lower_reduction(nodes, task, _kernel_name(task.name), _expression)
        return FirstKernel(source, plan, "row_map_reduce", (f"lowered from torch.fx: {what}",))
    except (NotReduction, _Unsupported) as error:
        reduction = str(error)
    try:
        source, plan, what = lower_scan(nodes, task, _kernel_name(task.name), _expression)
        return FirstKernel(source, plan, "row_scan", (f"lowered from torch.fx: {what}",))
    except (NotScan, _Unsupported) as error:
        scan = str(error)
    try:
        source, plan, what = lower_norm(nodes, task, _kernel_name(task.name))
        return FirstKernel(source, plan, "row_map_reduce", (f"lowered from torch.fx: {what}",))
    except NotNorm as error:
        norm = str(error)
    try:
        source, plan, what = lower_window(nodes, task, _kernel_name(task.name))
        return FirstKernel(source, plan, "window", (f"lowered from torch.fx: {what}",))
    except NotWindow as error:
        return NoKernel(f"not an elementwise chain: {pointwise}; not a matrix product: {product}; "
                        f"not reductions along one dimension: {reduction}; not a scan: {scan}; "
                        f"not a normalisation: {norm}; "
                        f"not a convolution or pooling: {error} (other families are not lowered yet)")


def _elementwise(nodes: list[dict], task) -> FirstKernel:
    if len(task.outputs) != 1 or task.weights:
        raise _Unsupported("parameters or several outputs" if task.weights else "several outputs")
    shape = list(task.outputs[0]["shape"])
    placeholders = [n for n in nodes if n["op"] == "placeholder"]
    if len(placeholders) != len(task.inputs):
        raise _Unsupported("forward's arguments are not the task's tensors")
    names = {p["name"]: t["name"] for p, t in zip(placeholders, task.inputs, strict=True)}
    if any(t["dtype"] != "float32" for t in (*task.inputs, *task.outputs)):
        raise _Unsupported("tensors other than float32")
    if any(list(t["shape"]) != shape for t in task.inputs):
        raise _Unsupported("inputs of another shape than the output's (broadcasting, reductions)")
    lines, values = [], {}
    for p in placeholders:
        values[p["name"]] = f"v_{names[p['name']]}"
        lines.append(f"float v_{names[p['name']]} = {names[p['name']]}[i];")
    result = None
    for node in nodes:
        if node["op"] == "output":
            (out,) = node["args"][:1]
            result = _value(out[0] if isinstance(out, list) and len(out) == 1 else out, values)
            continue
        if node["op"] == "placeholder":
            continue
        if node["op"] not in ("call_function", "call_method", "call_module"):
            raise _Unsupported(f"{node['op']} {node['target']}")
        if node.get("shape") is not None and list(node["shape"]) != _numbers(task, shape):
            raise _Unsupported(f"{node['target']} makes a tensor of shape {node['shape']}")
        values[node["name"]] = f"t{len(lines)}"
        lines.append(f"float t{len(lines)} = {_expression(node, values)};")
    if result is None:
        raise _Unsupported("no output")
    out = task.outputs[0]["name"]
    params = ", ".join([*(f"const float* {t['name']}" for t in task.inputs), f"float* {out}", "long long n"])
    body = "\n        ".join([*lines, f"{out}[i] = {result};"])
    source = f"""// The module's forward, a thread per element (lowered from its torch.fx graph).
extern "C" __global__ void {_kernel_name(task.name)}({params}) {{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {{
        {body}
    }}
}}
"""
    size = " * ".join(f"({d})" for d in shape) or "1"
    plan = {"launches": [{"kernel": _kernel_name(task.name), "grid": [f"cdiv({size}, BLOCK)"],
                          "block": ["BLOCK"], "shared_bytes": 0,
                          "args": [*(t["name"] for t in task.inputs), out, size]}],
            "scratch": [], "tunables": {"BLOCK": BLOCK}}
    ops = [n["target"] for n in nodes if n["op"].startswith("call")]
    return FirstKernel(source, plan, "elementwise_map", (f"lowered from torch.fx: {', '.join(ops)}",))


def _numbers(task, shape: list) -> list:
    """The output's shape at the sizes the graph was traced at (the first L0 point)."""
    sizes = task.l0_sizes[0] if task.l0_sizes else task.sizes
    from profiling.harness import expr

    return [d if isinstance(d, int) else expr.evaluate_int(str(d), sizes) for d in shape]


def _value(argument: Any, values: dict[str, str]) -> str:
    if isinstance(argument, dict) and "node" in argument:
        if argument["node"] not in values:
            raise _Unsupported(f"a value ({argument['node']}) that is not an element of a tensor")
        return values[argument["node"]]
    return _f(argument)


def _expression(node: dict, values: dict[str, str]) -> str:
    target = node["target"]
    args, kwargs = list(node["args"]), dict(node["kwargs"])
    if node["op"] == "call_module":
        if target not in _MODULES:
            raise _Unsupported(f"the module {target}")
        name, kwargs = _MODULES[target], {**node["attributes"]}
        kwargs.pop("inplace", None)
        kwargs.pop("parameters", None)
        if name == "identity":
            return _value(args[0], values)
    else:
        name = _ALIASES.get(target, target)
        kwargs.pop("inplace", None)
    if name in _BINARY:
        if len(args) != 2 or kwargs.get("alpha", 1) != 1:
            raise _Unsupported(f"{target} with arguments other than two values")
        return f"({_value(args[0], values)} {_BINARY[name]} {_value(args[1], values)})"
    if name in ("pow",) and len(args) == 2 and not isinstance(args[1], dict):
        exponent = args[1]
        v = _value(args[0], values)
        return f"({v} * {v})" if exponent == 2 else f"powf({v}, {_f(exponent)})"
    if name in ("clamp_min", "clamp_max") and len(args) == 2:
        return _clamp(_value(args[0], values), *((args[1], None) if name == "clamp_min" else (None, args[1])))
    if name not in _UNARY:
        raise _Unsupported(f"the operation {target}")
    make, scalar_names = _UNARY[name]
    scalars = args[1:]
    if len(scalars) > len(scalar_names) or set(kwargs) - set(scalar_names):
        raise _Unsupported(f"{target} with arguments {sorted(set(kwargs) - set(scalar_names)) or scalars}")
    named = dict(zip(scalar_names, scalars, strict=False))
    named |= {k: kwargs[k] for k in scalar_names if k in kwargs}
    if any(isinstance(v, dict) for v in named.values()):
        raise _Unsupported(f"{target} with a tensor where a number goes")
    ordered = [named[k] for k in scalar_names if k in named]
    if len(ordered) != len(named):
        raise _Unsupported(f"{target}'s arguments out of order")
    keyword = {k: named[k] for k in scalar_names if k in named}
    if name == "gelu":
        return _gelu(_value(args[0], values), str(keyword.get("approximate", "none")))
    positional = []
    for k in scalar_names:  # the make functions take their scalars by position, in this order
        if k not in keyword:
            break
        positional.append(keyword[k])
    if len(positional) != len(keyword):
        defaults = {"min": None, "max": None, "min_val": -1.0, "max_val": 1.0, "beta": 1.0, "threshold": 20.0}
        positional = [keyword.get(k, defaults.get(k)) for k in scalar_names]
    return make(_value(args[0], values), *positional)


def _kernel_name(task_name: str) -> str:
    cleaned = "".join(c if c.isalnum() else "_" for c in task_name)
    return f"k_{cleaned}"
