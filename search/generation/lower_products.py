"""Lowering a traced module's matrix product to a plain kernel (lowering.py dispatches).

One `matmul` / `mm` / `bmm` / `@` of two of forward's tensors, each maybe transposed
first (`A.T`, `A.t()`, `A.transpose(-2, -1)`), then maybe `triu` / `tril` of the
product, becomes a thread per output summing over k, as a newcomer writes it:

    out[b][row][col] = sum_k A[b][row][k] * B[b][k][col]

A's leading dimensions are rows too when B is a matrix (a 3-D tensor times a matrix),
and a batch (`blockIdx.z`) when both have it. The plain kernel lifts as a contraction,
so the tile card takes it from there. Anything else is not lowered here (NotProduct).
"""

from __future__ import annotations

from typing import Any

TILE = 16  # a 16 x 16 block of outputs: 256 threads
_PRODUCTS = ("matmul", "mm", "bmm")
_TRANSPOSES = ("t", "T", "transpose", "mT", "getattr")


class NotProduct(ValueError):
    pass


def _product(dims: list[str]) -> str:
    """Sizes multiplied, each parenthesised (`W + 1`); one alone as it is (a grid's plane
    must name the very argument the kernel gets)."""
    return dims[0] if len(dims) == 1 else " * ".join(f"({d})" for d in dims)


def lower_product(nodes: list[dict], task, kernel_name: str) -> tuple[str, dict, str]:
    """(source, plan, what it computes) or NotProduct."""
    calls = [n for n in nodes if n["op"] in ("call_function", "call_method", "call_module")]
    products = [n for n in calls if n["target"] in _PRODUCTS]
    if len(products) != 1 or task.weights or len(task.outputs) != 1 or len(task.inputs) != 2:
        raise NotProduct("not one product of forward's two tensors")
    if any(t["dtype"] != "float32" for t in (*task.inputs, *task.outputs)):
        raise NotProduct("tensors other than float32")
    product = products[0]
    placeholders = [n["name"] for n in nodes if n["op"] == "placeholder"]
    by_node = {n["name"]: n for n in nodes}
    factors = [_factor(arg, by_node, placeholders) for arg in product["args"][:2]]
    epilogue = [n for n in calls if n is not product and n not in (f[2] for f in factors if f[2])]
    band = _band(epilogue, product)
    (a_index, a_t, _), (b_index, b_t, _) = factors
    a_shape, b_shape = list(task.inputs[a_index]["shape"]), list(task.inputs[b_index]["shape"])
    if len(b_shape) not in (2, len(a_shape)) or len(a_shape) < 2:
        raise NotProduct(f"factors of {len(a_shape)} and {len(b_shape)} dimensions")
    if (a_t or b_t) and (len(a_shape) != 2 or len(b_shape) != 2):
        raise NotProduct("a transposed factor of more than two dimensions")
    m, k = (a_shape[-1], a_shape[-2]) if a_t else (a_shape[-2], a_shape[-1])
    k2, n = (b_shape[-1], b_shape[-2]) if b_t else (b_shape[-2], b_shape[-1])
    if str(k) != str(k2):
        raise NotProduct(f"inner sizes {k} and {k2} that are not one symbol")
    batched = len(b_shape) == len(a_shape) > 2
    lead = [str(d) for d in a_shape[:-2]]
    rows = str(m) if batched or not lead else _product([*lead, str(m)])
    batch = _product(lead) if batched else ""
    a_name, b_name = task.inputs[a_index]["name"], task.inputs[b_index]["name"]
    a_elem = f"{a_name}[((long long)b * K + k) * M + row]" if a_t else \
        f"{a_name}[((long long)b * M + row) * K + k]"
    b_elem = f"{b_name}[((long long)b * N + col) * K + k]" if b_t else \
        f"{b_name}[((long long)b * K + k) * N + col]"
    if not batched:
        a_elem = a_elem.replace("(long long)b * K + k) * M", "(long long)k) * M").replace(
            "(long long)b * M + row) * K", "(long long)row) * K")
        b_elem = b_elem.replace("(long long)b * N + col) * K", "(long long)col) * K").replace(
            "(long long)b * K + k) * N", "(long long)k) * N")
    out = task.outputs[0]["name"]
    value = {"": "acc", "triu": "(col >= row ? acc : 0.0f)", "tril": "(col <= row ? acc : 0.0f)"}[band]
    plane = "int b = blockIdx.z;\n    " if batched else ""
    where = "((long long)b * M + row) * N + col" if batched else "(long long)row * N + col"
    first, second = task.inputs[0]["name"], task.inputs[1]["name"]
    params = f"const float* {first}, const float* {second}, float* {out}, int M, int N, int K"
    source = f"""// The module's matrix product, a thread per output (lowered from its torch.fx graph).
extern "C" __global__ void {kernel_name}({params}{", int BATCH" if batched else ""}) {{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    {plane}if (row < M && col < N) {{
        float acc = 0.0f;
        for (int k = 0; k < K; k++) {{
            acc += {a_elem} * {b_elem};
        }}
        {out}[{where}] = {value};
    }}
}}
"""
    grid = [f"cdiv({n}, {TILE})", f"cdiv({rows}, {TILE})", *([batch] if batched else [])]
    args = [first, second, out, str(rows), str(n), str(k), *([batch] if batched else [])]
    plan = {"launches": [{"kernel": kernel_name, "grid": grid, "block": [TILE, TILE], "shared_bytes": 0,
                          "args": args}], "scratch": [], "tunables": {}}
    what = f"{'batched ' if batched else ''}product {'A^T' if a_t else 'A'} {'B^T' if b_t else 'B'}"
    return source, plan, what + (f", then {band}" if band else "")


def _factor(argument: Any, by_node: dict[str, dict],
            placeholders: list[str]) -> tuple[int, bool, dict | None]:
    """(which of forward's tensors, transposed?, the transposing node) of a product's operand."""
    if not isinstance(argument, dict) or "node" not in argument:
        raise NotProduct("a product of something other than tensors")
    node = by_node[argument["node"]]
    if node["op"] == "placeholder":
        return placeholders.index(node["name"]), False, None
    if node["target"] in _TRANSPOSES and node["args"] and isinstance(node["args"][0], dict):
        source = by_node.get(node["args"][0].get("node", ""))
        rest = node["args"][1:]
        transposes = (node["target"] in ("t", "T", "mT") and not rest) or \
            (node["target"] == "getattr" and rest in (["T"], ["mT"])) or \
            (node["target"] == "transpose" and sorted(rest) in ([0, 1], [-2, -1], [-1, 0]))
        if transposes and source is not None and source["op"] == "placeholder":
            return placeholders.index(source["name"]), True, node
    raise NotProduct(f"an operand made by {node['target']}")


def _band(epilogue: list[dict], product: dict) -> str:
    if not epilogue:
        return ""
    if len(epilogue) == 1 and epilogue[0]["target"] in ("triu", "tril") and \
            epilogue[0]["args"][:1] == [{"node": product["name"]}] and epilogue[0]["args"][1:] in ([], [0]) \
            and not epilogue[0]["kwargs"].get("diagonal"):
        return epilogue[0]["target"]
    raise NotProduct(f"operations around the product ({', '.join(n['target'] for n in epilogue)})")
