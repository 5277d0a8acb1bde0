"""Lowering a traced module's normalisation to a plain kernel (lowering.py dispatches): a
thread per normalised group of elements, its mean and variance in two passes, then the
normalised values, as a newcomer writes it.

- `LayerNorm`: over the last len(normalized_shape) dimensions, each element's weight and
  bias (when elementwise_affine) by its position in them;
- `InstanceNorm1d/2d/3d` (instance statistics: `track_running_stats` off): over each
  (sample, channel)'s positions, a channel's weight and bias when affine.

The variance is the biased one (torch's), eps the module's. Group norm is not lowered:
its group count is a constant of the module that no tensor shape carries, so a kernel
could not follow it when the task's sizes change; batch norm is not either (training
mode's batch statistics against eval mode's running ones is a choice of the caller).
"""

from __future__ import annotations

from .lower_windows import _parameter

_INSTANCE = {"InstanceNorm1d": 1, "InstanceNorm2d": 2, "InstanceNorm3d": 3}


class NotNorm(ValueError):
    pass


def lower_norm(nodes: list[dict], task, kernel_name: str) -> tuple[str, dict, str]:
    """(source, plan, what it computes) or NotNorm."""
    calls = [n for n in nodes if n["op"] in ("call_function", "call_method", "call_module")]
    if len(calls) != 1 or calls[0]["op"] != "call_module" or \
            calls[0]["target"] not in ("LayerNorm", *_INSTANCE):
        raise NotNorm("not one LayerNorm or InstanceNorm module")
    node, a = calls[0], calls[0]["attributes"]
    if len(task.inputs) != 1 or len(task.outputs) != 1 or task.inputs[0]["dtype"] != "float32":
        raise NotNorm("not one float32 tensor in and one out")
    x, out = task.inputs[0], task.outputs[0]
    shape = [str(d) for d in x["shape"]]
    if node["target"] == "LayerNorm":
        count = len(a.get("normalized_shape") or [])
        if not 1 <= count <= len(shape):
            raise NotNorm(f"a LayerNorm over {count} of {len(shape)} dimensions")
        rows, length = shape[:-count], shape[-count:]
        affine = bool(a.get("elementwise_affine", True))
        at = "j"  # an element's weight: its position in the normalised dimensions
    else:
        spatial = _INSTANCE[node["target"]]
        if len(shape) != spatial + 2 or a.get("track_running_stats"):
            raise NotNorm("an InstanceNorm of another rank, or with running statistics")
        rows, length = shape[:2], shape[2:]
        affine = bool(a.get("affine", False))
        at = "row % C"  # a channel's weight
    weight, bias = (_parameter(task, "weight"), _parameter(task, "bias")) if affine else (None, None)
    if affine and (weight is None or bias is None or len(task.weights) != 2):
        raise NotNorm("a normalisation whose parameters are not its weight and bias")
    if not affine and task.weights:
        raise NotNorm("parameters the normalisation does not use")
    eps = float(a.get("eps", 1e-5))
    params = [f"const float* {x['name']}", f"float* {out['name']}", "long long ROWS", "long long R"]
    args = [x["name"], out["name"], _product(rows), _product(length)]
    scale = ""
    if affine:
        params += [f"const float* {weight}", f"const float* {bias}"]
        args += [weight, bias]
        scale = f" * {weight}[{at}] + {bias}[{at}]"
    if "row % C" in scale:
        params.append("int C")
        args.append(shape[1])
    source = f"""// The module's {node['target']}, a thread per normalised row (lowered from torch.fx).
extern "C" __global__ void {kernel_name}({", ".join(params)}) {{
    long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (row < ROWS) {{
        const float* xr = {x['name']} + row * R;
        float* yr = {out['name']} + row * R;
        float mean = 0.0f;
        for (long long j = 0; j < R; j++) {{
            mean += xr[j];
        }}
        mean = mean / (float)R;
        float var = 0.0f;
        for (long long j = 0; j < R; j++) {{
            float d = xr[j] - mean;
            var += d * d;
        }}
        var = var / (float)R;
        float inv = 1.0f / sqrtf(var + {eps!r}f);
        for (long long j = 0; j < R; j++) {{
            yr[j] = (xr[j] - mean) * inv{scale};
        }}
    }}
}}
"""
    launch = {"kernel": kernel_name, "grid": [f"cdiv({_product(rows)}, BLOCK)"], "block": ["BLOCK"],
              "shared_bytes": 0, "args": args}
    plan = {"launches": [launch], "scratch": [], "tunables": {"BLOCK": 256}}
    return source, plan, f"{node['target']} over {len(length)} dimension(s){', affine' if affine else ''}"


def _product(dims: list[str]) -> str:
    return " * ".join(f"({d})" for d in dims) or "1"
