"""Lowering a traced module's reductions along one dimension to a plain kernel
(lowering.py dispatches): a thread per row, a loop over the row per reduction.

Reductions (`sum`, `mean`, `max`/`min` (and their values of the (values, indices) pair),
`amax`, `amin`, `prod`, `argmax`, `argmin`, `norm` with p 1 or 2, `softmax`,
`log_softmax`) over one dimension `dim` of forward's one tensor, with pointwise
operations before them (their input: `abs(x)`, `x ** 2`) and after them (`x / rms`,
`sqrt(mean + eps)`). The row is the reduced dimension; rows are every other position,
so a reduction over a middle dimension walks a column (`INNER` apart), as a newcomer
writes it. The output is either a row's value (`keepdim` or not) or the tensor's shape.

    float r1 = identity;  for (j < R) { float v = x[row's j-th]; r1 = r1 op (input); }
    ...                   out[row] = ...  or  for (j < R) out[row's j-th] = f(v, r1, ...);

`softmax` is max, then a sum of exp(v - max), then exp(v - max) / sum; `log_softmax`
the same with v - max - log(sum) (torch's own order).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_PLAIN = {"sum": ("0.0f", "{a} + ({e})"), "prod": ("1.0f", "{a} * ({e})"),
          "max": ("-INFINITY", "fmaxf({a}, {e})"), "amax": ("-INFINITY", "fmaxf({a}, {e})"),
          "min": ("INFINITY", "fminf({a}, {e})"), "amin": ("INFINITY", "fminf({a}, {e})")}
_REDUCTIONS = (*_PLAIN, "mean", "argmax", "argmin", "norm", "softmax", "log_softmax")


class NotReduction(ValueError):
    pass


def lower_reduction(nodes: list[dict], task, kernel_name: str,
                    pointwise: Callable[[dict, dict[str, str]], str]) -> tuple[str, dict, str]:
    """(source, plan, what it computes) or NotReduction. `pointwise(node, values)` is
    lowering.py's C expression of a pointwise node over the expressions `values`."""
    calls = [n for n in nodes if n["op"] in ("call_function", "call_method", "call_module")]
    reductions = [n for n in calls if n["target"] in _REDUCTIONS]
    if not reductions:
        raise NotReduction("no reduction")
    if len(task.inputs) != 1 or task.weights or len(task.outputs) != 1 or \
            task.inputs[0]["dtype"] != "float32":
        raise NotReduction("not one float32 tensor in and one out")
    shape = [str(d) for d in task.inputs[0]["shape"]]
    dims = {_dim(n, len(shape)) for n in reductions}
    if len(dims) != 1:
        raise NotReduction("reductions over different dimensions")
    (dim,) = dims
    def product(dims: list[str]) -> str:
        return " * ".join(f"({d})" for d in dims) or "1"

    outer, reduced, inner = product(shape[:dim]), shape[dim], product(shape[dim + 1:])
    state = _State()
    for node in nodes:
        if node["op"] == "placeholder":
            state.values[node["name"]] = ("element", "v")
        elif node["op"] == "output":
            state.result = _argument_of_output(node)
        elif node["target"] in _REDUCTIONS:
            state.reduce(node)
        elif node["target"] == "getitem":
            state.getitem(node)
        elif node["op"] in ("call_function", "call_method", "call_module"):
            domains = [state.values[a["node"]][0] for a in _node_args(node) if a["node"] in state.values]
            if len(domains) != len(_node_args(node)):
                raise NotReduction(f"{node['target']} of a value that is no element or row value")
            exprs = {name: expr for name, (_, expr) in state.values.items()}
            domain = "element" if "element" in domains else "row"
            state.values[node["name"]] = (domain, pointwise(node, exprs))
        else:
            raise NotReduction(f"{node['op']} {node['target']}")
    if state.result not in state.values:
        raise NotReduction("the output is not a value of the rows")
    domain, expr = state.values[state.result]
    out = task.outputs[0]
    index = state.indices.get(state.result)
    kind = "long long" if out["dtype"] == "int64" else "float" if out["dtype"] == "float32" else ""
    if not kind or (index is not None) != (kind == "long long"):
        raise NotReduction(f"an output of dtype {out['dtype']}")
    if domain == "element":
        write = (f"for (long long j = 0; j < R; j++) {{\n            float v = xr[j * INNER];\n"
                 f"            {out['name']}[o * R * INNER + j * INNER + i] = {expr};\n        }}")
    else:
        write = f"{out['name']}[t] = {index or expr};"
    body = "\n        ".join([*state.lines, write])
    source = f"""// The module's reductions over dimension {dim}, a thread per row (lowered from torch.fx).
extern "C" __global__ void {kernel_name}(const float* {task.inputs[0]['name']}, {kind}* {out['name']},
                                         long long OUTER, long long R, long long INNER) {{
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t < OUTER * INNER) {{
        long long o = t / INNER;
        long long i = t % INNER;
        const float* xr = {task.inputs[0]['name']} + o * R * INNER + i;
        {body}
    }}
}}
"""
    plan = {"launches": [{"kernel": kernel_name, "grid": [f"cdiv(({outer}) * ({inner}), BLOCK)"],
                          "block": ["BLOCK"], "shared_bytes": 0,
                          "args": [task.inputs[0]["name"], out["name"], outer, reduced, inner]}],
            "scratch": [], "tunables": {"BLOCK": 256}}
    return source, plan, f"{', '.join(n['target'] for n in calls)} over dimension {dim}"


class _State:
    def __init__(self) -> None:
        self.values: dict[str, tuple[str, str]] = {}  # node -> (domain, C expression)
        self.indices: dict[str, str] = {}  # an arg-reduction's index register, by node
        self.pairs: dict[str, tuple[str, str]] = {}  # max/min with a dim: (values, indices)
        self.lines: list[str] = []
        self.result = ""

    def _loop(self, update: str) -> None:
        self.lines.append(f"for (long long j = 0; j < R; j++) {{\n            float v = xr[j * INNER];\n"
                          f"            {update}\n        }}")

    def _input(self, node: dict) -> str:
        (first, *_) = node["args"] or [None]
        if not isinstance(first, dict) or first.get("node") not in self.values:
            raise NotReduction(f"{node['target']} of something other than a value of the rows")
        domain, expr = self.values[first["node"]]
        if domain != "element":
            raise NotReduction(f"{node['target']} of a row's value")
        return expr

    def reduce(self, node: dict) -> None:
        target, e, n = node["target"], self._input(node), len(self.lines)
        r = f"r{n}"
        if target in ("argmax", "argmin") or (target in ("max", "min") and _has_dim(node)):
            better = ">" if target in ("argmax", "max") else "<"
            start = "-INFINITY" if better == ">" else "INFINITY"
            self.lines.append(f"float {r} = {start};\n        long long a{n} = 0;")
            self._loop(f"if (({e}) {better} {r}) {{ {r} = {e}; a{n} = j; }}")
            if target in ("argmax", "argmin"):
                self.values[node["name"]] = ("row", f"a{n}")
                self.indices[node["name"]] = f"a{n}"
            else:
                self.pairs[node["name"]] = (r, f"a{n}")
            return
        if target in ("softmax", "log_softmax"):
            self.lines.append(f"float {r} = -INFINITY;")
            self._loop(f"{r} = fmaxf({r}, {e});")
            self.lines.append(f"float s{n} = 0.0f;")
            self._loop(f"s{n} += expf(({e}) - {r});")
            value = f"(expf(({e}) - {r}) / s{n})" if target == "softmax" else f"(({e}) - {r} - logf(s{n}))"
            self.values[node["name"]] = ("element", value)
            return
        if target == "norm":
            p = _keyword(node, "p", 1, 2)
            if p not in (1, 2, 1.0, 2.0, "fro"):
                raise NotReduction(f"a norm of order {p}")
            term = f"fabsf({e})" if p in (1, 1.0) else f"({e}) * ({e})"
            self.lines.append(f"float {r} = 0.0f;")
            self._loop(f"{r} += {term};")
            self.values[node["name"]] = ("row", r if p in (1, 1.0) else f"sqrtf({r})")
            return
        identity, update = _PLAIN["sum" if target == "mean" else target]
        self.lines.append(f"float {r} = {identity};")
        self._loop(f"{r} = {update.format(a=r, e=e)};")
        self.values[node["name"]] = ("row", f"({r} / (float)R)" if target == "mean" else r)

    def getitem(self, node: dict) -> None:
        source, position = node["args"][0], node["args"][1] if len(node["args"]) > 1 else None
        if not isinstance(source, dict) or source.get("node") not in self.pairs or position not in (0, 1):
            raise NotReduction("an item of something other than max or min over a dimension")
        value, index = self.pairs[source["node"]]
        self.values[node["name"]] = ("row", value if position == 0 else index)
        if position == 1:
            self.indices[node["name"]] = index


def _keyword(node: dict, name: str, position: int, default: Any) -> Any:
    if name in node["kwargs"]:
        return node["kwargs"][name]
    return node["args"][position] if len(node["args"]) > position else default


def _has_dim(node: dict) -> bool:
    return _keyword(node, "dim", 1, None) is not None


def _dim(node: dict, rank: int) -> int:
    position = 2 if node["target"] == "norm" else 1
    dim = _keyword(node, "dim", position, None)
    if isinstance(dim, list) and len(dim) == 1:
        dim = dim[0]
    if not isinstance(dim, int) or isinstance(dim, bool) or not -rank <= dim < rank:
        raise NotReduction(f"{node['target']} over {dim!r}, not one dimension (every element is not lowered: "
                           "one thread would walk them all)")
    return dim % rank


def _node_args(node: dict) -> list[dict]:
    args = [*node["args"], *node["kwargs"].values()]
    return [a for a in args if isinstance(a, dict) and "node" in a]


def _argument_of_output(node: dict) -> str:
    (out,) = node["args"][:1]
    out = out[0] if isinstance(out, list) and len(out) == 1 else out
    if not isinstance(out, dict) or "node" not in out:
        raise NotReduction("an output that is not one tensor")
    return out["node"]
