"""Lowering a traced module's cumulative sum or product to a plain kernel (lowering.py
dispatches): a thread per row walking it with a running value, as a newcomer writes it.

    torch.cumsum(x, dim)                         a running sum along dim
    torch.cumprod(x, dim)                        a running product
    torch.cumsum(x.flip(dim), dim).flip(dim)     a running sum from the row's end
    torch.cumsum(x * mask, dim)                  pointwise operations of the inputs first

The row is `dim`; rows are every other position (INNER apart along it when dim is not
the last), the inputs all of the output's shape, float32 or bool (a bool input is read
as 1.0f or 0.0f). The running value is written out at each element, so the kernel lifts
as a scan (search/engine/forms/scans.py).
"""

from __future__ import annotations

from collections.abc import Callable

_SCANS = {"cumsum": ("0.0f", "+="), "cumprod": ("1.0f", "*=")}
_TYPES = {"float32": "float", "bool": "bool"}


class NotScan(ValueError):
    pass


def lower_scan(nodes: list[dict], task, kernel_name: str,
               pointwise: Callable[[dict, dict[str, str]], str]) -> tuple[str, dict, str]:
    """(source, plan, what it computes) or NotScan. `pointwise(node, values)` is
    lowering.py's C expression of a pointwise node over the expressions `values`."""
    calls = [n for n in nodes if n["op"] in ("call_function", "call_method", "call_module")]
    scans = [n for n in calls if n["target"] in _SCANS]
    if len(scans) != 1:
        raise NotScan("not one cumsum or cumprod")
    scan = scans[0]
    if task.weights or len(task.outputs) != 1 or task.outputs[0]["dtype"] != "float32":
        raise NotScan("parameters, or not one float32 output")
    shape = [str(d) for d in task.outputs[0]["shape"]]
    if any([str(d) for d in t["shape"]] != shape or t["dtype"] not in _TYPES for t in task.inputs):
        raise NotScan("inputs of another shape than the output's, or of a dtype other than float32 or bool")
    dim = _dim(scan, len(shape))
    placeholders = [n for n in nodes if n["op"] == "placeholder"]
    if len(placeholders) != len(task.inputs):
        raise NotScan("forward's arguments are not the task's tensors")
    values = {p["name"]: f"v_{t['name']}" for p, t in zip(placeholders, task.inputs, strict=True)}
    flips = [n for n in calls if n["target"] == "flip"]
    reverse = _reversed(flips, scan, nodes, dim, len(shape))
    lines: list[str] = []
    result = None
    for node in calls:
        if node is scan or node in flips:
            continue
        if nodes.index(node) > nodes.index(scan):
            raise NotScan(f"{node['target']} after the scan")
        values[node["name"]] = f"t{len(lines)}"
        lines.append(f"float t{len(lines)} = {pointwise(node, values)};")
    for node in nodes:
        if node["op"] == "output":
            (out,) = node["args"][:1]
            result = (out[0] if isinstance(out, list) and len(out) == 1 else out) or {}
    final = flips[-1] if reverse else scan
    if not isinstance(result, dict) or result.get("node") != final["name"]:
        raise NotScan("the output is not the scan")
    source_node = _input(flips[0] if reverse else scan)
    if source_node not in values:
        raise NotScan("the scan's input is not a pointwise value of the inputs")
    identity, update = _SCANS[scan["target"]]
    out = task.outputs[0]["name"]
    at = "o * R * INNER + j * INNER + i"
    reads = [f"float {values[p['name']]} = (float){t['name']}[{at}];"
             for p, t in zip(placeholders, task.inputs, strict=True)]
    params = ", ".join([*(f"const {_TYPES[t['dtype']]}* {t['name']}" for t in task.inputs), f"float* {out}",
                        "long long OUTER", "long long R", "long long INNER"])
    loop = "for (long long j = R - 1; j >= 0; j--)" if reverse else "for (long long j = 0; j < R; j++)"
    body = "\n            ".join([*reads, *lines, f"acc {update} {values[source_node]};",
                                   f"{out}[{at}] = acc;"])
    where = f"over dimension {dim}{' from the end' if reverse else ''}"
    source = f"""// The module's {scan['target']} {where}, a thread per row walking it (torch.fx).
extern "C" __global__ void {kernel_name}({params}) {{
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t < OUTER * INNER) {{
        long long o = t / INNER;
        long long i = t % INNER;
        float acc = {identity};
        {loop} {{
            {body}
        }}
    }}
}}
"""

    def product(dims: list[str]) -> str:
        return " * ".join(f"({d})" for d in dims) or "1"

    outer, inner = product(shape[:dim]), product(shape[dim + 1:])
    plan = {"launches": [{"kernel": kernel_name, "grid": [f"cdiv(({outer}) * ({inner}), BLOCK)"],
                          "block": ["BLOCK"], "shared_bytes": 0,
                          "args": [*(t["name"] for t in task.inputs), out, outer, shape[dim], inner]}],
            "scratch": [], "tunables": {"BLOCK": 256}}
    ops = ", ".join(n["target"] for n in calls)
    return source, plan, f"{ops} over dimension {dim}{' from the end' if reverse else ''}"


def _reversed(flips: list[dict], scan: dict, nodes: list[dict], dim: int, rank: int) -> bool:
    """Whether the scan runs from the row's end: flip(dim) -> scan -> flip(dim)."""
    if not flips:
        return False
    if len(flips) != 2 or _input(scan) != flips[0]["name"] or _input(flips[1]) != scan["name"]:
        raise NotScan("a flip other than around the scan")
    for flip in flips:
        dims = flip["kwargs"].get("dims", flip["args"][1:] if len(flip["args"]) > 1 else None)
        if isinstance(dims, list) and len(dims) == 1 and isinstance(dims[0], list):
            dims = dims[0]
        if not isinstance(dims, list) or [d % rank for d in dims if isinstance(d, int)] != [dim]:
            raise NotScan(f"a flip over {dims!r}, not the scan's dimension")
    return True


def _input(node: dict) -> str | None:
    first = node["args"][0] if node["args"] else node["kwargs"].get("input")
    return first.get("node") if isinstance(first, dict) else None


def _dim(node: dict, rank: int) -> int:
    dim = node["kwargs"].get("dim", node["args"][1] if len(node["args"]) > 1 else None)
    if not isinstance(dim, int) or isinstance(dim, bool) or not -rank <= dim < rank:
        raise NotScan(f"{node['target']} over {dim!r}, not one dimension")
    return dim % rank
